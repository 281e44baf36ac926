// GPT-2's byte <-> code point table, built once.
#include "core/tokenizer/byte_level.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace kvc::tokenizer {

namespace {

bool stands_for_itself(int b) {
  return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

struct Table {
  std::array<std::string, 256> utf8;   // byte -> UTF-8 of its code point
  std::array<int16_t, 0x144> byte_of;  // code point (all below U+0144) -> byte, or -1

  Table() {
    byte_of.fill(-1);
    int next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const int cp = stands_for_itself(b) ? b : next++;
      byte_of[static_cast<size_t>(cp)] = static_cast<int16_t>(b);
      // Every code point here is below U+0800: one or two UTF-8 bytes.
      if (cp < 0x80) {
        utf8[static_cast<size_t>(b)] = std::string(1, static_cast<char>(cp));
      } else {
        utf8[static_cast<size_t>(b)] = {static_cast<char>(0xc0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3f))};
      }
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

void append_byte_level(std::string_view raw, std::string& out) {
  const Table& t = table();
  for (const char c : raw) out += t.utf8[static_cast<unsigned char>(c)];
}

std::string decode_byte_level(std::string_view s) {
  const Table& t = table();
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c0 = static_cast<unsigned char>(s[i]);
    int cp = -1;
    size_t len = 1;
    if (c0 < 0x80) {
      cp = c0;
    } else if ((c0 & 0xe0) == 0xc0 && i + 1 < s.size() && (static_cast<unsigned char>(s[i + 1]) & 0xc0) == 0x80) {
      cp = ((c0 & 0x1f) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3f);
      len = 2;
    }
    if (cp >= 0 && cp < static_cast<int>(t.byte_of.size()) && t.byte_of[static_cast<size_t>(cp)] >= 0) {
      out += static_cast<char>(t.byte_of[static_cast<size_t>(cp)]);
      i += len;
    } else {
      // Outside the alphabet: copy this code point's bytes unchanged.
      size_t n = 1;
      if (c0 >= 0xc0) n = c0 >= 0xf0 ? 4 : c0 >= 0xe0 ? 3 : 2;
      n = std::min(n, s.size() - i);
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace kvc::tokenizer

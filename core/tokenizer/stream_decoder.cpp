// StreamDecoder and UTF-8 assembly: ids to text as they are generated.
#include "core/tokenizer/tokenizer.h"

namespace kvc::tokenizer {
namespace {

constexpr std::string_view k_replacement = "\xef\xbf\xbd";  // U+FFFD

// How many bytes at `s` form a complete, valid UTF-8 sequence (> 0); or 0 when the bytes are a
// valid but incomplete start of one; or -n when the first n bytes are invalid (the maximal
// invalid subpart, replaced by one U+FFFD as Unicode recommends).
int classify(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) return 1;
  int len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;  // allowed range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3;
    if (b0 == 0xe0) lo = 0xa0;  // no overlong forms
    if (b0 == 0xed) hi = 0x9f;  // no surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4;
    if (b0 == 0xf0) lo = 0x90;
    if (b0 == 0xf4) hi = 0x8f;  // nothing past U+10FFFF
  } else {
    return -1;
  }
  for (int i = 1; i < len; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return 0;
    const auto b = static_cast<unsigned char>(s[static_cast<size_t>(i)]);
    const unsigned char min = i == 1 ? lo : 0x80;
    const unsigned char max = i == 1 ? hi : 0xbf;
    if (b < min || b > max) return -i;
  }
  return len;
}

}  // namespace

void drain_utf8(std::string& bytes, std::string& out, bool final) {
  size_t at = 0;
  while (at < bytes.size()) {
    const int n = classify(std::string_view(bytes).substr(at));
    if (n > 0) {
      out.append(bytes, at, static_cast<size_t>(n));
      at += static_cast<size_t>(n);
    } else if (n < 0) {
      out += k_replacement;
      at += static_cast<size_t>(-n);
    } else if (final) {
      out += k_replacement;
      at = bytes.size();
    } else {
      break;
    }
  }
  bytes.erase(0, at);
}

StreamDecoder::StreamDecoder(Tokenizer tokenizer, bool strip_leading_space)
    : tokenizer_(std::move(tokenizer)), strip_leading_space_(strip_leading_space && tokenizer_.add_space_prefix()) {}

std::string StreamDecoder::push(int32_t id) {
  std::string_view bytes = tokenizer_.token_bytes(id);
  if (bytes.empty()) return {};
  if (at_start_) {
    at_start_ = false;
    if (strip_leading_space_ && bytes.front() == ' ') bytes.remove_prefix(1);
  }
  pending_.append(bytes);
  std::string out;
  drain_utf8(pending_, out, false);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  drain_utf8(pending_, out, true);
  at_start_ = true;
  return out;
}

}  // namespace kvc::tokenizer

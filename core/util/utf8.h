// UTF-8: encoding one code point (the Jinja lexer's escapes, Markdown's character references) and
// cutting text at a code point boundary (titles, ellipses, streamed chunks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvc {

// Appends code point cp (at most 0x10FFFF) as 1 to 4 bytes; callers decide what an invalid
// code point becomes before calling.
inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A byte that continues a multi-byte sequence (10xxxxxx).
constexpr bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The longest prefix of s of at most max_bytes that does not end inside a UTF-8 sequence.
inline std::string_view utf8_prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  while (n > 0 && is_utf8_continuation(s[n])) --n;  // s[n] is the first byte left out
  return s.substr(0, n);
}

// The first code point boundary at or after `pos` (s.size() at most).
inline size_t utf8_boundary_at_or_after(std::string_view s, size_t pos) {
  while (pos < s.size() && is_utf8_continuation(s[pos])) ++pos;
  return pos < s.size() ? pos : s.size();
}

// Removes the last code point (its continuation bytes and its lead byte).
inline void utf8_pop_back(std::string& s) {
  while (!s.empty() && is_utf8_continuation(s.back())) s.pop_back();
  if (!s.empty()) s.pop_back();
}

}  // namespace kvc

// Message helpers for GGUF errors.
#include "core/gguf/gguf_format.h"

#include <cstdio>

namespace kvc::gguf {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string printable(std::string_view s) {
  constexpr size_t k_max_shown = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < k_max_shown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > k_max_shown) out += "... (" + std::to_string(s.size()) + " bytes)";
  if (s.empty()) out = "\"\"";
  return out;
}

}  // namespace kvc::gguf

// KV cache element formats and their storage cost.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvc::kv {

// F16: 2 bytes per element. INT8 / INT4: signed integers with one F16 scale per group of
// k_kv_group elements of one head (per position), so
//   bytes per element = bits / 8 + 2 / k_kv_group.
enum class KvFormat { f16, int8, int4 };

constexpr int k_kv_group = 32;

constexpr double kv_bytes_per_element(KvFormat f) {
  switch (f) {
    case KvFormat::f16: return 2.0;
    case KvFormat::int8: return 1.0 + 2.0 / k_kv_group;
    case KvFormat::int4: return 0.5 + 2.0 / k_kv_group;
  }
  return 2.0;
}

constexpr std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::f16: return "f16";
    case KvFormat::int8: return "int8";
    case KvFormat::int4: return "int4";
  }
  return "?";
}

inline std::optional<KvFormat> parse_kv_format(std::string_view s) {
  for (KvFormat f : {KvFormat::f16, KvFormat::int8, KvFormat::int4}) {
    if (s == kv_format_name(f)) return f;
  }
  if (s == "q8_0" || s == "q8") return KvFormat::int8;
  if (s == "q4_0" || s == "q4") return KvFormat::int4;
  return std::nullopt;
}

}  // namespace kvc::kv

// KV cache element formats and their storage cost.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/cpu/kv_format.h"

namespace kvc::kv {

// F16: 2 bytes per element. INT8 / INT4: signed integers with one F16 scale per group of
// g elements of one head (per position), g = kv_group_for_head_dim(head_dim): 32, 16 or 8, so
//   bytes per element = bits / 8 + 2 / g.
// INT8H / INT4H: the same bytes, of each group rotated by a Walsh-Hadamard transform first
// (kernels/cpu/kv_format.h), so outlier channels do not take a group's whole scale.
// INT4C: K with one F16 scale and minimum per channel over each block of B positions (KIVI's
// per-channel keys; the partly filled last block's K held in F16 until it is full), V as INT4H.
// A head size that is not a multiple of 8 has no group: only F16 can store it.
using KvFormat = kernels::KvType;

// The group for a model's head size (kernels/cpu/kv_format.h decides), 0 when none fits.
constexpr int kv_group_for_head_dim(int64_t head_dim) { return kernels::kv_group_for_head_dim(head_dim); }

// Bytes per element of format f with groups of `group` elements; 0 when f needs a group and
// `group` is none (0) or not a valid group. (int4h K also keeps an F16 anchor row per block of
// B tokens, 2 / B bytes per K element more; int4c K has no group scales but two F16 rows per
// block, 0.5 + 4 / B bytes per K element: KvBlockLayout::block_bytes counts them. Here int4c
// is its V rows.)
constexpr double kv_bytes_per_element(KvFormat f, int group) {
  if (f != KvFormat::f16 && !kernels::kv_group_valid(group)) return 0.0;
  switch (f) {
    case KvFormat::f16: return 2.0;
    case KvFormat::int8:
    case KvFormat::int8h: return 1.0 + 2.0 / group;
    case KvFormat::int4:
    case KvFormat::int4h:
    case KvFormat::int4c: return 0.5 + 2.0 / group;
  }
  return 2.0;
}

constexpr std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::f16: return "f16";
    case KvFormat::int8: return "int8";
    case KvFormat::int4: return "int4";
    case KvFormat::int8h: return "int8h";
    case KvFormat::int4h: return "int4h";
    case KvFormat::int4c: return "int4c";
  }
  return "?";
}

// Every format, in the order menus and tables list them.
inline constexpr KvFormat k_kv_formats[] = {KvFormat::f16,   KvFormat::int8,  KvFormat::int4,
                                            KvFormat::int8h, KvFormat::int4h, KvFormat::int4c};

// The names users type (--kv-type), for error messages.
inline constexpr std::string_view k_kv_format_names = "f16, int8, int4, int8h, int4h or int4c";

inline std::optional<KvFormat> parse_kv_format(std::string_view s) {
  for (KvFormat f : k_kv_formats) {
    if (s == kv_format_name(f)) return f;
  }
  if (s == "q8_0" || s == "q8") return KvFormat::int8;
  if (s == "q4_0" || s == "q4") return KvFormat::int4;
  return std::nullopt;
}

}  // namespace kvc::kv

// The per-tensor type policy for quantizing and for making models.
#include "core/model/quant_policy.h"

#include <cctype>
#include <charconv>

namespace kvc::model {

namespace {

using kernels::DType;

// Layer index of a "blk.N." tensor name, or -1.
int64_t layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int64_t n = -1;
  const auto* begin = name.data() + 4;
  std::from_chars(begin, name.data() + name.size(), n);
  return n;
}

bool more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::optional<FileType> parse_file_type(std::string_view s) {
  std::string low;
  for (char c : s) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (FileType t : {FileType::f32, FileType::f16, FileType::bf16, FileType::q8_0, FileType::q4_0, FileType::q4_k_m}) {
    if (low == file_type_name(t)) return t;
  }
  return std::nullopt;
}

std::string_view file_type_name(FileType t) {
  switch (t) {
    case FileType::f32: return "f32";
    case FileType::f16: return "f16";
    case FileType::bf16: return "bf16";
    case FileType::q8_0: return "q8_0";
    case FileType::q4_0: return "q4_0";
    case FileType::q4_k_m: return "q4_k_m";
  }
  return "?";
}

DType tensor_type(FileType target, std::string_view name, int n_dims, int64_t row_length, int64_t n_layer) {
  if (n_dims < 2) return DType::f32;
  DType t = DType::f32;
  const bool output = name == "output.weight";
  switch (target) {
    case FileType::f32: t = DType::f32; break;
    case FileType::f16: t = DType::f16; break;
    case FileType::bf16: t = DType::bf16; break;
    case FileType::q8_0: t = DType::q8_0; break;
    case FileType::q4_0: t = output ? DType::q6_k : DType::q4_0; break;
    case FileType::q4_k_m: {
      const int64_t layer = layer_of(name);
      const bool sensitive = ends_with(name, "attn_v.weight") || ends_with(name, "ffn_down.weight");
      t = output || (sensitive && layer >= 0 && more_bits(layer, n_layer)) ? DType::q6_k : DType::q4_k;
      break;
    }
  }
  if (row_length % kernels::dtype_info(t).block_elems != 0) {
    // Q6_K output rows that do not fit 256 still deserve 8 bits; others fall back to F16.
    if (t == DType::q6_k && row_length % 32 == 0) return DType::q8_0;
    return DType::f16;
  }
  return t;
}

}  // namespace kvc::model

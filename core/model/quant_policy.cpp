// The per-tensor type policy for quantizing and for making models (llama.cpp's choices).
#include "core/model/quant_policy.h"

#include <cctype>
#include <charconv>

namespace kvc::model {

namespace {

using kernels::DType;

constexpr FileType k_all[] = {FileType::f32,    FileType::f16,  FileType::bf16,     FileType::q8_0,
                              FileType::q4_0,   FileType::q4_1, FileType::q5_0,     FileType::q5_1,
                              FileType::iq4_nl, FileType::q2_k, FileType::q3_k_m,   FileType::q4_k_m,
                              FileType::q5_k_m, FileType::q6_k, FileType::mxfp4_moe};

// Layer index of a "blk.N." tensor name, or -1.
int64_t layer_of(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return -1;
  int64_t n = -1;
  const auto* begin = name.data() + 4;
  std::from_chars(begin, name.data() + name.size(), n);
  return n;
}

// The layers that get more bits in the _M mixes: the first and last eighth, every third between.
bool more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The element type of a file type's ordinary matrices.
DType base_type(FileType t) {
  switch (t) {
    case FileType::f32: return DType::f32;
    case FileType::f16: return DType::f16;
    case FileType::bf16: return DType::bf16;
    case FileType::q8_0: return DType::q8_0;
    case FileType::q4_0: return DType::q4_0;
    case FileType::q4_1: return DType::q4_1;
    case FileType::q5_0: return DType::q5_0;
    case FileType::q5_1: return DType::q5_1;
    case FileType::iq4_nl: return DType::iq4_nl;
    case FileType::q2_k: return DType::q2_k;
    case FileType::q3_k_m: return DType::q3_k;
    case FileType::q4_k_m: return DType::q4_k;
    case FileType::q5_k_m: return DType::q5_k;
    case FileType::q6_k: return DType::q6_k;
    case FileType::mxfp4_moe: return DType::mxfp4;
  }
  return DType::f32;
}

bool fits(DType t, int64_t row_length) { return row_length % kernels::dtype_info(t).block_elems == 0; }

}  // namespace

std::optional<FileType> parse_file_type(std::string_view s) {
  std::string low;
  for (char c : s) low += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (low == "q3_k") return FileType::q3_k_m;
  if (low == "q4_k") return FileType::q4_k_m;
  if (low == "q5_k") return FileType::q5_k_m;
  for (FileType t : k_all) {
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
    case FileType::q4_1: return "q4_1";
    case FileType::q5_0: return "q5_0";
    case FileType::q5_1: return "q5_1";
    case FileType::iq4_nl: return "iq4_nl";
    case FileType::q2_k: return "q2_k";
    case FileType::q3_k_m: return "q3_k_m";
    case FileType::q4_k_m: return "q4_k_m";
    case FileType::q5_k_m: return "q5_k_m";
    case FileType::q6_k: return "q6_k";
    case FileType::mxfp4_moe: return "mxfp4_moe";
  }
  return "?";
}

std::string file_type_list() {
  std::string s;
  for (FileType t : k_all) {
    if (!s.empty()) s += ", ";
    s += file_type_name(t);
  }
  return s;
}

uint32_t gguf_file_type(FileType t) {
  switch (t) {
    case FileType::f32: return 0;
    case FileType::f16: return 1;
    case FileType::q4_0: return 2;
    case FileType::q4_1: return 3;
    case FileType::q8_0: return 7;
    case FileType::q5_0: return 8;
    case FileType::q5_1: return 9;
    case FileType::q2_k: return 10;
    case FileType::q3_k_m: return 12;
    case FileType::q4_k_m: return 15;
    case FileType::q5_k_m: return 17;
    case FileType::q6_k: return 18;
    case FileType::iq4_nl: return 25;
    case FileType::bf16: return 32;
    case FileType::mxfp4_moe: return 38;
  }
  return 0;
}

DType tensor_type(FileType target, std::string_view name, int n_dims, int64_t row_length, const PolicyModel& model) {
  // Norms and biases (the experts' are 2-D: llama-quantize quantizes only ".weight" tensors), and a
  // mixture of experts' router (llama-quantize never quantizes it).
  if (n_dims < 2 || !ends_with(name, ".weight") || ends_with(name, "ffn_gate_inp.weight")) return DType::f32;
  const DType base = base_type(target);
  if (target == FileType::mxfp4_moe) {  // as llama-quantize's MXFP4_MOE: experts MXFP4, the rest Q8_0
    const DType t = n_dims == 3 ? DType::mxfp4 : DType::q8_0;
    return fits(t, row_length) ? t : DType::f16;
  }
  if (target == FileType::f32 || target == FileType::f16 || target == FileType::bf16) return base;
  const int64_t layer = layer_of(name);
  const bool output = name == "output.weight" || (!model.has_output && name == "token_embd.weight");
  DType t = base;
  if (output) {
    t = !fits(base, row_length) || base == DType::q8_0 ? DType::q8_0 : DType::q6_k;
  } else if (ends_with(name, "attn_v.weight") || ends_with(name, "attn_qkv.weight")) {
    // llama.cpp counts attn_v and fused attn_qkv tensors alike, one per layer.
    switch (target) {
      case FileType::q2_k: t = model.n_gqa >= 4 ? DType::q4_k : DType::q3_k; break;
      case FileType::q3_k_m: t = layer < 2 ? DType::q5_k : DType::q4_k; break;
      case FileType::iq4_nl:
        if (model.n_gqa >= 4) t = DType::q5_k;
        break;
      case FileType::q4_k_m:
      case FileType::q5_k_m:
        if (more_bits(layer, model.n_layer)) t = DType::q6_k;
        break;
      default: break;
    }
  } else if (ends_with(name, "ffn_down.weight")) {
    switch (target) {
      case FileType::q2_k: t = DType::q3_k; break;
      case FileType::q3_k_m: t = layer < model.n_layer / 16 ? DType::q5_k : DType::q4_k; break;
      case FileType::iq4_nl:
        if (layer < model.n_layer / 8) t = DType::q5_k;
        break;
      case FileType::q4_k_m:
      case FileType::q5_k_m:
        if (more_bits(layer, model.n_layer)) t = DType::q6_k;
        break;
      default: break;
    }
  } else if (ends_with(name, "attn_output.weight")) {
    if (target == FileType::q2_k) t = DType::q3_k;
    if (target == FileType::q3_k_m) t = DType::q4_k;
  }
  if (!fits(t, row_length)) {  // rows a k-quant cannot hold take the legacy type llama.cpp uses
    switch (t) {
      case DType::q2_k:
      case DType::q3_k: t = DType::q4_0; break;
      case DType::q4_k: t = DType::q5_0; break;
      case DType::q5_k: t = DType::q5_1; break;
      case DType::q6_k: t = DType::q8_0; break;
      default: t = DType::f16; break;
    }
    if (!fits(t, row_length)) t = DType::f16;
  }
  return t;
}

}  // namespace kvc::model

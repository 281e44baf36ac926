// Which element type each tensor gets when a model is quantized or made to a target type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/cpu/dtype.h"

namespace kvc::model {

// A file-level weight type: one element type for the matrices, or a mix (Q4_K_M).
enum class FileType { f32, f16, bf16, q8_0, q4_0, q4_k_m };

std::optional<FileType> parse_file_type(std::string_view s);  // "q4_0", "Q4_K_M", ...
std::string_view file_type_name(FileType t);

// The element type of tensor `name` (GGUF naming, "blk.N.*") in a model of n_layer layers.
// 1-D tensors (norms, biases) stay F32. The mix follows the common convention of GGUF
// quantizers, so that files made here are shaped like the files users have:
//   q4_0: matrices Q4_0, output.weight Q6_K;  q8_0: everything Q8_0;
//   q4_k_m: Q4_K, with Q6_K for output.weight and for attn_v / ffn_down in the first and
//   last eighth of the layers and every third layer between.
// A row length that is not a multiple of the chosen type's block size falls back to F16.
kernels::DType tensor_type(FileType target, std::string_view name, int n_dims, int64_t row_length, int64_t n_layer);

}  // namespace kvc::model

// Which element type each tensor gets when a model is quantized or made to a target type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/cpu/dtype.h"

namespace kvc::model {

// A file-level weight type: one element type for the matrices, or a mix (the K-quant "_M"
// mixes, Q2_K and Q6_K, as llama.cpp's quantizer names them).
// mxfp4_moe: llama.cpp's MXFP4_MOE, what gpt-oss files use: the experts MXFP4, every other matrix Q8_0.
enum class FileType {
  f32,
  f16,
  bf16,
  q8_0,
  q4_0,
  q4_k_m,
  q4_1,
  q5_0,
  q5_1,
  iq4_nl,
  q2_k,
  q3_k_m,
  q5_k_m,
  q6_k,
  mxfp4_moe
};

// "q4_0", "Q4_K_M", ...; "q3_k", "q4_k" and "q5_k" name the _M mixes, as in llama-quantize.
std::optional<FileType> parse_file_type(std::string_view s);
std::string_view file_type_name(FileType t);
// Every file type's name, comma-separated, for messages and help.
std::string file_type_list();

// The value of general.file_type for a file of type t: llama.cpp's numbering (llama_ftype),
// which tools show as the file's type ("Q5_K - Medium").
uint32_t gguf_file_type(FileType t);

// What the policy needs to know of the model beyond the tensor itself.
struct PolicyModel {
  int64_t n_layer = 0;
  int64_t n_gqa = 1;       // n_head / n_head_kv
  bool has_output = true;  // false: tied embeddings, token_embd.weight is also the output matrix
};

// The element type of tensor `name` (GGUF naming, "blk.N.*"). 1-D tensors (norms, biases)
// and a mixture of experts' router (ffn_gate_inp) stay F32. The choices are llama.cpp's (llama-quantize without an
// importance matrix), so that files made here are shaped like the files users have:
//   the matrices take the file type's own type, except
//   output.weight (or token_embd.weight when tied): Q6_K, or Q8_0 when the file is Q8_0 or
//     its rows are not a whole number of the file type's blocks;
//   attn_v / attn_qkv, ffn_down and attn_output, by mix and layer (quant_policy.cpp);
//   mxfp4_moe: the experts' 3-D tensors MXFP4, every other matrix (output included) Q8_0;
//   rows that a k-quant cannot hold (length not a multiple of 256): Q2_K, Q3_K -> Q4_0,
//     Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; F16 when 32 does not divide them either.
kernels::DType tensor_type(FileType target, std::string_view name, int n_dims, int64_t row_length,
                           const PolicyModel& model);

}  // namespace kvc::model

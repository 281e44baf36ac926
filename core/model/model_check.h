// Checking that a GGUF is a usable llama-family model before anything is loaded: config, tokenizer, chat template,
// tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/model/model_config.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/result.h"
#include "kernels/cpu/dtype.h"

namespace kvc::gguf {
class GgufFile;
}

namespace kvc::model {

// One tensor a llama-family model reads, and the shape it must have.
struct ExpectedTensor {
  std::string name;
  int64_t n_rows = 1;     // 1 for a vector
  int64_t n_cols = 0;     // the row length (GGUF ne[0]); a vector's length
  bool matrix = true;     // a 2-D weight matrix; else a 1-D vector, dequantized to floats on load
  bool optional = false;  // llama's Q/K/V biases (qwen2 requires them)
  // One per expert (MoE): n_mats of them stacked along a last dimension, a matrix
  // [n_cols, n_rows, n_mats] or a vector [n_cols, n_mats]; 0: a single one.
  int64_t n_mats = 0;
  // The GGUF shape this tensor must have: (n_cols, n_rows) or (n_cols), then n_mats if any.
  std::vector<int64_t> shape() const;
};

// The types a weight matrix may have: those the matmul kernels read.
bool is_matrix_type(kernels::DType t);

// Every tensor Model::load reads for config `c`, in load order.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c);

// Every required tensor is present, and every expected one present has its shape and a type
// its use allows. Errors name the tensor and say what was expected.
Status check_tensors(const gguf::GgufFile& f, const ModelConfig& c);

// Bytes of the routed experts' tensors (ffn_{gate,up,gate_up,down}_exps, weights and biases) of
// a mixture-of-experts file, all of them but an MTP block's; 0 for a dense model. Every byte must be in memory; a
// token reads c.n_expert_used of every c.n_expert of them (active_expert_bytes).
size_t expert_bytes(const gguf::GgufFile& f, const ModelConfig& c);
inline size_t active_expert_bytes(size_t expert_bytes, const ModelConfig& c) {
  return c.is_moe() ? expert_bytes / static_cast<size_t>(c.n_expert) * static_cast<size_t>(c.n_expert_used) : 0;
}

// Whether a tensor belongs to one of the file's multi-token-prediction blocks (blk.N.* with
// n_layer <= N < n_layer + n_layer_nextn): kept in the file, never read.
bool is_mtp_tensor(std::string_view name, const ModelConfig& c);

// The file's tensors that the model does not read (check_model_file refuses them), in file order;
// the MTP blocks' tensors are not among them.
std::vector<std::string> unused_tensors(const gguf::GgufFile& f, const ModelConfig& c);

// Real chat templates are a few KiB (tool-use templates reach ~20 KiB); a longer one is refused.
inline constexpr size_t k_max_chat_template_bytes = size_t{1} << 20;
// tokenizer.chat_template, or "" when the file has none; an error naming the key when it is not
// a string or is longer than k_max_chat_template_bytes. A view into `f`, not a copy.
Result<std::string_view> chat_template_text(const gguf::GgufFile& f);

// What a usable model file holds besides its weights.
struct CheckedModel {
  ModelConfig config;
  tokenizer::Tokenizer tokenizer;
  chat::ChatTemplate chat_template;
};

// Every check Model::load makes before it allocates or uploads anything: the hyperparameters
// (ModelConfig::from_gguf), the vocabulary and tokenizer, the chat template, each tensor's
// presence, shape and type, and no tensor the architecture does not read. Errors name the key
// or tensor at fault.
Result<CheckedModel> check_model_file(const gguf::GgufFile& f);

}  // namespace kvc::model

// A loaded llama-family model: its GGUF mapping, config, tokenizer and weights on a backend.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/chat/chat_template.h"
#include "core/gguf/gguf_file.h"
#include "core/kv/block_key.h"
#include "core/model/model_config.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"

namespace kvc::model {

// The weights of one transformer block, in backend memory.
struct LayerWeights {
  const float* attn_norm = nullptr;       // (n_embd)
  backend::Weight wq;                     // (q_width rows, n_embd cols)
  backend::Weight wk;                     // (kv_width, n_embd)
  backend::Weight wv;                     // (kv_width, n_embd)
  backend::Weight wo;                     // (n_embd, q_width)
  const float* bq = nullptr;              // (q_width), qwen2 only
  const float* bk = nullptr;              // (kv_width)
  const float* bv = nullptr;              // (kv_width)
  const float* bo = nullptr;              // (n_embd), gpt-oss only: attn_output's bias
  const float* attn_sinks = nullptr;      // (n_head), gpt-oss only: each head's softmax sink
  const float* q_norm = nullptr;          // (head_dim), qwen3 only: every head of Q
  const float* k_norm = nullptr;          // (head_dim), qwen3 only: every head of K
  const float* attn_post_norm = nullptr;  // (n_embd), gemma only: after attention, before the residual add
  const float* ffn_post_norm = nullptr;   // (n_embd), gemma only: after the FFN, before the residual add
  const float* ffn_norm = nullptr;        // (n_embd)
  backend::Weight w_gate;                 // (n_ff, n_embd)
  backend::Weight w_up;                   // (n_ff, n_embd)
  backend::Weight w_down;                 // (n_embd, n_ff)
  // deepseek2 (ModelConfig::mla) has these instead of wq (or with it, without q_lora), wk, wv:
  backend::Weight wq_a;               // (q_lora_rank, n_embd)
  const float* q_a_norm = nullptr;    // (q_lora_rank)
  backend::Weight wq_b;               // (n_head * mla_key_head, q_lora_rank)
  backend::Weight wkv_a;              // (kv_lora_rank + n_rot, n_embd): the latent, then k_pe
  const float* kv_a_norm = nullptr;   // (kv_lora_rank)
  std::vector<backend::Weight> wk_b;  // per head (kv_lora_rank, mla_nope): q_nope into the latent space
  std::vector<backend::Weight> wv_b;  // per head (mla_value_head, kv_lora_rank): the latent out
  // lfm2's conv layers (ModelConfig::layer_is_recurrent) have these instead of attention:
  backend::Weight conv_in;             // (3 n_embd, n_embd): B, C and x rows
  const float* conv_kernel = nullptr;  // (n_embd, l_cache): each channel's taps, oldest first
  backend::Weight conv_out;            // (n_embd, n_embd)
  // A mixture-of-experts layer (ModelConfig::layer_is_moe) has these instead of the three above:
  // the router, the experts' 3-D tensors as views of n_expert stacked matrices, the shared experts.
  kernels::MoeFfnWeights moe;
  // gemma4 (model_gemma4.cpp): the per-layer embedding's gate (n_embd_per_layer, n_embd), its
  // projection back (n_embd, n_embd_per_layer) and norm (n_embd), and the layer's output scale.
  backend::Weight per_layer_gate;
  backend::Weight per_layer_proj;
  const float* per_layer_post_norm = nullptr;
  float out_scale = 1.0f;
};

struct ModelWeights {
  backend::Weight token_embd;          // (n_vocab rows, n_embd cols)
  std::vector<LayerWeights> layers;    // n_layer
  const float* output_norm = nullptr;  // (n_embd)
  backend::Weight output;              // (n_vocab, n_embd); token_embd when tied
  // gemma4's per-layer embeddings: a table (n_vocab, n_layer * n_embd_per_layer) read one row a
  // token, the residual's projection (n_layer * n_embd_per_layer, n_embd) and its norm.
  backend::Weight per_layer_token_embd;
  backend::Weight per_layer_model_proj;
  const float* per_layer_proj_norm = nullptr;  // (n_embd_per_layer)
};

struct LoadOptions {
  // Called with (done, total) bytes while weights are paged in or uploaded.
  std::function<void(size_t done, size_t total)> progress;
  // The context the model will run with (0: its default, at most 4096). Phi-3's LongRoPE
  // picks its long rope factors when this exceeds rope.scaling.original_context_length.
  int64_t n_ctx = 0;
};

class Model {
 public:
  // Checks the whole file first (check_model_file): a file that is not a usable model is an
  // error naming the key or tensor at fault, before anything is allocated or uploaded.
  static Result<std::unique_ptr<Model>> load(const std::string& path, backend::Backend& be,
                                             const LoadOptions& options = {});
  // The same from a parsed file (in memory, say); `path` only names it in messages.
  static Result<std::unique_ptr<Model>> from_file(gguf::GgufFile file, const std::string& path, backend::Backend& be,
                                                  const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  const chat::ChatTemplate& chat_template() const { return chat_template_; }
  const gguf::GgufFile& file() const { return file_; }
  backend::Backend& backend() const { return *backend_; }
  const std::string& path() const { return path_; }
  // Bytes of all weight tensors.
  size_t weight_bytes() const { return weight_bytes_; }
  // Bytes of the routed experts' tensors (ffn_*_exps) of a mixture-of-experts model, all of
  // them; 0 for a dense model. All must be in memory, a token reads n_expert_used / n_expert.
  size_t expert_bytes() const { return expert_bytes_; }
  // Bytes one decode step reads: every weight but token_embd, of which it reads one row
  // (unless the output layer is tied to it), and of the routed experts only the share one
  // token runs (n_expert_used of n_expert). The memory-bandwidth ceiling of decode is the
  // read bandwidth divided by this.
  size_t decode_read_bytes() const;
  // XXH3-128 over the tensor data and the tokenizer: the root of every KV key chain (with
  // the KV layout and rope settings mixed in by kv_fingerprint()).
  const kv::BlockKey& weights_fingerprint() const { return weights_fingerprint_; }
  // The dominant weight type of the big matrices ("Q4_0", or "mixed: Q4_K, Q6_K").
  std::string weight_type_summary() const;

  ~Model();

 private:
  Model(gguf::GgufFile file, tokenizer::Tokenizer tok, chat::ChatTemplate tmpl)
      : file_(std::move(file)), tokenizer_(std::move(tok)), chat_template_(std::move(tmpl)) {}

  gguf::GgufFile file_;
  tokenizer::Tokenizer tokenizer_;
  chat::ChatTemplate chat_template_;
  ModelConfig config_;
  ModelWeights weights_;
  backend::Backend* backend_ = nullptr;
  std::vector<void*> owned_;  // backend allocations (norms, biases) freed with the model
  std::vector<float>
      rope_factors_;  // (n_rot / 2) rope_freqs (Llama 3) or LongRoPE's (Phi-3), host; config_.rope points here
  std::string path_;
  size_t weight_bytes_ = 0;
  size_t expert_bytes_ = 0;
  kv::BlockKey weights_fingerprint_;
};

// The version of what K/V blocks hold: bump it in any change that alters the values a block
// stores for the same model and tokens (a kernel's rounding or summation order in K/V, rope, a
// format's bytes or layout), so that blocks written by another kvchat never match and are
// collected by the disk budget instead of being served stale. 0 names the builds before the
// version was part of the fingerprint (November 2026 and earlier).
inline constexpr int64_t k_kv_values_version = 1;

// The fingerprint KV block keys are rooted in: weights, tokenizer, KV layout (formats, their
// scale group, block size, shape), rope settings and the values version. Any difference gives
// keys that can never match. `version`: other than the current only to test upgrades.
kv::BlockKey kv_fingerprint(const Model& m, const kernels::KvBlockLayout& layout,
                            int64_t version = k_kv_values_version);

// The fingerprint of KV group g of a model with several (ModelConfig::n_kv_groups): the model's
// fingerprint for that group's layout, with the group, its layers and its window mixed in, so
// that no two groups' key chains can meet. A model of one group has kv_fingerprint's.
kv::BlockKey kv_group_fingerprint(const Model& m, const kernels::KvBlockLayout& layout, int g);

// The tokenizer vocabulary described by a GGUF file's tokenizer.ggml.* metadata.
Result<tokenizer::Vocabulary> vocabulary_from_gguf(const gguf::GgufFile& file);

// What a chat template sees of a tokenizer: its BOS and EOS texts, and whether it adds BOS.
chat::TemplateTokens template_tokens(const tokenizer::Tokenizer& tok);
// The GGUF file's tokenizer.chat_template loaded for this tokenizer (ChatTemplate::load).
Result<chat::ChatTemplate> chat_template_from_gguf(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok);

}  // namespace kvc::model

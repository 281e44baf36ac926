// Writing llama GGUF models with random weights: benchmark models and the built-in demo model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/gguf/gguf_writer.h"
#include "core/model/quant_policy.h"
#include "core/model/tensor_plan.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/result.h"

namespace kvc::model {

// The shape of a llama-family model. Defaults: a small model that runs anywhere.
struct ModelSpec {
  std::string name = "kvchat random llama";
  // "llama"; "llama3" (llama with rope_freqs.weight: Llama 3's rope scaling); "qwen2"
  // (split-halves rope, Q/K/V biases); "qwen3" (split halves, per-head Q/K norms, head_dim);
  // "phi3" (fused attn_qkv and gate/up, LongRoPE factors and attn_factor, split halves);
  // "smollm3" (llama without rope in every fourth layer); "gemma2" (split halves, scaled
  // embeddings, post-norms, GeGLU, local layers alternating with global ones, soft-capping;
  // tied output); "gemma3" (gemma2's layout with Q/K norms, five local layers to a global one,
  // local rope base 10000 and linear scaling --rope-scale-factor on the global layers, no caps);
  // "qwen3moe" (qwen3's attention, every FFN a mixture of n_expert experts of width n_ff_exp,
  // n_expert_used per token, a softmax router with normalised weights); "gpt-oss" (split halves,
  // Q/K/V/output biases, per-head attention sinks, local layers of window --window alternating
  // with global ones from layer 0, YaRN rope --rope-scale-factor over --rope-orig-ctx, a biased
  // router with a softmax over the chosen experts, biased experts with the clamped SwiGLU)
  std::string arch = "llama";
  int64_t n_embd = 256;
  int64_t n_layer = 4;
  int64_t n_head = 8;
  int64_t n_head_kv = 2;
  int64_t n_ff = 768;
  int64_t n_ctx = 2048;
  int64_t head_dim = 0;       // qwen3, gemma: the head size (attention.key_length); 0: n_embd / n_head
  int64_t n_expert = 8;       // qwen3moe: experts per layer
  int64_t n_expert_used = 2;  // qwen3moe: experts each token runs
  int64_t n_ff_exp = 256;     // qwen3moe: one expert's FFN width
  float router_std = 0.1f;    // qwen3moe: ffn_gate_inp's deviation (F32): larger is more decisive routing
  float expert_std = 0.0f;    // qwen3moe: the experts' matrices' deviation (0: weight_std); larger
                              // gives the experts a larger share of each layer's output
  float sink_std = 1.0f;      // gpt-oss: attn_sinks near-normal around 0 with this deviation
  // deepseek2 (multi-head latent attention, model_builder_deepseek2.cpp): n_head_kv is 1; every
  // layer after the first n_dense_lead is a MoE one with n_expert_shared shared experts.
  int64_t kv_lora_rank = 512;
  int64_t q_lora_rank = 0;  // 0: attn_q, else attn_q_a / attn_q_a_norm / attn_q_b
  int64_t mla_rope = 64;    // rope.dimension_count: the rope part of a query head and of the cached row
  int64_t mla_nope = 128;   // a query head's part without rope
  int64_t mla_value = 128;  // a head's value width after v_b
  int64_t n_dense_lead = 1;
  int64_t n_expert_shared = 2;
  int gating = 1;                   // expert_gating_func: 1 softmax, 2 sigmoid
  float selection_bias_std = 0.0f;  // exp_probs_b near-normal around 0 with this deviation (0: none)
  float expert_weights_scale = 1.0f;
  bool expert_weights_norm = false;
  int64_t expert_groups = 0, expert_groups_used = 0;  // group-limited routing (0: none)
  // Multi-token-prediction blocks after the n_layer layers (nextn_predict_layers; GLM-4.7-Flash
  // has one): a MoE layer plus the nextn projection and norms, which kvchat loads and never runs.
  int64_t n_nextn = 0;
  float yarn_log_mul = 0.0f;      // rope.scaling.yarn_log_multiplier (0.1 mscale_all_dim; DeepSeek-V2: 0.0707)
  int64_t shortconv_l_cache = 3;  // lfm2: the conv layers' taps (shortconv.l_cache)
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  float rope_scale_factor = 8.0f;  // llama3, phi3 (long factors): the low-frequency pairs' divisor
  int64_t rope_orig_ctx = 8192;    // llama3, phi3: the context the factors extend (original_max_position_embeddings)
  int64_t sliding_window = 0;      // attention.sliding_window (gemma: of its local layers); 0: none written
  // kvchat-only test models (llama, gemma2, gemma3): layers >= this store no K/V and read the last
  // earlier layer's of their kind (kvchat.shared_kv_from_layer, as Gemma 3n / 4); 0: none written.
  // Their attn_k / attn_v weights are still written (unused).
  int64_t shared_kv_from_layer = 0;
  // gemma4 (model_builder_gemma4.cpp): head_dim is the global layers' head size, head_dim_swa the
  // local ones'; layer l is global when l % swa_period == swa_period - 1; the last shared_kv_layers
  // layers read the K/V of the last local / global storing layer; per-layer embeddings of
  // n_embd_per_layer (0: none); double_wide_ffn gives the shared layers an FFN of 2 n_ff; the
  // global layers rotate a quarter of their pairs (rope_freqs), the local ones all of theirs with
  // base rope_freq_base_swa; k_eq_v writes no attn_v on the global layers (V is K's projection).
  int64_t head_dim_swa = 0;
  int swa_period = 5;
  int64_t shared_kv_layers = 0;
  int64_t n_embd_per_layer = 0;
  bool double_wide_ffn = false;
  bool k_eq_v = false;
  float rope_freq_base_swa = 10000.0f;
  float attn_softcap = 50.0f;   // gemma2: attn_logit_softcapping
  float final_softcap = 30.0f;  // gemma2, gemma4: final_logit_softcapping
  FileType type = FileType::q8_0;
  uint64_t seed = 1;
  float weight_std = 0.02f;       // matrices: near-normal with this standard deviation, mean 0
  float qk_std = 0.0f;            // attn_q / attn_k: this std instead (0: weight_std); larger
                                  // values sharpen attention, so position errors show in logits
  float norm_std = 0.02f;         // norm weights: near-normal around 1 with this std
  float qk_norm_mean = 1.0f;      // qwen3, gemma3: attn_q_norm / attn_k_norm near this instead (the
                                  // scores' size after the Q/K norms: larger is sharper attention)
  float bias_std = 0.1f;          // qwen2's Q/K/V biases: near-normal around 0
  int64_t k_outliers = 0;         // outlier channels per KV head: their attn_k rows have
  float k_outlier_scale = 20.0f;  // this many times the deviation (trained models' K outliers)
  bool tied = false;              // no output.weight: the output reuses token_embd
  std::string chat_template;      // tokenizer.chat_template; empty: none
  int n_threads = 0;              // 0: one per physical core
  std::string broken;             // tests only: write this hostile variant (broken_variants()); empty: a good model

  int64_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
  Status validate(int64_t n_vocab) const;
};

// Writes the model to `path` atomically. Weights are generated and quantized row block by
// row block while the file is written, so the model never sits in memory whole. The file's
// bytes depend only on the spec and the vocabulary: not on the thread count, the CPU or the
// C library (integer random numbers, no libm calls), so tests can record its hash.
// progress(done, total) counts tensors' bytes.
Status write_random_model(const ModelSpec& spec, const tokenizer::Vocabulary& vocab, const std::string& path,
                          const std::function<void(size_t done, size_t total)>& progress = {});

// deepseek2: its metadata keys, and the tensors of layer l (model_builder_deepseek2.cpp).
Status check_deepseek2_spec(const ModelSpec& spec);
void add_deepseek2_metadata(const ModelSpec& spec, gguf::GgufWriter& w);
void plan_deepseek2_layer(const ModelSpec& spec, int64_t l, std::vector<TensorPlan>& plans);
void plan_deepseek2_mtp_block(const ModelSpec& spec, int64_t l, std::vector<TensorPlan>& plans);

// lfm2: its layer pattern (attention or conv), keys and the tensors of layer l (model_builder_lfm2.cpp).
bool lfm2_layer_is_attention(int64_t l);
Status check_lfm2_spec(const ModelSpec& spec);
void add_lfm2_metadata(const ModelSpec& spec, gguf::GgufWriter& w);
void plan_lfm2_layer(const ModelSpec& spec, int64_t l, std::vector<TensorPlan>& plans);

// gemma4: its metadata keys, the tensors before the layers, and the tensors of layer l
// (model_builder_gemma4.cpp).
Status check_gemma4_spec(const ModelSpec& spec);
void add_gemma4_metadata(const ModelSpec& spec, gguf::GgufWriter& w);
void plan_gemma4_globals(const ModelSpec& spec, int64_t n_vocab, std::vector<TensorPlan>& plans);
void plan_gemma4_layer(const ModelSpec& spec, int64_t l, std::vector<TensorPlan>& plans);

// Writes the vocabulary's tokenizer.ggml.* keys (SentencePiece or byte-level BPE).
void add_vocabulary(gguf::GgufWriter& w, const tokenizer::Vocabulary& vocab);

// Writes a vocabulary-only GGUF (no tensors): what `tokenize` and `mkmodel --vocab-from` read.
Status write_vocabulary_file(const tokenizer::Vocabulary& vocab, const std::string& chat_template,
                             const std::string& path);

// A chat template in the [INST] family, for the demo model (its vocabulary has <s> and </s>).
std::string demo_chat_template();

}  // namespace kvc::model

// The hyper-parameters of a llama-family model, read from GGUF metadata and checked.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/kv/kv_format.h"
#include "core/kv/kv_group_spec.h"
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/moe_router.h"
#include "kernels/cpu/ops.h"

namespace kvc::gguf {
class GgufFile;
}

namespace kvc::model {

// A model's KV groups and where each layer's K/V live. Invariants: the storing groups come first
// (their indices are the KV cache's groups), then the shared ones; every layer is in one group;
// a storing layer l has kv_group == layer_group[l] and kv_layer == layer_index[l], a shared one
// the group and index of the layer it reads (always a storing layer before it).
struct KvGroupMap {
  std::vector<kv::KvGroupSpec> groups;  // block_bytes 0 here: the layout gives them (kv_group_layout)
  std::vector<int> layer_group;         // per layer: its group
  std::vector<int> layer_index;         // per layer: its index among its group's layers
  std::vector<int> kv_group;            // per layer: the storing group whose blocks it writes or reads
  std::vector<int> kv_layer;            // per layer: the layer index in that group's block layout
  int n_storing() const {
    int n = 0;
    for (const kv::KvGroupSpec& g : groups) n += g.stores() ? 1 : 0;
    return n;
  }
  bool layer_stores(int64_t l) const {
    return groups[static_cast<size_t>(layer_group[static_cast<size_t>(l)])].stores();
  }
};

// Invariants (checked by from_gguf): n_head % n_head_kv == 0; n_embd % n_head == 0; n_rot <=
// head_dim and even; every count positive and within bounds far above any released model
// (2^14 layers, heads and head size, width 2^20, FFN 2^22, context 2^24), so sizes computed from
// them fit in 64 bits; rope base and rms eps finite and positive; n_vocab agrees with
// <arch>.vocab_size where the file has it.
struct ModelConfig {
  std::string arch;  // general.architecture: "llama", "qwen2", "gemma3", ...
  std::string name;  // general.name, if present
  int64_t n_vocab = 0;
  int64_t n_embd = 0;   // model width
  int64_t n_layer = 0;  // the layers the forward pass runs (block_count less the MTP blocks below)
  // <arch>.nextn_predict_layers: the file's last blocks are multi-token-prediction heads (DeepSeek's
  // MTP, GLM's and Qwen 3.5's `nextn`), drafters for speculative decoding. kvchat leaves them
  // unread (memory-mapped, never touched), as llama.cpp does unless it drafts with them.
  int64_t n_layer_nextn = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;    // n_head (MHA), fewer (GQA), 1 (MQA)
  int64_t head_dim = 0;     // usually n_embd / n_head
  int64_t n_ff = 0;         // FFN hidden width
  int64_t n_ctx_train = 0;  // context length the model was trained for
  // attention.sliding_window: every layer attends to at most this many positions, its own
  // included (Mistral-style local attention); 0: to all earlier positions.
  int64_t sliding_window = 0;
  float rms_eps = 1e-5f;
  kernels::RopeParams rope;  // n_rot, freq_base, freq_scale, pairing; freq_factors set by Model::load
  bool qkv_bias = false;     // qwen2-style biases on Q, K, V
  bool qk_norm = false;      // qwen3: per-head RMSNorm of Q and K (attn_q_norm / attn_k_norm) before rope
  int no_rope_every = 0;     // smollm3: layers l with (l + 1) % no_rope_every == 0 have no rope; 0: none
  int64_t n_ctx_orig = 0;  // rope.scaling.original_context_length (else n_ctx_train): past it, LongRoPE's long factors
  bool rope_long = false;  // Phi-3 LongRoPE: the long factors are in use (set by Model::load)
  // Whether layer l applies rope to Q and K.
  bool layer_has_rope(int64_t l) const { return no_rope_every == 0 || (l + 1) % no_rope_every != 0; }
  // Gemma 2 / 3 (`gemma`): embeddings scaled by sqrt(n_embd), RMSNorms after attention and
  // after the FFN too (post_attention_norm, post_ffw_norm), GeGLU with tanh GELU. Their layers
  // are local or global: a local layer attends to its last local_window positions (its own
  // included), a global one to all. sliding_window stays 0, so the KV cache keeps every
  // layer's K/V at every position (llama.cpp's --swa-full) and the window lives in the mask.
  //   swa_period 6 (Gemma 3), 12 layers:  L L L L L G L L L L L G   (L local, G global)
  //   swa_period 2 (Gemma 2):             L G L G ...
  bool gemma = false;
  int64_t local_window = 0;        // attention.sliding_window of the local layers
  int swa_period = 0;              // layer l is local when l % swa_period < swa_period - 1; 0: none is
  kernels::RopeParams rope_local;  // the local layers' rope: base 10000 (Gemma 3) or the global one, no scaling
  float attn_softcap = 0.0f;       // Gemma 2: every score x becomes cap tanh(x / cap) (0: none)
  float final_softcap = 0.0f;      // Gemma 2: every logit likewise
  float query_scale = 0.0f;        // multiplies q . k; 0: 1 / sqrt(head_dim)
  bool layer_is_local(int64_t l) const {
    if (!local_layers.empty()) return local_window > 0 && local_layers[static_cast<size_t>(l)] != 0;
    return swa_period > 0 && local_window > 0 && l % swa_period < swa_period - 1;
  }
  // The window layer l attends through (0: all earlier positions).
  int64_t layer_window(int64_t l) const { return layer_is_local(l) ? local_window : sliding_window; }
  const kernels::RopeParams& layer_rope(int64_t l) const { return layer_is_local(l) ? rope_local : rope; }
  int64_t n_local_layers() const {
    int64_t n = 0;
    for (int64_t l = 0; l < n_layer; ++l) n += layer_is_local(l) ? 1 : 0;
    return n;
  }
  // kvchat-only test models (mkmodel --shared-kv-from-layer, key kvchat.shared_kv_from_layer):
  // layers l >= shared_kv_from_layer store no K/V; each reads the K/V of the last layer before
  // it of its own kind (local or global), as Gemma 3n / 4's last layers do. 0: every layer stores.
  int64_t shared_kv_from_layer = 0;
  // The layers that store K/V: [0, n_layer_kv()).
  int64_t n_layer_kv() const { return shared_kv_from_layer > 0 ? shared_kv_from_layer : n_layer; }
  // KV groups (core/kv/kv_cache.h, core/kv/kv_group_spec.h): layers whose state shares one block
  // chain, built from the config by kv_group_map(). One full (or windowed) group for a model whose
  // layers all attend alike; Gemma's local and global layers: group 0 the global layers (full),
  // group 1 the local ones (window local_window); shared layers in groups of kind shared after the
  // storing ones, one per group they read.
  KvGroupMap kv_group_map() const;
  int n_kv_groups() const { return static_cast<int>(kv_group_map().groups.size()); }
  // The groups that keep blocks (the KV cache's groups 0 .. n - 1).
  int n_kv_storing_groups() const { return kv_group_map().n_storing(); }
  int kv_group(int64_t l) const { return kv_group_map().layer_group.at(static_cast<size_t>(l)); }
  // Layer l's index among its group's layers, and a group's layer count.
  int kv_group_layer(int64_t l) const { return kv_group_map().layer_index.at(static_cast<size_t>(l)); }
  int64_t n_kv_group_layers(int g) const { return kv_group_map().groups.at(static_cast<size_t>(g)).n_layer; }
  // Mixture of experts (qwen3moe). Layers from n_dense_lead on replace the FFN by n_expert
  // experts of width n_ff_exp, of which each token runs the n_expert_used that `routing` picks
  // (kernels/cpu/moe_router.h), plus the shared experts (width n_ff_shexp) where the file has
  // ffn_*_shexp; the first n_dense_lead layers keep a dense FFN of width n_ff. n_expert 0: a
  // dense model. Keys <arch>.expert_count, expert_used_count, expert_feed_forward_length,
  // expert_shared_count, expert_shared_feed_forward_length, expert_gating_func,
  // expert_group_count, expert_group_used_count, expert_weights_norm, expert_weights_scale,
  // leading_dense_block_count; where one is absent, the architecture's default (qwen3moe:
  // softmax, normalised weights, no groups, no scale, no dense layers).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_expert_shared = 0;
  int64_t n_ff_shexp = 0;  // 0: no shared experts
  int64_t n_dense_lead = 0;
  kernels::MoeRouting routing;
  bool fused_gate_up_exps = false;  // ffn_gate_up_exps holds each expert's gate then up rows
  bool is_moe() const { return n_expert > 0; }
  bool layer_is_moe(int64_t l) const { return n_expert > 0 && l >= n_dense_lead; }
  int64_t n_moe_layers() const { return n_expert > 0 ? n_layer - n_dense_lead : 0; }

  // gpt-oss: Q, K, V and output biases; a learned logit per query head in each attention
  // softmax's denominator (attn_sinks, kernels::AttentionShape::sinks); post_attention_norm is
  // the FFN's input norm (it has no ffn_norm); the experts' clamped SwiGLU; local layers (window
  // local_window, 128) alternating with global ones from layer 0 (swa_period 2, as Gemma 2's),
  // both with one YaRN rope (rope_local: rope.freq_base_swa where the file has it).
  bool gpt_oss = false;

  // deepseek2: multi-head latent attention (MLA) in its absorbed form, as llama.cpp runs it. Each
  // token's K/V is one row of kv_lora_rank latent values and n_rot rope values (attn_kv_a_mqa,
  // the latent RMS-normed, the rope part rotated), so the cache has n_head_kv 1 and head_dim
  // kv_lora_rank + n_rot (attention.key_length); kvchat keeps the rope part first in the row:
  //   K row = | k_pe (n_rot) | latent (kv_lora_rank) |      a query head = | q_pe | q_nope k_b |
  // A head's value is the latent part of the same rows; v_b maps its attention output to
  // mla_value_head values before attn_output. query_scale carries DeepSeek's YaRN mscale.
  bool mla = false;
  int64_t kv_lora_rank = 0;    // attention.kv_lora_rank (512 in DeepSeek-V2-Lite)
  int64_t q_lora_rank = 0;     // attention.q_lora_rank: Q through attn_q_a, its norm, attn_q_b; 0: attn_q
  int64_t mla_key_head = 0;    // attention.key_length_mla: a query head's nope + rope part (192)
  int64_t mla_value_head = 0;  // attention.value_length_mla: a head's output after v_b (128)
  int64_t mla_nope() const { return mla_key_head - rope.n_rot; }

  // lfm2 (core/model/model_config_lfm2.cpp): a hybrid of short-convolution layers and GQA
  // attention layers. attention.head_count_kv is a per-layer array in which 0 marks a conv
  // layer; n_head_kv is the attention layers' (one value for all). A conv layer keeps no K/V,
  // only a state per sequence: the last shortconv_l_cache - 1 gated inputs (B * x) of its width,
  // kept in the layers' KV group of kind recurrent (kv_group_map). Its output norm is the
  // tensor token_embd_norm, as llama.cpp names it.
  bool lfm2 = false;
  int64_t shortconv_l_cache = 0;         // shortconv.l_cache: the depthwise conv's taps (3 in LFM2)
  std::vector<uint8_t> layer_recurrent;  // per layer: 1 for a conv layer; empty for other models
  bool layer_is_recurrent(int64_t l) const {
    return !layer_recurrent.empty() && layer_recurrent[static_cast<size_t>(l)] != 0;
  }
  int64_t n_recurrent_layers() const {
    int64_t n = 0;
    for (uint8_t r : layer_recurrent) n += r;
    return n;
  }
  // Floats of one recurrent layer's state for one sequence ((l_cache - 1) x n_embd), and bytes of
  // all of them (F32): what one sequence keeps, and what each snapshot in a block holds.
  int64_t recurrent_state_floats() const { return lfm2 ? (shortconv_l_cache - 1) * n_embd : 0; }
  int64_t recurrent_state_bytes() const {
    return n_recurrent_layers() * recurrent_state_floats() * static_cast<int64_t>(sizeof(float));
  }
  // gemma4 (model_gemma4.cpp): Gemma with a per-layer local/global list (local_layers, from
  // attention.sliding_window_pattern), heads of head_dim_local on local layers and head_dim on
  // global ones (key_length_swa / key_length), the global rope through rope_freqs (its factors
  // of 1e30 leave the unrotated pairs still), V RMS-normed without weight (V = K's projection
  // where the layer has no attn_v), scores not scaled (query_scale 1), per-layer FFN widths
  // (layer_ff: the shared layers' double-wide FFN), per-layer embeddings of n_embd_per_layer
  // gated into each layer's output, and each layer's output scaled by layer_output_scale. Its
  // last layers share K/V (attention.shared_kv_layers, as shared_kv_from_layer).
  bool gemma4 = false;
  std::vector<uint8_t> local_layers;  // per layer: 1 local, 0 global; empty: swa_period decides
  int64_t head_dim_local = 0;         // gemma4: the local layers' head size; 0: head_dim
  std::vector<int64_t> layer_ff;      // gemma4: per-layer FFN width; empty: n_ff (then the largest)
  int64_t n_embd_per_layer = 0;       // gemma4: embedding_length_per_layer_input; 0: none
  int64_t layer_head_dim(int64_t l) const {
    return head_dim_local > 0 && layer_is_local(l) ? head_dim_local : head_dim;
  }
  int64_t layer_n_ff(int64_t l) const { return layer_ff.empty() ? n_ff : layer_ff[static_cast<size_t>(l)]; }
  int64_t layer_q_width(int64_t l) const { return n_head * layer_head_dim(l); }
  int64_t layer_kv_width(int64_t l) const { return n_head_kv * layer_head_dim(l); }
  int64_t max_head_dim() const { return std::max(head_dim, head_dim_local); }

  bool tied_embeddings = false;  // no output.weight: logits use token_embd
  bool fused_qkv = false;        // attn_qkv.weight holds Q, K, V rows (Phi-3)
  bool fused_gate_up = false;    // ffn_up.weight holds gate then up rows, no ffn_gate (Phi-3)

  int64_t q_width() const { return n_head * head_dim; }
  int64_t kv_width() const { return n_head_kv * head_dim; }
  // Bytes of K plus V per token over all layers for a KV element of `elem_bytes` (F16: 2).
  // Layers that read another's K/V (shared_kv_from_layer) store none and count nothing here.
  // MLA (mla): one latent row a token and layer, no V.
  double kv_bytes_per_token(double elem_bytes) const {
    if (head_dim_local > 0) {  // gemma4: each storing layer's own head size
      int64_t n = 0;
      for (int64_t l = 0; l < n_layer_kv(); ++l) n += layer_kv_width(l);
      return 2.0 * static_cast<double>(n) * elem_bytes;
    }
    return (mla ? 1.0 : 2.0) * static_cast<double>((n_layer_kv() - n_recurrent_layers()) * kv_width()) * elem_bytes;
  }
  // MLA: what the same model would keep as multi-head attention, K and V per head
  // (n_head (key_length_mla + value_length_mla) a layer); 0 for other models.
  double kv_bytes_per_token_mha(double elem_bytes) const {
    return mla ? static_cast<double>(n_layer * n_head * (mla_key_head + mla_value_head)) * elem_bytes : 0.0;
  }
  // The same for the local layers only, and for the global ones (all layers when none is local).
  double kv_bytes_per_token_local(double elem_bytes) const {
    int64_t n = 0;
    for (int64_t l = 0; l < n_layer_kv(); ++l) n += layer_is_local(l) ? layer_kv_width(l) : 0;
    return 2.0 * static_cast<double>(n) * elem_bytes;
  }
  double kv_bytes_per_token_global(double elem_bytes) const {
    return kv_bytes_per_token(elem_bytes) - kv_bytes_per_token_local(elem_bytes);
  }
  // KV bytes of n_ctx positions in a cache that keeps only the last local_window positions of
  // the local layers (what a window-aware cache would hold; kvchat keeps all of them today).
  double kv_bytes_window_aware(double elem_bytes, int64_t n_ctx) const {
    const int64_t local_ctx = local_window > 0 && local_window < n_ctx ? local_window : n_ctx;
    return kv_bytes_per_token_global(elem_bytes) * static_cast<double>(n_ctx) +
           kv_bytes_per_token_local(elem_bytes) * static_cast<double>(local_ctx);
  }
  // The same for K and V in format f with this head size's group (kv::kv_group_for_head_dim);
  // 0 when f cannot store this head size.
  double kv_bytes_per_token(kv::KvFormat f) const {
    return kv_bytes_per_token(kv::kv_bytes_per_element(f, kv::kv_group_for_head_dim(head_dim)));
  }
  // The KV block layout of this model (B = block_tokens), or an error naming the head size
  // when a quantized format has no group for it.
  Result<kernels::KvBlockLayout> kv_layout(int block_tokens, kv::KvFormat k_format, kv::KvFormat v_format) const;
  // The layout of storing KV group g's blocks (its layers only).
  Result<kernels::KvBlockLayout> kv_group_layout(int g, int block_tokens, kv::KvFormat k_format,
                                                 kv::KvFormat v_format) const;

  // Reads and validates the config; every error names the metadata key at fault (unsupported
  // architectures and rope scalings included). The tensors are not looked at: check_tensors.
  static Result<ModelConfig> from_gguf(const gguf::GgufFile& file);
};

// Reads kvchat.shared_kv_from_layer into c (from_gguf, after the layer pattern), refusing a value
// outside [1, n_layer) or a shared layer with no earlier storing layer of its kind.
Status read_kv_sharing(const gguf::GgufFile& f, ModelConfig& c);

// Reads gemma4's keys into c (from_gguf, after rope; model_gemma4.cpp): the per-layer pattern,
// window, head sizes, rope of the local layers, FFN widths, per-layer embeddings, shared KV layers
// (as shared_kv_from_layer, refusing a file whose last two storing layers are not one local and
// one global, the producers llama.cpp reads) and the final soft-cap.
Status read_gemma4(const gguf::GgufFile& f, ModelConfig& c);

// Reads deepseek2's MLA keys into c (from_gguf, after rope and the MoE keys): the ranks, the MLA
// head sizes, and the query scale with DeepSeek's YaRN mscale as llama.cpp computes it. A file
// converted before attn_kv_b was split into attn_k_b / attn_v_b is refused, saying how to reconvert.
Status read_deepseek2(const gguf::GgufFile& f, ModelConfig& c);

// Reads lfm2's layer pattern (from_gguf, before the head checks): the per-layer
// attention.head_count_kv array (0: a conv layer) into layer_recurrent and n_head_kv, and
// shortconv.l_cache. A file whose attention layers disagree on their KV heads is refused.
Status read_lfm2(const gguf::GgufFile& f, ModelConfig& c);
// The KV groups of a model with recurrent layers: group 0 the attention layers (full), group 1
// the recurrent ones (kind recurrent, its blocks holding state snapshots).
KvGroupMap recurrent_group_map(const ModelConfig& c);

}  // namespace kvc::model

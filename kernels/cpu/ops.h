// Element-wise and attention kernels of the llama forward pass, on float activations.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace kvc::kernels {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], i in [0, n). out may alias x.
void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* out);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)). out may alias gate.
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// gpt-oss's clamped SwiGLU: with x = min(gate[i], limit) and y = clamp(up[i], -limit, limit),
// out[i] = x * sigmoid(alpha x) * (y + 1) (alpha 1.702, limit 7 in gpt-oss). out may alias gate.
void swiglu_oai_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);

// out[i] = gelu(gate[i]) * up[i] with the tanh form of GELU (Gemma's GeGLU):
// gelu(g) = g / 2 * (1 + tanh(sqrt(2 / pi) * (g + 0.044715 g^3))). out may alias gate.
void gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out);

// x[i] = cap * tanh(x[i] / cap) (Gemma 2's soft-capping of attention scores and logits); cap > 0.
void softcap_inplace(float* x, int64_t n, float cap);

// x[i] *= s
void scale_inplace(float* x, int64_t n, float s);

// x[i] += y[i]
void add_inplace(float* x, const float* y, int64_t n);

// In-place softmax over n values.
void softmax_inplace(float* x, int64_t n);

// Rotary position embedding for one token's heads, x: (n_heads, head_dim).
// The first n_rot dims of each head rotate; pair (i, i+1) for `interleaved` (llama GGUF:
// weights are already permuted for it), pair (i, i + n_rot/2) otherwise (neox, qwen2).
// theta_i = pos * freq_scale * freq_base^(-2i/n_rot).
// Pair k of the n_rot rotated dimensions turns by pos * freq_scale * freq_base^(-2k / n_rot)
// / freq_factors[k] radians (freq_factors: Llama 3's rope_freqs or Phi-3's LongRoPE factors,
// one divisor per pair), and is scaled by attn_factor.
// YaRN (yarn: true; gpt-oss): pair k turns by pos * f_k with f_k = base^(-2k / n_rot) / factor_k
// blended with its interpolated freq_scale * f_k: weight r_k = 1 - clamp((k - yarn_low) /
// max(0.001, yarn_high - yarn_low), 0, 1) on the original, 1 - r_k on the interpolated (high
// frequencies keep their rotation, low ones are scaled), as ggml's rope with ext_factor 1.
// attn_factor then carries YaRN's magnitude scale (ModelConfig sets it).
struct RopeParams {
  int n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / linear scaling factor
  bool interleaved = true;
  const float* freq_factors = nullptr;  // (n_rot / 2) host floats, or null: all 1
  float attn_factor = 1.0f;             // multiplies cos and sin (rope.scaling.attn_factor: Phi-3's LongRoPE)
  bool yarn = false;                    // YaRN's per-pair blend of original and interpolated frequencies
  float yarn_low = 0.0f;                // pairs below this keep the original frequency
  float yarn_high = 0.0f;               // pairs above this take the interpolated one
};
void rope(float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);

// Causal attention of one query token over n_kv cached positions, for all heads.
//   q:   (n_head, head_dim) float
//   k,v: position t of kv head h at  k + t * kv_stride + h * head_dim  (F16 elements)
//   out: (n_head, head_dim) float
// Query head i reads kv head i / (n_head / n_kv_head) (GQA; MQA when n_kv_head = 1).
// scale multiplies q.k (1/sqrt(head_dim)); softcap > 0 then maps each score x to
// softcap * tanh(x / softcap) before the softmax (Gemma 2; attention_paged only). sinks (gpt-oss;
// attention_paged only): query head i's softmax has one more logit, sinks[i], in its
// denominator only (exp(s_t) / (sum_u exp(s_u) + exp(sinks[i])), as ggml's soft_max with sinks). Only kv heads
// [kv_head_begin, kv_head_end) and their query heads are computed, so callers can split heads across threads. scratch:
// at least (n_head / n_kv_head) * n_kv floats.
struct AttentionShape {
  int n_head = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int64_t kv_stride = 0;  // elements between consecutive positions
  float scale = 1.0f;
  float softcap = 0.0f;          // 0: none
  const float* sinks = nullptr;  // (n_head) host floats, or null: none
};
void attention_f16(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv, const AttentionShape& s,
                   int kv_head_begin, int kv_head_end, float* out, float* scratch);
void attention_f16_reference(const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                             const AttentionShape& s, int kv_head_begin, int kv_head_end, float* out, float* scratch);

// Converts n floats to F16 (KV cache writes).
void f32_to_f16_row(const float* x, uint16_t* out, int64_t n);

}  // namespace kvc::kernels

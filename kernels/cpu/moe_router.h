// Mixture-of-experts routing: which experts each token uses and with what weights.
#pragma once

#include <cstdint>

namespace kvc::kernels {

// How a router turns its logits into expert probabilities (GGUF `expert_gating_func`, whose
// numbers these are). softmax_weight: the logits themselves select, and the weights are a
// softmax over the chosen k only (gpt-oss).
enum class MoeGating : int { softmax = 1, sigmoid = 2, softmax_weight = 3 };

// One MoE layer's routing. Invariants (ModelConfig::from_gguf checks them): 1 <= n_used <=
// n_expert; n_group 0 or 1 (no groups), or a divisor of n_expert with at least two experts per
// group and 1 <= n_group_used < n_group, and n_used <= n_group_used * (n_expert / n_group).
struct MoeRouting {
  int n_expert = 0;
  int n_used = 0;
  MoeGating gating = MoeGating::softmax;
  int n_group = 0;             // group-limited selection (DeepSeek-V3): experts in n_group equal groups
  int n_group_used = 0;        // and only the best n_group_used groups' experts may be chosen
  bool norm_weights = false;   // the chosen weights divided by their sum
  float weights_scale = 0.0f;  // the chosen weights multiplied by it; 0 or 1: unscaled
};

// Routes n_tokens tokens, each independently:
//   p = gate(logits)                         softmax | sigmoid | the logits themselves
//   s = p + selection_bias                   (exp_probs_b; selection only, where non-null)
//   s masked to the best n_group_used groups (a group scores the sum of its two best s)
//   ids = the n_used largest s, best first (equal scores: the lower expert id first)
//   w = p[ids]; softmax_weight: w = softmax(w); norm: w /= max(sum w, 2^-14); w *= scale
//   logits: (n_tokens, n_expert); selection_bias: (n_expert) or null
//   ids, weights: (n_tokens, n_used)
void moe_route(const MoeRouting& r, const float* logits, const float* selection_bias, int64_t n_tokens, int32_t* ids,
               float* weights);

}  // namespace kvc::kernels

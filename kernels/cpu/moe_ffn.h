// The mixture-of-experts FFN: router, the chosen experts' SwiGLU FFNs, their weighted sum, shared experts.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_router.h"
#include "kernels/cpu/thread_pool.h"

namespace kvc::kernels {

// One MoE layer's weights. The expert tensors are 3-D in GGUF ([n_cols, n_rows, n_expert]):
// each is one view of n_expert * n_rows rows, expert e's matrix its rows [e n_rows, (e+1) n_rows).
//
//   gate (split):  | e0: n_ff rows | e1: n_ff rows | ...      up likewise; down: n_embd rows each
//   gate (fused):  | e0: n_ff gate rows, n_ff up rows | e1: ... |      (ffn_gate_up_exps; up empty)
// The experts' gated activation: SwiGLU, silu(gate) * up; or gpt-oss's clamped variant
// (ops.h swiglu_oai_mul, alpha 1.702, limit 7).
enum class MoeActivation { silu, swiglu_oai };

struct MoeFfnWeights {
  MoeRouting routing;
  MoeActivation activation = MoeActivation::silu;
  int64_t n_ff = 0;                       // one expert's FFN width
  MatrixView router;                      // ffn_gate_inp: (n_expert, n_embd)
  const float* router_bias = nullptr;     // (n_expert): added to the logits, or null
  const float* selection_bias = nullptr;  // exp_probs_b (n_expert): selection only, or null
  MatrixView gate;                        // (n_expert * n_ff, n_embd); fused: (n_expert * 2 n_ff, n_embd)
  MatrixView up;                          // (n_expert * n_ff, n_embd); fused: n_rows 0
  MatrixView down;                        // (n_expert * n_embd, n_ff)
  const float* gate_bias = nullptr;       // (n_expert, n_ff); fused: (n_expert, 2 n_ff), gate then up
  const float* up_bias = nullptr;         // (n_expert, n_ff); null when fused
  const float* down_bias = nullptr;       // (n_expert, n_embd)
  // Shared experts, which every token runs (ffn_*_shexp; shared_gate.n_rows 0: none). Their
  // output is added to the routed experts', scaled by sigmoid(x . shared_gate_inp) where
  // shared_gate_inp (1, n_embd) has a row (qwen2moe), else as it is.
  MatrixView shared_gate;      // (n_ff_shared, n_embd)
  MatrixView shared_up;        // (n_ff_shared, n_embd)
  MatrixView shared_down;      // (n_embd, n_ff_shared)
  MatrixView shared_gate_inp;  // (1, n_embd), or n_rows 0

  bool fused() const { return up.n_rows == 0; }
  bool has_shared() const { return shared_gate.n_rows > 0; }
};

// Buffers of one moe_ffn call, reused across calls (no allocation once the largest batch ran).
struct MoeFfnScratch {
  std::vector<float> logits;          // (n_tokens, n_expert)
  std::vector<int32_t> ids;           // (n_tokens, n_used)
  std::vector<float> weights;         // (n_tokens, n_used)
  std::vector<int64_t> expert_begin;  // (n_expert + 1): expert e's gathered rows
  std::vector<int64_t> row_of;        // (n_tokens, n_used): the gathered row of each choice
  std::vector<int64_t> token_of;      // (n_tokens * n_used): the token of each gathered row
  std::vector<float> xg;              // (n_tokens * n_used, n_embd) inputs, grouped by expert
  std::vector<float> gate_up;         // (n_tokens * n_used, 2 n_ff): gate, then up
  std::vector<float> act;             // (n_tokens * n_used, n_ff)
  std::vector<float> down;            // (n_tokens * n_used, n_embd)
  std::vector<float> shared_gate_up;  // (n_tokens, 2 n_ff_shared)
  std::vector<float> shared_act;      // (n_tokens, n_ff_shared)
  std::vector<float> shared_down;     // (n_tokens, n_embd)
  std::vector<float> shared_scale;    // (n_tokens)
  std::vector<MatmulJob> jobs;
};

// y = the MoE FFN of x, token by token (x, y: (n_tokens, n_embd), y not x):
//   ids, w = moe_route(x router^T + router_bias)
//   y = sum over j of w_j down_e(act(gate_e x + gate_bias_e, up_e x + up_bias_e)) + down_bias_e
//       (e = ids_j, best first), plus the shared experts' SwiGLU FFN of x
// The batch's tokens are grouped by expert, so each chosen expert's rows are read once per call
// and the unchosen ones not at all; every expert's products go to the pool as one matmul_many.
void moe_ffn(const MoeFfnWeights& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
             MoeFfnScratch& scratch);

}  // namespace kvc::kernels

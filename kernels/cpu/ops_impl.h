// Internal to the ops kernels: one table of function pointers per ISA, and the inner loops
// of attention over a contiguous range of positions, shared with the paged KV cache.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops.h"

// A bug check inside the kernels (which may not include core/util/assert.h); stays on in
// release builds and never guards user input.
#define KVC_KERNEL_CHECK(cond)                                                                            \
  do {                                                                                                    \
    if (!(cond)) [[unlikely]] { ::kvc::kernels::detail::kernel_check_failed(#cond, __FILE__, __LINE__); } \
  } while (0)

namespace kvc::kernels {

namespace detail {
[[noreturn]] void kernel_check_failed(const char* cond, const char* file, int line);
}  // namespace detail

// scores[j * score_stride + t] = scale * dot(q[j], k[t]) for j in [0, n_q), t in [0, n_pos).
//   q: (n_q, head_dim) float, contiguous;  k[t] = k + t * k_stride, head_dim F16 elements.
// A paged cache calls this once per block, with scores offset by the block's first position.
using ScoreRangeF16 = void (*)(const float* q, int n_q, int head_dim, const uint16_t* k, int64_t k_stride,
                               int64_t n_pos, float scale, float* scores, int64_t score_stride);

// acc[j][d] += sum_t w[j * w_stride + t] * v[t][d] for j in [0, n_q), t in [0, n_pos).
//   acc: (n_q, head_dim) float, contiguous;  v[t] = v + t * v_stride, head_dim F16 elements.
using AccumulateRangeF16 = void (*)(const float* w, int64_t w_stride, int n_q, const uint16_t* v, int64_t v_stride,
                                    int64_t n_pos, int head_dim, float* acc);

// Rotates the first n_rot dims of each of n_heads heads of x: (n_heads, head_dim), as
//   out[i] = x[i] * cos_full[i] + x[partner(i)] * sin_signed[i],   i in [0, n_rot),
// partner(i) = i ^ 1 (interleaved) or (i + n_rot/2) mod n_rot (neox). The tables come from
// rope_tables() below.
using RopeApply = void (*)(float* x, int n_heads, int head_dim, int n_rot, bool interleaved, const float* cos_full,
                           const float* sin_signed);

// One ISA's implementation of every op. Invariant: every pointer is non-null, and a table is
// only handed out (ops_for) when the CPU supports its ISA.
struct OpsTable {
  Isa isa = Isa::scalar;
  void (*rmsnorm)(const float* x, const float* w, int64_t n, float eps, float* out) = nullptr;
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out) = nullptr;
  void (*add_inplace)(float* x, const float* y, int64_t n) = nullptr;
  void (*softmax_inplace)(float* x, int64_t n) = nullptr;
  RopeApply rope_apply = nullptr;
  void (*f32_to_f16_row)(const float* x, uint16_t* out, int64_t n) = nullptr;
  // out[i] = exp(x[i]); the vectorised exp behind silu_mul and softmax, exposed for tests.
  void (*exp_row)(const float* x, float* out, int64_t n) = nullptr;
  ScoreRangeF16 score_range_f16 = nullptr;
  AccumulateRangeF16 accumulate_range_f16 = nullptr;
};

const OpsTable& ops_scalar();
const OpsTable& ops_avx2();    // call only when cpu_features().avx2
const OpsTable& ops_avx512();  // call only when cpu_features().avx512

// The table for `isa`, or for the best ISA below it that this CPU supports.
const OpsTable& ops_for(Isa isa);
// The table chosen once from best_isa(); what the public functions in ops.h use.
const OpsTable& ops_active();

// Attention (ops.h semantics) computed with the inner loops of table `t`.
void attention_f16_with(const OpsTable& t, const float* q, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                        const AttentionShape& s, int kv_head_begin, int kv_head_end, float* out, float* scratch);

// Rope with the inner loop of table `t`.
void rope_with(const OpsTable& t, float* x, int n_heads, int head_dim, int64_t pos, const RopeParams& p);

// cos/sin tables for (p, pos), each n_rot floats in the layout RopeApply documents. Angles
// are computed in double, so large positions (1e5 and beyond) keep float accuracy. Cached
// per thread: the inverse frequencies per RopeParams, the tables per (RopeParams, pos), so
// q and k of every layer at one position share one computation. Valid until this thread's
// next call with other arguments.
struct RopeTables {
  const float* cos_full = nullptr;
  const float* sin_signed = nullptr;
};
RopeTables rope_tables(const RopeParams& p, int64_t pos);

}  // namespace kvc::kernels

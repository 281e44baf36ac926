// Attention of one query token over a paged KV cache whose blocks hold F16, INT8 or INT4 rows
// (plain or Hadamard-rotated), read in place (no row is dequantized to memory).
#pragma once

#include <cstdint>

#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/ops.h"

namespace kvc::kernels {

// One layer's KV of one sequence.
//   blocks[i] holds positions [i B, (i + 1) B); blocks[i] may be null when no position of
//   the block is attended (outside the sliding window); it is then never read.
// window > 0: attend only to positions [max(0, n_kv - window), n_kv); window <= 0: all.
// K per channel (q4c, kv_block.h): block tail_block, the query's own block ((n_kv - 1) / B),
// sealed or not, has its K and V rows read in F16 from k_tail and v_tail (rows [0, n_kv -
// tail_block B), stride n_kv_head * head_dim): a query sees the positions of its own block at
// full precision (KIVI's full-precision residual), the same whether a prompt came in one
// batch or many. The other blocks are read as stored (K sealed).
struct PagedKvView {
  const uint8_t* const* blocks = nullptr;  // (n_blocks)
  int64_t n_blocks = 0;
  const KvBlockLayout* layout = nullptr;
  int layer = 0;
  int64_t window = 0;
  const uint16_t* k_tail = nullptr;  // (B, n_kv_head * head_dim)
  const uint16_t* v_tail = nullptr;  // (B, n_kv_head * head_dim)
  int64_t tail_block = -1;
};

// First attended position for n_kv cached positions.
inline int64_t paged_window_begin(const PagedKvView& kv, int64_t n_kv) {
  return kv.window > 0 && n_kv > kv.window ? n_kv - kv.window : 0;
}

// Causal attention of one query token over positions [paged_window_begin, n_kv) of kv, with
// the semantics of attention_f16 (ops.h): q and out are (n_head, head_dim) floats, query head
// i reads kv head i / (n_head / n_kv_head), only kv heads [kv_head_begin, kv_head_end) and
// their query heads are computed, softmax is max-subtracted in float. s.kv_stride is unused
// (the layout fixes it); s.n_kv_head and s.head_dim must match the layout.
// Each K and V row of a kv head is read once for all its query heads. On AVX-512 VNNI, INT8 /
// INT4 K in groups of 32 is scored with integer dot products against q quantized to int8 per
// head (adding at most scale * d_q / 2 * sum |k| to each score, d_q = max |q_head| / 127);
// elsewhere K groups of 32 are dequantized in registers. Groups of 16 or 8 (head sizes not a
// multiple of 32) are dequantized in registers by simpler AVX2 loops on AVX2 and AVX-512.
// K per channel: q is scaled by each sealed block's channel scales (and, on AVX-512 VNNI with
// groups of 32, quantized to int8 per head and block) and scored against the nibbles.
// scratch: at least paged_attention_scratch_floats(s, n_attended) floats, where n_attended
// = n_kv - paged_window_begin(kv, n_kv).  With no attended position, out is zero.
void attention_paged(const float* q, const PagedKvView& kv, int64_t n_kv, const AttentionShape& s, int kv_head_begin,
                     int kv_head_end, float* out, float* scratch);
// The same with the scalar reference loops.
void attention_paged_reference(const float* q, const PagedKvView& kv, int64_t n_kv, const AttentionShape& s,
                               int kv_head_begin, int kv_head_end, float* out, float* scratch);

// (n_head / n_kv_head) * (n_attended + 3 head_dim / 2 + 2): one score row per query head of
// a kv head, room for those query heads quantized to int8 (integer K scores) and rotated
// (Hadamard-rotated K, kv_format.h), and their dots with one block's K anchor.
inline int64_t paged_attention_scratch_floats(const AttentionShape& s, int64_t n_attended) {
  return static_cast<int64_t>(s.n_head / s.n_kv_head) * (n_attended + 3 * s.head_dim / 2 + 2);
}

}  // namespace kvc::kernels

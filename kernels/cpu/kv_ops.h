// Internal to the KV kernels: one table per ISA of the loops over quantized KV rows (encode,
// decode, and the attention inner loops over a range of positions read straight from blocks)
// for groups of k_kv_group_max and for the smaller groups, and the scalar loops for any group.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kv_format.h"

namespace kvc::kernels {

// The table's loops work on groups of k_kv_group_max (32) elements.
// x: n floats -> out: row_bytes(type, 32, n) bytes (and back); n a multiple of 32.
using EncodeRowFn = void (*)(const float* x, int64_t n, uint8_t* out);
using DecodeRowFn = void (*)(const uint8_t* in, int64_t n, float* out);

// scores[j * score_stride + t] = scale * dot(q[j], dequant(k[t])) for j in [0, n_q),
// t in [0, n_pos), where k[t] = k + t * k_stride_bytes is the first group of one head
// (head_dim / 32 groups).  q: (n_q, head_dim) float, contiguous.
using ScoreRangeQ = void (*)(const float* q, int n_q, int head_dim, const uint8_t* k, int64_t k_stride_bytes,
                             int64_t n_pos, float scale, float* scores, int64_t score_stride);

// acc[j][d] += sum_t w[j * w_stride + t] * dequant(v[t])[d], v[t] = v + t * v_stride_bytes.
//   acc: (n_q, head_dim) float, contiguous.
using AccumulateRangeQ = void (*)(const float* w, int64_t w_stride, int n_q, const uint8_t* v, int64_t v_stride_bytes,
                                  int64_t n_pos, int head_dim, float* acc);

// The same scores from q quantized per head to int8 (quantize_q_heads below) with integer
// dot products: scores[j * score_stride + t] = scale * q_scale[j] * sum_g d_g (q8[j] . k_g).
//   q8: (n_q, head_dim) int8;  q_scale: (n_q);  q_sums: (n_q, head_dim / 4) int32.
using ScoreRangeQi = void (*)(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int n_q, int head_dim,
                              const uint8_t* k, int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                              int64_t score_stride);

// The score and accumulate loops above for groups smaller than 32 (type q8 or q4, group 16 or
// 8, head_dim a multiple of group; scores also of type q4c).
using ScoreRangeSmallQ = void (*)(KvType type, int group, const float* q, int n_q, int head_dim, const uint8_t* k,
                                  int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                                  int64_t score_stride);
using AccumulateRangeSmallQ = void (*)(KvType type, int group, const float* w, int64_t w_stride, int n_q,
                                       const uint8_t* v, int64_t v_stride_bytes, int64_t n_pos, int head_dim,
                                       float* acc);

// K per channel (q4c, kv_format.h), once per sealed block and kv head: q scaled by the block's
// channel scales, out[j][c] = q[j][c] * d[c], and qm[j] = scale * q[j] . m (d, m: head_dim F16,
// the block's scales and minima). The ScoreRangeQ / ScoreRangeQi loops of type q4c then score
// scale * out[j] . n_t against the nibbles (n_t in [0, 15]; k rows of head_dim / 2 bytes, chunks
// of 32 packed as a Q4 group without its scale), and the caller adds qm.  q, out: (n_q, head_dim).
using ScaleQFn = void (*)(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, float scale,
                          float* out, float* qm);
// The same scores with integer dot products, in one call per sealed block and kv head: per
// query head j, q[j] * d is quantized to int8 as quantize_q_heads rounds (x8_j, scale s_j), and
//   scores[j * score_stride + t] = fl(fl((x8_j . n_t) * fl(scale * s_j)) + scale * q[j] . m)
// (the integer dot is exact). head_dim a multiple of 32, at most k_max_int_head_dim; k as for
// ScoreRangeQ of type q4c.
using ScoreBlockQ4cIntFn = void (*)(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m,
                                    const uint8_t* k, int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                                    int64_t score_stride);

// Invariant: every pointer is non-null except the ScoreRangeQi ones and score_block_q4c_int (null:
// this ISA scores quantized K with the float loops), and a table is handed out (kv_ops_for) only when the CPU
// supports its ISA. F16 rows use the OpsTable of the same ISA (ops_impl.h).
struct KvOpsTable {
  Isa isa = Isa::scalar;
  EncodeRowFn encode_q8 = nullptr;
  EncodeRowFn encode_q4 = nullptr;
  DecodeRowFn decode_q8 = nullptr;
  DecodeRowFn decode_q4 = nullptr;
  ScoreRangeQ score_range_q8 = nullptr;
  ScoreRangeQ score_range_q4 = nullptr;
  AccumulateRangeQ accumulate_range_q8 = nullptr;
  AccumulateRangeQ accumulate_range_q4 = nullptr;
  ScoreRangeQi score_range_q8_int = nullptr;  // head_dim <= k_max_int_head_dim
  ScoreRangeQi score_range_q4_int = nullptr;
  ScoreRangeSmallQ score_range_small_group = nullptr;  // groups of 16 and 8
  AccumulateRangeSmallQ accumulate_range_small_group = nullptr;
  ScaleQFn scale_q_f16 = nullptr;                    // q4c K
  ScoreRangeQ score_range_q4c = nullptr;             // groups of 32; smaller ones: score_range_small_group
  ScoreBlockQ4cIntFn score_block_q4c_int = nullptr;  // head_dim <= k_max_int_head_dim
};

// Integer scoring keeps per-chunk correction vectors on the stack, up to this head size.
constexpr int k_max_int_head_dim = 256;

const KvOpsTable& kv_ops_scalar();
const KvOpsTable& kv_ops_avx2();    // call only when cpu_features().avx2
const KvOpsTable& kv_ops_avx512();  // call only when cpu_features().avx512
// AVX-512 with integer K scores (VPDPBUSD); call only when cpu_features().avx512_vnni.
const KvOpsTable& kv_ops_avx512_vnni();

// The table for `isa`, or for the best ISA below it that this CPU supports.
const KvOpsTable& kv_ops_for(Isa isa);
// The table chosen once from best_isa().
const KvOpsTable& kv_ops_active();

namespace detail {
// Rounds a group's scale d to F16, stores its bits, and returns 1 / d_f16 (0 when d_f16 is 0).
// Out of line so that every ISA quantizes with the same scalar arithmetic.
float kv_group_scale(float d, uint16_t* d_bits);

// Quantizes each of n_q query heads (head_dim floats, a multiple of 4) to int8 with one
// scale per head: q8 = round(q / d), d = amax / 127 (|q - d q8| <= d / 2); q_sums[j][l] is
// the sum of q8[j][4l, 4l + 4) (what VPDPBUSD adds per lane), for the offset correction.
//   q: (n_q, head_dim);  q8: (n_q, head_dim);  q_scale: (n_q);  q_sums: (n_q, head_dim / 4).
void quantize_q_heads(const float* q, int n_q, int head_dim, int8_t* q8, float* q_scale, int32_t* q_sums);

// The VNNI score loops (kv_score_vnni_avx512.cpp).
void score_range_q8_vnni(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int n_q, int head_dim,
                         const uint8_t* k, int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                         int64_t score_stride);
void score_range_q4_vnni(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int n_q, int head_dim,
                         const uint8_t* k, int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                         int64_t score_stride);
// kv_score_q4c_vnni_avx512.cpp
void score_block_q4c_vnni(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, const uint8_t* k,
                          int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores, int64_t score_stride);
void scale_q_f16_avx512(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, float scale,
                        float* out, float* qm);
// The scalar loops for any valid group (kv_ops_scalar.cpp): the same contracts as the table's
// loops above with groups of `group` elements (type q8 or q4, head_dim a multiple of group).
// kv_ops_scalar()'s entries are these at group 32 (and for small groups); every ISA encodes
// and decodes groups of 16 and 8 with them.
// Q4 bytes (any valid group) with each group's scale fitted to minimise its squared error
// (q4h rows, kv_format.h); scalar on every ISA, so the bytes never depend on the CPU.
void encode_row_q4_fitted(int group, const float* x, int64_t n, uint8_t* out);
void scale_q_f16_scalar(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, float scale,
                        float* out, float* qm);
void encode_row_any_group(KvType type, int group, const float* x, int64_t n, uint8_t* out);
void decode_row_any_group(KvType type, int group, const uint8_t* in, int64_t n, float* out);
void score_range_any_group(KvType type, int group, const float* q, int n_q, int head_dim, const uint8_t* k,
                           int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores, int64_t score_stride);
void accumulate_range_any_group(KvType type, int group, const float* w, int64_t w_stride, int n_q, const uint8_t* v,
                                int64_t v_stride_bytes, int64_t n_pos, int head_dim, float* acc);

// The AVX2 score and accumulate loops for groups of 16 and 8 (kv_ops_small_group_avx2.cpp),
// the small-group entries of every table from AVX2 up.
void score_range_small_group_avx2(KvType type, int group, const float* q, int n_q, int head_dim, const uint8_t* k,
                                  int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                                  int64_t score_stride);
void accumulate_range_small_group_avx2(KvType type, int group, const float* w, int64_t w_stride, int n_q,
                                       const uint8_t* v, int64_t v_stride_bytes, int64_t n_pos, int head_dim,
                                       float* acc);
}  // namespace detail

// Row conversions with table `t` (F16 through ops_for(t.isa); groups below 32 through the
// scalar any-group loops, on every ISA: a row is encoded once per token).
void encode_row_with(const KvOpsTable& t, KvType type, int group, const float* x, int64_t n, uint8_t* out);
void decode_row_with(const KvOpsTable& t, KvType type, int group, const uint8_t* in, int64_t n, float* out);

}  // namespace kvc::kernels

// Paged attention (paged_attention.h): walks the block table and calls the per-ISA range
// loops of ops_impl.h (F16) and kv_ops.h (INT8 / INT4, groups of 32 or smaller) once per block.
#include "kernels/cpu/paged_attention.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/ops_impl.h"
#include "kernels/cpu/paged_attention_impl.h"
#include "kernels/cpu/quant.h"

namespace kvc::kernels {

namespace {

// Scores of kv head h's query heads q (n_group, head_dim) over positions [t0, t1) of block b
// whose K is per channel (kv_format.h): from the holding area when b is the tail block, else
// scale * (q . m + (q * d) . n_t) from the sealed block (int_k: with the table's integer loop).
// q_scaled: (n_group, head_dim); dots: (n_group).
void score_block_per_channel(const KvOpsTable& t, const OpsTable& ops, const PagedKvView& kv, int64_t b, int64_t t0,
                             int64_t t1, int h, const float* q, int n_group, const AttentionShape& s, bool int_k,
                             float* q_scaled, float* dots, float* sb, int64_t n_att) {
  const KvBlockLayout& l = *kv.layout;
  const int64_t n = l.row_elems();
  const int64_t B = l.block_tokens;
  if (b == kv.tail_block) {
    const uint16_t* k = kv.k_tail + (t0 - b * B) * n + static_cast<int64_t>(h) * s.head_dim;
    ops.score_range_f16(q, n_group, s.head_dim, k, n, t1 - t0, s.scale, sb, n_att);
    return;
  }
  const auto* minima = reinterpret_cast<const uint16_t*>(kv.blocks[b] + l.k_anchor_offset(kv.layer)) +
                       static_cast<int64_t>(h) * s.head_dim;
  const uint16_t* scales = minima + n;
  const uint8_t* k = kv.blocks[b] + l.k_row_offset(kv.layer, static_cast<int>(t0 - b * B)) + l.k_head_offset(h);
  if (int_k) {  // q . m is in the scores
    t.score_block_q4c_int(q, n_group, s.head_dim, scales, minima, k, l.k_row_bytes, t1 - t0, s.scale, sb, n_att);
    return;
  }
  t.scale_q_f16(q, n_group, s.head_dim, scales, minima, s.scale, q_scaled, dots);
  if (l.group != k_kv_group_max) {
    t.score_range_small_group(KvType::q4c, l.group, q_scaled, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0, s.scale,
                              sb, n_att);
  } else {
    t.score_range_q4c(q_scaled, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0, s.scale, sb, n_att);
  }
  for (int j = 0; j < n_group; ++j) {
    for (int64_t i = 0; i < t1 - t0; ++i) sb[j * n_att + i] += dots[j];
  }
}

// Softmax over n scores with one more logit, `sink`, in the denominator only:
// x_t = exp(x_t) / (sum_u exp(x_u) + exp(sink)). After the plain softmax the largest score's
// share is 1 / S (S = sum_u exp(x_u - m), m that score), so each share is scaled by
// S / (S + exp(sink - m)) = 1 / (1 + exp(sink - m) x_max).
void softmax_with_sink(const OpsTable& ops, float* x, int64_t n, float sink) {
  int64_t top = 0;
  for (int64_t i = 1; i < n; ++i) top = x[i] > x[top] ? i : top;
  const float m = x[top];
  ops.softmax_inplace(x, n);
  const float f = 1.0f / (1.0f + std::exp(sink - m) * x[top]);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

}  // namespace

void attention_paged_with(const KvOpsTable& t, const float* q, const PagedKvView& kv, int64_t n_kv,
                          const AttentionShape& s, int kv_head_begin, int kv_head_end, float* out, float* scratch) {
  KVC_KERNEL_CHECK(kv.layout != nullptr && kv.blocks != nullptr);
  const KvBlockLayout& l = *kv.layout;
  KVC_KERNEL_CHECK(s.n_kv_head > 0 && s.n_head % s.n_kv_head == 0 && s.n_kv_head == l.n_kv_head &&
                   s.head_dim == l.head_dim && 0 <= kv.layer && kv.layer < l.n_layer);
  KVC_KERNEL_CHECK(0 <= kv_head_begin && kv_head_begin <= kv_head_end && kv_head_end <= s.n_kv_head && n_kv >= 0);
  const int64_t B = l.block_tokens;
  KVC_KERNEL_CHECK(n_kv <= kv.n_blocks * B);
  const OpsTable& ops = ops_for(t.isa);
  const int n_group = s.n_head / s.n_kv_head;  // query heads per kv head
  const int64_t group_floats = static_cast<int64_t>(n_group) * s.head_dim;
  const int64_t begin = paged_window_begin(kv, n_kv);
  const int64_t n_att = n_kv - begin;
  const int64_t block_begin = begin / B;
  const int64_t block_end = (n_kv + B - 1) / B;
  for (int64_t b = block_begin; b < block_end; ++b) {
    KVC_KERNEL_CHECK(kv.blocks[b] != nullptr && reinterpret_cast<uintptr_t>(kv.blocks[b]) % alignof(uint16_t) == 0);
  }
  if (n_att == 0) {  // nothing attended: zeros, and no scratch (the caller may pass none, so no pointer into it)
    std::memset(out + kv_head_begin * group_floats, 0,
                static_cast<size_t>((kv_head_end - kv_head_begin) * group_floats) * sizeof(float));
    return;
  }

  // Integer K scores: q of each kv head's query heads quantized once, after the scores.
  struct {
    int8_t* q8 = nullptr;     // (n_group, head_dim)
    float* scale = nullptr;   // (n_group)
    int32_t* sums = nullptr;  // (n_group, head_dim / 4)
  } q_int;
  // The table's main loops take groups of 32; smaller groups take its small-group loops.
  const bool table_group = l.group == k_kv_group_max;
  // Rotated formats (kv_format.h) store q8 / q4 bytes: q is rotated like K before scoring, the
  // output rotated back after the V sum.
  const KvType k_type = kv_storage_type(l.k_type);
  const KvType v_type = kv_storage_type(l.v_type);
  const bool k_per_channel = kv_k_per_channel(l.k_type);
  KVC_KERNEL_CHECK(!k_per_channel || kv.tail_block < 0 ||
                   (kv.k_tail != nullptr && kv.v_tail != nullptr && n_kv > 0 && kv.tail_block == (n_kv - 1) / B));
  // The query's own block's V in F16 (K per channel), added after the rotated V sum.
  const int64_t v_tail_block = k_per_channel && kv.v_tail != nullptr ? kv.tail_block : -1;
  const bool int_k = table_group && !k_per_channel &&
                     ((k_type == KvType::q8 && t.score_range_q8_int != nullptr) ||
                      (k_type == KvType::q4 && t.score_range_q4_int != nullptr));
  // K per channel: integer scores quantize q * d once per block, inside the table's block loop.
  const bool int_k_per_channel =
      table_group && k_per_channel && t.score_block_q4c_int != nullptr && s.head_dim <= k_max_int_head_dim;
  float* q_rot = scratch + n_group * (n_att + s.head_dim / 2 + 1);  // (n_group, head_dim)
  float* anchor_dots = q_rot + group_floats;                        // (n_group): scale q . a for one block's K anchor a
  const bool k_anchored = kv_type_anchored(l.k_type);
  if (int_k && s.head_dim <= k_max_int_head_dim && n_att > 0) {
    float* rest = scratch + n_group * n_att;
    q_int.q8 = reinterpret_cast<int8_t*>(rest);
    q_int.scale = rest + group_floats / 4;
    q_int.sums = reinterpret_cast<int32_t*>(q_int.scale + n_group);
  }

  for (int h = kv_head_begin; h < kv_head_end; ++h) {
    const float* q_in = q + h * group_floats;   // (n_group, head_dim)
    const float* q_group = q_in;                // rotated K: q_rot
    float* out_group = out + h * group_floats;  // (n_group, head_dim)
    float* scores = scratch;                    // (n_group, n_att)
    std::memset(out_group, 0, static_cast<size_t>(group_floats) * sizeof(float));
    if (n_att == 0) continue;
    if (kv_type_rotated(l.k_type) && !k_per_channel) {
      std::memcpy(q_rot, q_in, static_cast<size_t>(group_floats) * sizeof(float));
      kv_rotate_groups(q_rot, group_floats, l.group);
      q_group = q_rot;
    }
    if (q_int.q8 != nullptr) {
      detail::quantize_q_heads(q_group, n_group, s.head_dim, q_int.q8, q_int.scale, q_int.sums);
    }
    for (int64_t b = block_begin; b < block_end; ++b) {
      const int64_t t0 = b * B > begin ? b * B : begin;
      const int64_t t1 = (b + 1) * B < n_kv ? (b + 1) * B : n_kv;
      const uint8_t* k = kv.blocks[b] + l.k_row_offset(kv.layer, static_cast<int>(t0 - b * B)) + l.k_head_offset(h);
      float* sb = scores + (t0 - begin);
      if (k_per_channel) {
        score_block_per_channel(t, ops, kv, b, t0, t1, h, q_in, n_group, s, int_k_per_channel, q_rot, anchor_dots, sb,
                                n_att);
        continue;
      }
      switch (k_type) {
        case KvType::f16:
          ops.score_range_f16(q_group, n_group, s.head_dim, reinterpret_cast<const uint16_t*>(k), l.k_row_bytes / 2,
                              t1 - t0, s.scale, sb, n_att);
          break;
        case KvType::q8:
          if (q_int.q8 != nullptr) {
            t.score_range_q8_int(q_int.q8, q_int.scale, q_int.sums, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0,
                                 s.scale, sb, n_att);
          } else if (!table_group) {
            t.score_range_small_group(k_type, l.group, q_group, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0, s.scale,
                                      sb, n_att);
          } else {
            t.score_range_q8(q_group, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0, s.scale, sb, n_att);
          }
          break;
        case KvType::q4:
          if (q_int.q8 != nullptr) {
            t.score_range_q4_int(q_int.q8, q_int.scale, q_int.sums, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0,
                                 s.scale, sb, n_att);
          } else if (!table_group) {
            t.score_range_small_group(k_type, l.group, q_group, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0, s.scale,
                                      sb, n_att);
          } else {
            t.score_range_q4(q_group, n_group, s.head_dim, k, l.k_row_bytes, t1 - t0, s.scale, sb, n_att);
          }
          break;
        case KvType::q8h:
        case KvType::q4h:
        case KvType::q4c: KVC_KERNEL_CHECK(false);  // kv_storage_type never returns a rotated type
      }
      if (k_anchored) {  // scores of the block's rows x - a: add scale q . a (the anchor is an F16 row)
        const auto* a = reinterpret_cast<const uint16_t*>(kv.blocks[b] + l.k_anchor_offset(kv.layer)) +
                        static_cast<int64_t>(h) * s.head_dim;
        ops.score_range_f16(q_in, n_group, s.head_dim, a, 0, 1, s.scale, anchor_dots, 1);
        for (int j = 0; j < n_group; ++j) {
          const float dot = anchor_dots[j];
          for (int64_t i = 0; i < t1 - t0; ++i) sb[j * n_att + i] += dot;
        }
      }
    }
    if (s.softcap > 0.0f) softcap_inplace(scores, n_group * n_att, s.softcap);
    for (int j = 0; j < n_group; ++j) {
      if (s.sinks != nullptr) {
        softmax_with_sink(ops, scores + j * n_att, n_att, s.sinks[h * n_group + j]);
      } else {
        ops.softmax_inplace(scores + j * n_att, n_att);
      }
    }
    for (int64_t b = block_begin; b < block_end; ++b) {
      const int64_t t0 = b * B > begin ? b * B : begin;
      const int64_t t1 = (b + 1) * B < n_kv ? (b + 1) * B : n_kv;
      const uint8_t* v = kv.blocks[b] + l.v_row_offset(kv.layer, static_cast<int>(t0 - b * B)) + l.v_head_offset(h);
      const float* w = scores + (t0 - begin);
      if (b == v_tail_block) continue;
      switch (v_type) {
        case KvType::f16:
          ops.accumulate_range_f16(w, n_att, n_group, reinterpret_cast<const uint16_t*>(v), l.v_row_bytes / 2, t1 - t0,
                                   s.head_dim, out_group);
          break;
        case KvType::q8:
        case KvType::q4:
          if (!table_group) {
            t.accumulate_range_small_group(v_type, l.group, w, n_att, n_group, v, l.v_row_bytes, t1 - t0, s.head_dim,
                                           out_group);
          } else if (v_type == KvType::q8) {
            t.accumulate_range_q8(w, n_att, n_group, v, l.v_row_bytes, t1 - t0, s.head_dim, out_group);
          } else {
            t.accumulate_range_q4(w, n_att, n_group, v, l.v_row_bytes, t1 - t0, s.head_dim, out_group);
          }
          break;
        case KvType::q8h:
        case KvType::q4h:
        case KvType::q4c: KVC_KERNEL_CHECK(false);
      }
    }
    if (kv_type_rotated(l.v_type)) kv_rotate_groups(out_group, group_floats, l.group);
    if (v_tail_block >= block_begin) {
      const int64_t b = v_tail_block;
      const int64_t t0 = b * B > begin ? b * B : begin;
      const int64_t n = l.row_elems();
      ops.accumulate_range_f16(scores + (t0 - begin), n_att, n_group, kv.v_tail + (t0 - b * B) * n + h * s.head_dim, n,
                               n_kv - t0, s.head_dim, out_group);
    }
  }
}

void attention_paged(const float* q, const PagedKvView& kv, int64_t n_kv, const AttentionShape& s, int kv_head_begin,
                     int kv_head_end, float* out, float* scratch) {
  attention_paged_with(kv_ops_active(), q, kv, n_kv, s, kv_head_begin, kv_head_end, out, scratch);
}

void attention_paged_reference(const float* q, const PagedKvView& kv, int64_t n_kv, const AttentionShape& s,
                               int kv_head_begin, int kv_head_end, float* out, float* scratch) {
  attention_paged_with(kv_ops_scalar(), q, kv, n_kv, s, kv_head_begin, kv_head_end, out, scratch);
}

}  // namespace kvc::kernels

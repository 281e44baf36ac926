// AVX-512 VNNI scores of a query tile against one sealed int4c block (K per channel,
// kv_format.h): q * d is quantized to int8 in registers once per block, each K row's nibbles
// are unpacked once for every query head of the tile, and the integer dots of several positions
// are summed horizontally in one transpose.
// Like every *_avx512.cpp this file uses no standard-library templates (see kv_ops_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "kernels/cpu/kv_ops.h"

namespace kvc::kernels::detail {
namespace {

// Element order. A head's K row holds head_dim / 32 groups of 16 bytes; byte i of group g holds
// element 32 g + i in its low nibble and 32 g + 16 + i in its high one. The score is a sum over
// the whole row (the nibbles need no per-group scale), so the row is cut into units whose
// nibbles are unpacked in the order the bytes give and q8 is laid out in the same order:
//
//   unit A (4 groups, 64 bytes): lo = [g0 lo | g1 lo | g2 lo | g3 lo], hi = [g0 hi | ... | g3 hi]
//   unit B (2 groups, 32 bytes): [g0 lo | g1 lo | g0 hi | g1 hi]
//   unit H (1 group, 16 bytes):  [g0 lo | 0 | g0 hi | 0]
//
// where "g lo" is 16 nibbles (elements 32 g + [0, 16)) and "g hi" the next 16. A head of HD
// elements is HD / 128 A units, then one B unit when 64 elements are left over, then one H unit
// when 32 are: k_vectors<HD> zmm registers of nibbles per row and of q8 per query head.
template <int HD>
constexpr int k_units_a = HD / 128;
template <int HD>
constexpr bool k_unit_b = HD % 128 >= 64;
template <int HD>
constexpr bool k_unit_h = HD % 64 == 32;
template <int HD>
constexpr int k_vectors = 2 * k_units_a<HD> + (k_unit_b<HD> ? 1 : 0) + (k_unit_h<HD> ? 1 : 0);

// Four 16-byte pieces as one vector, a in the lowest 128 bits.
__m512i join4(__m128i a, __m128i b, __m128i c, __m128i d) {
  const __m256i ab = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
  const __m256i cd = _mm256_inserti128_si256(_mm256_castsi128_si256(c), d, 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(ab), cd, 1);
}

// The nibbles of one row in unit order (above): u[k_vectors<HD>].
template <int HD>
void load_nibbles(const uint8_t* row, __m512i* u) {
  const __m512i nib = _mm512_set1_epi8(0x0f);
  int v = 0;
  for (int a = 0; a < k_units_a<HD>; ++a, row += 64) {
    const __m512i x = _mm512_loadu_si512(row);
    u[v++] = _mm512_and_si512(x, nib);
    u[v++] = _mm512_and_si512(_mm512_srli_epi16(x, 4), nib);
  }
  if constexpr (k_unit_b<HD>) {  // [b b] -> low nibbles in the low half, high ones in the high half
    const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
    u[v++] = _mm512_and_si512(_mm512_mask_blend_epi64(0xf0, x, _mm512_srli_epi16(x, 4)), nib);
    row += 32;
  }
  if constexpr (k_unit_h<HD>) {  // [b 0 b 0] (reads only the group's 16 bytes)
    const __m512i x = _mm512_maskz_broadcast_i32x4(0x0f0f, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
    u[v++] = _mm512_and_si512(_mm512_mask_blend_epi64(0xf0, x, _mm512_srli_epi16(x, 4)), nib);
  }
}

// Lane i of the result = sum of the 16 lanes of v[i] (exact: integer adds). Inlined: a call
// costs the 16 vectors a trip through memory.
[[gnu::always_inline]] inline __m512i sum16(const __m512i* v) {
  __m512i s1[8];
  for (int i = 0; i < 8; ++i) {  // per 128 bits: [a0+a2, b0+b2, a1+a3, b1+b3]
    s1[i] =
        _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
  }
  __m512i s2[4];
  for (int i = 0; i < 4; ++i) {  // per 128 bits L: the sums over L of v[4i], ..., v[4i + 3]
    s2[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(s1[2 * i], s1[2 * i + 1]),
                             _mm512_unpackhi_epi64(s1[2 * i], s1[2 * i + 1]));
  }
  __m512i s3[2];
  for (int i = 0; i < 2; ++i) {  // 128-bit lanes [L0 + L2, L1 + L3] of v[8i..8i+3], then of v[8i+4..8i+7]
    s3[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(s2[2 * i], s2[2 * i + 1], 0x44),
                             _mm512_shuffle_i32x4(s2[2 * i], s2[2 * i + 1], 0xee));
  }
  return _mm512_add_epi32(_mm512_shuffle_i32x4(s3[0], s3[1], 0x88), _mm512_shuffle_i32x4(s3[0], s3[1], 0xdd));
}

// One query tile of NJ rows (1, 2, 4 or 8; rows n_valid.. are padding, never stored) against
// n_pos K rows of one block. Positions go P at a time, P = 16 / NJ, so that the NJ x P integer
// dots fill one horizontal sum: lane j P + p is row j at position p.
template <int NJ, int HD>
void score_tile(const float* q, int n_valid, const __m512* dv, const __m512* mv, const uint8_t* k, int64_t k_stride,
                int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  constexpr int NV = HD / 16;  // float vectors per head
  constexpr int NU = k_vectors<HD>;
  constexpr int P = 16 / NJ;
  // q8[j][u]: row j's int8 levels of q * d in unit order; rs / qm per lane (row j = lane / P):
  // the score is fl(fl(dot * rs) + qm), rs = scale * s_j and qm = scale * q_j . m, the two
  // roundings of the two-pass kernel this replaced (prepare, then score, then add).
  __m512i q8[NJ][NU];
  alignas(64) float rs_lanes[16] = {};
  alignas(64) float qm_lanes[16] = {};
  for (int j = 0; j < NJ; ++j) {
    if (j >= n_valid) {
      for (int u = 0; u < NU; ++u) q8[j][u] = _mm512_setzero_si512();
      continue;
    }
    const float* qj = q + static_cast<int64_t>(j) * HD;
    __m512 x[NV];
    __m512 amax = _mm512_setzero_ps();
    __m512 dot = _mm512_setzero_ps();
    for (int i = 0; i < NV; ++i) {
      const __m512 qv = _mm512_loadu_ps(qj + 16 * i);
      x[i] = _mm512_mul_ps(qv, dv[i]);
      amax = _mm512_max_ps(amax, _mm512_abs_ps(x[i]));
      dot = _mm512_fmadd_ps(qv, mv[i], dot);
    }
    // The levels as quantize_q_heads (kv_ops_scalar.cpp) rounds them: d = amax / 127, nearest even.
    const float s = _mm512_reduce_max_ps(amax) / 127.0f;
    const __m512 id = _mm512_set1_ps(s != 0.0f ? 1.0f / s : 0.0f);
    __m128i p[NV];
    for (int i = 0; i < NV; ++i) {
      const __m512 v =
          _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x[i], id), _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
      p[i] = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v));
    }
    int u = 0;
    int i = 0;
    for (int a = 0; a < k_units_a<HD>; ++a, i += 8) {
      q8[j][u++] = join4(p[i], p[i + 2], p[i + 4], p[i + 6]);
      q8[j][u++] = join4(p[i + 1], p[i + 3], p[i + 5], p[i + 7]);
    }
    if constexpr (k_unit_b<HD>) {
      q8[j][u++] = join4(p[i], p[i + 2], p[i + 1], p[i + 3]);
      i += 4;
    }
    if constexpr (k_unit_h<HD>) q8[j][u++] = join4(p[i], _mm_setzero_si128(), p[i + 1], _mm_setzero_si128());
    const float rs = scale * s;
    const float qm = _mm512_reduce_add_ps(dot) * scale;
    for (int l = 0; l < P; ++l) {
      rs_lanes[j * P + l] = rs;
      qm_lanes[j * P + l] = qm;
    }
  }
  const __m512 rsv = _mm512_load_ps(rs_lanes);
  const __m512 qmv = _mm512_load_ps(qm_lanes);

  for (int64_t t = 0; t < n_pos; t += P) {
    const int64_t n = n_pos - t < P ? n_pos - t : P;
    __m512i acc[16];
    for (int p = 0; p < P; ++p) {
      for (int j = 0; j < NJ; ++j) acc[j * P + p] = _mm512_setzero_si512();
      if (p >= n) continue;
      __m512i u[NU];
      load_nibbles<HD>(k + (t + p) * k_stride, u);
      for (int j = 0; j < NJ; ++j) {
        for (int v = 0; v < NU; ++v) acc[j * P + p] = _mm512_dpbusd_epi32(acc[j * P + p], u[v], q8[j][v]);
      }
    }
    // Explicit rounding: no contraction of the multiply and the add into one FMA.
    const __m512 dots = _mm512_cvtepi32_ps(sum16(acc));
    const __m512 out =
        _mm512_add_round_ps(_mm512_mul_round_ps(dots, rsv, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), qmv,
                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    float* st = scores + t;
    if (n == P && n_valid == NJ) {
      if constexpr (NJ == 1) {
        _mm512_storeu_ps(st, out);
      } else if constexpr (NJ == 2) {
        _mm256_storeu_ps(st, _mm512_castps512_ps256(out));
        _mm256_storeu_ps(st + score_stride, _mm512_extractf32x8_ps(out, 1));
      } else if constexpr (NJ == 4) {
        _mm_storeu_ps(st, _mm512_castps512_ps128(out));
        _mm_storeu_ps(st + score_stride, _mm512_extractf32x4_ps(out, 1));
        _mm_storeu_ps(st + 2 * score_stride, _mm512_extractf32x4_ps(out, 2));
        _mm_storeu_ps(st + 3 * score_stride, _mm512_extractf32x4_ps(out, 3));
      } else {
        const __m128 o[4] = {_mm512_castps512_ps128(out), _mm512_extractf32x4_ps(out, 1),
                             _mm512_extractf32x4_ps(out, 2), _mm512_extractf32x4_ps(out, 3)};
        for (int l = 0; l < 4; ++l) {
          _mm_storel_pi(reinterpret_cast<__m64*>(st + (2 * l) * score_stride), o[l]);
          _mm_storeh_pi(reinterpret_cast<__m64*>(st + (2 * l + 1) * score_stride), o[l]);
        }
      }
    } else {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, out);
      for (int j = 0; j < n_valid; ++j) {
        for (int64_t p = 0; p < n; ++p) st[j * score_stride + p] = lanes[j * P + p];
      }
    }
  }
}

template <int HD>
void score_block(const float* q, int n_q, const uint16_t* d, const uint16_t* m, const uint8_t* k, int64_t k_stride,
                 int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  constexpr int NV = HD / 16;
  __m512 dv[NV];
  __m512 mv[NV];
  for (int i = 0; i < NV; ++i) {
    dv[i] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + 16 * i)));
    mv[i] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 16 * i)));
  }
  for (int j0 = 0; j0 < n_q; j0 += 8) {
    const int r = n_q - j0 < 8 ? n_q - j0 : 8;
    const float* qt = q + static_cast<int64_t>(j0) * HD;
    float* out = scores + j0 * score_stride;
    if (r == 1) {
      score_tile<1, HD>(qt, r, dv, mv, k, k_stride, n_pos, scale, out, score_stride);
    } else if (r == 2) {
      score_tile<2, HD>(qt, r, dv, mv, k, k_stride, n_pos, scale, out, score_stride);
    } else if (r <= 4) {
      score_tile<4, HD>(qt, r, dv, mv, k, k_stride, n_pos, scale, out, score_stride);
    } else {
      score_tile<8, HD>(qt, r, dv, mv, k, k_stride, n_pos, scale, out, score_stride);
    }
  }
}

}  // namespace

void score_block_q4c_vnni(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, const uint8_t* k,
                          int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  switch (head_dim) {
    case 32: score_block<32>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
    case 64: score_block<64>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
    case 96: score_block<96>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
    case 128: score_block<128>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
    case 160: score_block<160>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
    case 192: score_block<192>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
    case 224: score_block<224>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
    default: score_block<256>(q, n_q, d, m, k, k_stride_bytes, n_pos, scale, scores, score_stride); break;
  }
}

}  // namespace kvc::kernels::detail

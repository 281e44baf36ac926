// AVX-512 VNNI scores of a query tile against INT8 / INT4 K rows: q is quantized to int8 once
// per call (quantize_q_heads) and each 64-element chunk of a K row costs one VPDPBUSD per
// query row; the K group scales are applied per 32-bit lane before the horizontal sums.
// Like every *_avx512.cpp this file uses no standard-library templates (see kv_ops_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kv_ops.h"

namespace kvc::kernels::detail {
namespace {

constexpr int k_chunk = 64;  // elements per VPDPBUSD: 2 groups, 16 lanes of 4 bytes
constexpr int k_max_chunks = k_max_int_head_dim / k_chunk;

// Decoded integers are k = u - offset with u the unsigned byte fed to VPDPBUSD:
//   q8: u = k xor 0x80 = k + 128;   q4: u = nibble, k = nibble - 8.
// (int4c K: kv_score_q4c_vnni_avx512.cpp.)
template <KvType T>
constexpr int k_offset = T == KvType::q8 ? 128 : 8;
template <KvType T>
constexpr int64_t k_group_bytes = T == KvType::q8 ? 2 + k_kv_group_max : 2 + k_kv_group_max / 2;

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Unsigned bytes of groups g and g + 1 (when has_next; zeros otherwise) in element order, and
// the groups' scales spread over the lanes that sum them (lanes 0-7: g, lanes 8-15: g + 1).
template <KvType T>
__m512i load_chunk(const uint8_t* g0, bool has_next, __m512* dk) {
  const uint8_t* g1 = g0 + k_group_bytes<T>;
  const uint16_t s1 = has_next ? load_u16(g1) : 0;
  const __m128 scales = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(load_u16(g0)), s1, 1));
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  *dk = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(scales));
  if constexpr (T == KvType::q8) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g0 + 2));
    const __m256i hi = has_next ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g1 + 2)) : _mm256_setzero_si256();
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(-128));
  } else {
    // [b0 b0 b1 b1] by 128-bit lanes; low nibbles in lanes 0 and 2, high nibbles in 1 and 3.
    constexpr int64_t h = 2;  // the scale
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g0 + h));
    const __m128i b1 = has_next ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(g1 + h)) : _mm_setzero_si128();
    const __m512i x =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(b0)), _mm256_broadcastsi128_si256(b1), 1);
    const __m512i nib = _mm512_set1_epi8(0x0f);
    return _mm512_mask_blend_epi64(0xcc, _mm512_and_si512(x, nib), _mm512_and_si512(_mm512_srli_epi16(x, 4), nib));
  }
}

// Horizontal sums of a[0..7] in one vector: lane k = sum of the lanes of a[k].
__m256 transpose_sum8(const __m512* a) {
  __m512 p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
  }
  const __m512 r0 = _mm512_add_ps(_mm512_shuffle_f32x4(p[0], p[1], 0x88), _mm512_shuffle_f32x4(p[0], p[1], 0xdd));
  const __m512 r1 = _mm512_add_ps(_mm512_shuffle_f32x4(p[2], p[3], 0x88), _mm512_shuffle_f32x4(p[2], p[3], 0xdd));
  const __m512 s = _mm512_add_ps(_mm512_unpacklo_ps(r0, r1), _mm512_unpackhi_ps(r0, r1));
  const __m512 f = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4e));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, f));
}

// NC = chunks of 64 elements per head (the last one may hold a single group); a compile-time
// count lets the compiler keep q and the corrections in registers for short heads.
template <KvType T, int NJ, int NC>
void score_tile(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int head_dim, const uint8_t* k,
                int64_t k_stride, int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  const int n_groups = head_dim / k_kv_group_max;
  constexpr int n_chunks = NC;
  // init[j][c] = -offset * (sum of q8 per lane): VPDPBUSD of u = k + offset then gives q8 . k.
  __m512i init[NJ][NC];
  for (int j = 0; j < NJ; ++j) {
    for (int c = 0; c < n_chunks; ++c) {
      const __mmask16 m = 2 * c + 1 < n_groups ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>(0x00ff);
      const __m512i sums = _mm512_maskz_loadu_epi32(m, q_sums + j * (head_dim / 4) + c * 16);
      init[j][c] = _mm512_mullo_epi32(sums, _mm512_set1_epi32(-k_offset<T>));
    }
  }
  alignas(32) float row_scale[8] = {};
  for (int j = 0; j < NJ; ++j) row_scale[j] = scale * q_scale[j];
  const __m256 rs = _mm256_load_ps(row_scale);
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* kt = k + t * k_stride;
    __m512 r[NJ];
    for (int j = 0; j < NJ; ++j) r[j] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int c = 0; c < n_chunks; ++c) {
      const bool has_next = 2 * c + 1 < n_groups;
      const __mmask64 mq = has_next ? ~static_cast<__mmask64>(0) : static_cast<__mmask64>(0xffffffffu);
      __m512 dk;
      const __m512i u = load_chunk<T>(kt + 2 * c * k_group_bytes<T>, has_next, &dk);
      for (int j = 0; j < NJ; ++j) {
        const __m512i qj = _mm512_maskz_loadu_epi8(mq, q8 + j * head_dim + c * k_chunk);
        const __m512i dot = _mm512_dpbusd_epi32(init[j][c], u, qj);
        r[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), dk, r[j]);
      }
    }
    if constexpr (NJ == 8) {
      float dots[8];
      _mm256_storeu_ps(dots, _mm256_mul_ps(transpose_sum8(r), rs));
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = dots[j];
    } else {
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = _mm512_reduce_add_ps(r[j]) * row_scale[j];
    }
  }
}

template <KvType T, int NJ>
void score_tile_any(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int head_dim, const uint8_t* k,
                    int64_t k_stride, int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  switch ((head_dim + k_chunk - 1) / k_chunk) {
    case 1: score_tile<T, NJ, 1>(q8, q_scale, q_sums, head_dim, k, k_stride, n_pos, scale, scores, score_stride); break;
    case 2: score_tile<T, NJ, 2>(q8, q_scale, q_sums, head_dim, k, k_stride, n_pos, scale, scores, score_stride); break;
    case 3: score_tile<T, NJ, 3>(q8, q_scale, q_sums, head_dim, k, k_stride, n_pos, scale, scores, score_stride); break;
    default:
      score_tile<T, NJ, k_max_chunks>(q8, q_scale, q_sums, head_dim, k, k_stride, n_pos, scale, scores, score_stride);
      break;
  }
}

template <KvType T>
void score_range(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int n_q, int head_dim, const uint8_t* k,
                 int64_t k_stride, int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  constexpr int k_tile = 8;
  for (int j0 = 0; j0 < n_q; j0 += k_tile) {
    const int8_t* qt = q8 + static_cast<int64_t>(j0) * head_dim;
    const float* st = q_scale + j0;
    const int32_t* ut = q_sums + static_cast<int64_t>(j0) * (head_dim / 4);
    float* out = scores + j0 * score_stride;
    switch (n_q - j0 >= k_tile ? k_tile : n_q - j0) {
      case 8: score_tile_any<T, 8>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
      case 7: score_tile_any<T, 7>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
      case 6: score_tile_any<T, 6>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
      case 5: score_tile_any<T, 5>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
      case 4: score_tile_any<T, 4>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
      case 3: score_tile_any<T, 3>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
      case 2: score_tile_any<T, 2>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
      default: score_tile_any<T, 1>(qt, st, ut, head_dim, k, k_stride, n_pos, scale, out, score_stride); break;
    }
  }
}

}  // namespace

void score_range_q8_vnni(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int n_q, int head_dim,
                         const uint8_t* k, int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                         int64_t score_stride) {
  score_range<KvType::q8>(q8, q_scale, q_sums, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
}

void score_range_q4_vnni(const int8_t* q8, const float* q_scale, const int32_t* q_sums, int n_q, int head_dim,
                         const uint8_t* k, int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                         int64_t score_stride) {
  score_range<KvType::q4>(q8, q_scale, q_sums, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
}

// ScaleQFn (kv_ops.h); head_dim a multiple of 8 (the last 8 masked).
void scale_q_f16_avx512(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, float scale,
                        float* out, float* qm) {
  for (int j = 0; j < n_q; ++j) {
    __m512 dot = _mm512_setzero_ps();
    for (int c = 0; c < head_dim; c += 16) {
      const __mmask16 k = head_dim - c >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>(0x00ff);
      const int64_t o = static_cast<int64_t>(j) * head_dim + c;
      const __m512 qv = _mm512_maskz_loadu_ps(k, q + o);
      const __m512 dc = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, d + c));
      const __m512 mc = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, m + c));
      _mm512_mask_storeu_ps(out + o, k, _mm512_mul_ps(qv, dc));
      dot = _mm512_fmadd_ps(qv, mc, dot);
    }
    qm[j] = _mm512_reduce_add_ps(dot) * scale;
  }
}

}  // namespace kvc::kernels::detail

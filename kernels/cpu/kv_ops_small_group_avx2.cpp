// AVX2 + FMA + F16C attention loops over INT8 / INT4 KV rows in groups of 16 or 8 elements
// (head sizes that 32 does not divide): each group is dequantized in registers, one or two
// vectors of 8 floats, and fed to FMAs. Every ISA from AVX2 up uses these for small groups.
// Like every *_avx2.cpp this file uses no standard-library templates (see kv_ops_avx2.cpp).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kv_ops.h"

namespace kvc::kernels::detail {
namespace {

constexpr int k_lanes = 8;
template <KvType T, int G>
constexpr int64_t k_group_bytes = T == KvType::q8    ? 2 + G
                                  : T == KvType::q4c ? G / 2
                                                     : 2 + G / 2;

float group_scale(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// Elements [0, 8) of a vector of int8 as floats times d.
__m256 to_float(__m128i bytes8, __m256 d) { return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes8)), d); }

// The G elements of the group at p as G / 8 vectors, v[i] = elements [8i, 8i + 8). Reads only
// the group's own bytes.
template <KvType T, int G>
void load_group(const uint8_t* p, __m256* v) {
  if constexpr (T == KvType::q4c) {  // K per channel: the nibbles as they are, no scale header
    __m128i bytes;
    if constexpr (G == 16) {
      bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    } else {
      int32_t four;
      std::memcpy(&four, p, 4);
      bytes = _mm_cvtsi32_si128(four);
    }
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(bytes, nib);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), nib);
    if constexpr (G == 16) {
      v[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
      v[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    } else {
      v[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpacklo_epi32(lo, hi)));
    }
    return;
  }
  const __m256 d = _mm256_set1_ps(group_scale(p));
  if constexpr (T == KvType::q8) {
    if constexpr (G == 16) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
      v[0] = to_float(a, d);
      v[1] = to_float(_mm_srli_si128(a, 8), d);
    } else {
      v[0] = to_float(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2)), d);
    }
  } else {
    // G / 2 bytes: low nibbles hold elements [0, G/2), high nibbles [G/2, G).
    __m128i bytes;
    if constexpr (G == 16) {
      bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2));
    } else {
      int32_t four;
      std::memcpy(&four, p + 2, 4);
      bytes = _mm_cvtsi32_si128(four);
    }
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i eight = _mm_set1_epi8(8);
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(bytes, nib), eight);
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), nib), eight);
    if constexpr (G == 16) {
      v[0] = to_float(lo, d);
      v[1] = to_float(hi, d);
    } else {
      v[0] = to_float(_mm_unpacklo_epi32(lo, hi), d);
    }
  }
}

float hsum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Scores of NJ query rows: each K group is dequantized once for all NJ rows.
template <KvType T, int G, int NJ>
void score_tile(const float* q, int head_dim, const uint8_t* k, int64_t k_stride, int64_t n_pos, float scale,
                float* scores, int64_t score_stride) {
  constexpr int NV = G / k_lanes;
  const int n_groups = head_dim / G;
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* kt = k + t * k_stride;
    __m256 acc[NJ];
    for (int j = 0; j < NJ; ++j) acc[j] = _mm256_setzero_ps();
    for (int g = 0; g < n_groups; ++g) {
      __m256 kg[NV];
      load_group<T, G>(kt + g * k_group_bytes<T, G>, kg);
      const float* qg = q + g * G;
      for (int j = 0; j < NJ; ++j) {
        for (int i = 0; i < NV; ++i) {
          acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + j * head_dim + i * k_lanes), kg[i], acc[j]);
        }
      }
    }
    for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = hsum(acc[j]) * scale;
  }
}

template <KvType T, int G>
void score_range(const float* q, int n_q, int head_dim, const uint8_t* k, int64_t k_stride, int64_t n_pos, float scale,
                 float* scores, int64_t score_stride) {
  constexpr int k_tile = 4;
  for (int j0 = 0; j0 < n_q; j0 += k_tile) {
    const float* qt = q + static_cast<int64_t>(j0) * head_dim;
    float* st = scores + j0 * score_stride;
    switch (n_q - j0 >= k_tile ? k_tile : n_q - j0) {
      case 4: score_tile<T, G, 4>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 3: score_tile<T, G, 3>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 2: score_tile<T, G, 2>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      default: score_tile<T, G, 1>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
    }
  }
}

// acc tile of NJ query rows x one group (G dims), held in registers over all positions.
template <KvType T, int G, int NJ>
void accumulate_tile(const float* w, int64_t w_stride, const uint8_t* v, int64_t v_stride, int64_t n_pos, float* acc,
                     int head_dim) {
  constexpr int NV = G / k_lanes;
  __m256 a[NJ][NV];
  for (int j = 0; j < NJ; ++j) {
    for (int i = 0; i < NV; ++i) a[j][i] = _mm256_loadu_ps(acc + j * head_dim + i * k_lanes);
  }
  for (int64_t t = 0; t < n_pos; ++t) {
    __m256 vg[NV];
    load_group<T, G>(v + t * v_stride, vg);
    for (int j = 0; j < NJ; ++j) {
      const __m256 wj = _mm256_set1_ps(w[j * w_stride + t]);
      for (int i = 0; i < NV; ++i) a[j][i] = _mm256_fmadd_ps(wj, vg[i], a[j][i]);
    }
  }
  for (int j = 0; j < NJ; ++j) {
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(acc + j * head_dim + i * k_lanes, a[j][i]);
  }
}

template <KvType T, int G>
void accumulate_range(const float* w, int64_t w_stride, int n_q, const uint8_t* v, int64_t v_stride, int64_t n_pos,
                      int head_dim, float* acc) {
  constexpr int k_rows = 4;  // query rows per tile: at most 8 accumulators + 2 values
  const int n_groups = head_dim / G;
  for (int g = 0; g < n_groups; ++g) {
    for (int j0 = 0; j0 < n_q; j0 += k_rows) {
      const float* wt = w + j0 * w_stride;
      const uint8_t* vg = v + g * k_group_bytes<T, G>;
      float* at = acc + static_cast<int64_t>(j0) * head_dim + g * G;
      switch (n_q - j0 >= k_rows ? k_rows : n_q - j0) {
        case 4: accumulate_tile<T, G, 4>(wt, w_stride, vg, v_stride, n_pos, at, head_dim); break;
        case 3: accumulate_tile<T, G, 3>(wt, w_stride, vg, v_stride, n_pos, at, head_dim); break;
        case 2: accumulate_tile<T, G, 2>(wt, w_stride, vg, v_stride, n_pos, at, head_dim); break;
        default: accumulate_tile<T, G, 1>(wt, w_stride, vg, v_stride, n_pos, at, head_dim); break;
      }
    }
  }
}

}  // namespace

void score_range_small_group_avx2(KvType type, int group, const float* q, int n_q, int head_dim, const uint8_t* k,
                                  int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                                  int64_t score_stride) {
  if (type == KvType::q8) {
    if (group == 16) {
      score_range<KvType::q8, 16>(q, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
    } else {
      score_range<KvType::q8, 8>(q, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
    }
  } else if (type == KvType::q4c) {
    if (group == 16) {
      score_range<KvType::q4c, 16>(q, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
    } else {
      score_range<KvType::q4c, 8>(q, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
    }
  } else if (group == 16) {
    score_range<KvType::q4, 16>(q, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
  } else {
    score_range<KvType::q4, 8>(q, n_q, head_dim, k, k_stride_bytes, n_pos, scale, scores, score_stride);
  }
}

void accumulate_range_small_group_avx2(KvType type, int group, const float* w, int64_t w_stride, int n_q,
                                       const uint8_t* v, int64_t v_stride_bytes, int64_t n_pos, int head_dim,
                                       float* acc) {
  if (type == KvType::q8) {
    if (group == 16) {
      accumulate_range<KvType::q8, 16>(w, w_stride, n_q, v, v_stride_bytes, n_pos, head_dim, acc);
    } else {
      accumulate_range<KvType::q8, 8>(w, w_stride, n_q, v, v_stride_bytes, n_pos, head_dim, acc);
    }
  } else if (group == 16) {
    accumulate_range<KvType::q4, 16>(w, w_stride, n_q, v, v_stride_bytes, n_pos, head_dim, acc);
  } else {
    accumulate_range<KvType::q4, 8>(w, w_stride, n_q, v, v_stride_bytes, n_pos, head_dim, acc);
  }
}

}  // namespace kvc::kernels::detail

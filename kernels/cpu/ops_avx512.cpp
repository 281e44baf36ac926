// AVX-512 (F/BW/VL/DQ) variants of the ops kernels; tails use masked loads and stores.
// Like every *_avx512.cpp this file uses no standard-library templates, so no function
// compiled for AVX-512 can be picked by the linker for a caller on an older CPU.
// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_ps(), which trips
// -W(maybe-)uninitialized (GCC bug 105593) once they are inlined; the warning is not ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "kernels/cpu/ops_impl.h"

namespace kvc::kernels {
namespace {

constexpr int k_lanes = 16;

__mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// exp(x) for 16 floats. Range reduction x = n ln2 + r with |r| <= ln2/2 (ln2 split in two
// parts so r is exact to float), exp(r) by its degree-7 Taylor polynomial (truncation error
// < 1e-8 relative), and 2^n applied as two factors 2^(n/2) 2^(n - n/2) so that results
// overflow to inf and underflow through subnormals to 0 by IEEE rounding. NaN propagates.
__m512 exp16(__m512 x) {
  constexpr double k_ln2 = 0.6931471805599453094;
  constexpr auto k_ln2_hi = static_cast<float>(k_ln2);
  constexpr auto k_ln2_lo = static_cast<float>(k_ln2 - static_cast<double>(k_ln2_hi));
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // operand order keeps NaN
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(k_ln2_hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(k_ln2_lo), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i ni = _mm512_cvtps_epi32(n);  // in [-150, 129]
  const __m512i n1 = _mm512_srai_epi32(ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

__m512 load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
__m512 load_f16_masked(__mmask16 m, const uint16_t* p) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

void rmsnorm_avx512(const float* x, const float* w, int64_t n, float eps, float* out) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 2 * k_lanes <= n; i += 2 * k_lanes) {
    const __m512 a = _mm512_loadu_ps(x + i);
    const __m512 b = _mm512_loadu_ps(x + i + k_lanes);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + i);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  const float sum_sq = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  const float rms = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(sum_sq / static_cast<float>(n) + eps)));
  const __m512 inv_rms = _mm512_set1_ps(1.0f / rms);
  for (i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 b = _mm512_maskz_loadu_ps(m, w + i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(a, inv_rms), b));
  }
}

void silu_mul_avx512(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 e = exp16(_mm512_xor_ps(g, sign));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, u));
  }
}

void add_inplace_avx512(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 a = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 b = _mm512_maskz_loadu_ps(m, y + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_add_ps(a, b));
  }
}

void softmax_inplace_avx512(float* x, int64_t n) {
  if (n <= 0) return;
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, m, x + i));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max));
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
    _mm512_mask_storeu_ps(x + i, m, e);
  }
  const __m512 inv_sum = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (int64_t i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv_sum));
  }
}

void rope_apply_avx512(float* x, int n_heads, int head_dim, int n_rot, bool interleaved, const float* cos_full,
                       const float* sin_signed) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    if (interleaved) {
      // Pairs never straddle a vector: n_rot and every chunk start are even.
      for (int i = 0; i < n_rot; i += k_lanes) {
        const __mmask16 m = n_rot - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n_rot - i);
        const __m512 a = _mm512_maskz_loadu_ps(m, xh + i);
        const __m512 swapped = _mm512_permute_ps(a, 0xb1);  // (x1, x0, x3, x2, ...)
        const __m512 c = _mm512_maskz_loadu_ps(m, cos_full + i);
        const __m512 s = _mm512_maskz_loadu_ps(m, sin_signed + i);
        _mm512_mask_storeu_ps(xh + i, m, _mm512_fmadd_ps(swapped, s, _mm512_mul_ps(a, c)));
      }
    } else {
      for (int i = 0; i < half; i += k_lanes) {
        const __mmask16 m = half - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(half - i);
        const __m512 a = _mm512_maskz_loadu_ps(m, xh + i);
        const __m512 b = _mm512_maskz_loadu_ps(m, xh + half + i);
        const __m512 c = _mm512_maskz_loadu_ps(m, cos_full + i);
        const __m512 s = _mm512_maskz_loadu_ps(m, sin_signed + half + i);
        _mm512_mask_storeu_ps(xh + i, m, _mm512_fnmadd_ps(b, s, _mm512_mul_ps(a, c)));
        _mm512_mask_storeu_ps(xh + half + i, m, _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c)));
      }
    }
  }
}

void f32_to_f16_row_avx512(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(out + i, m, h);
  }
}

void exp_row_avx512(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += k_lanes) {
    const __mmask16 m = n - i >= k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// The 8 horizontal sums of a[0..7], in order, by a transposing tree (three levels of
// shuffles and adds instead of eight separate reductions).
__m256 reduce8(const __m512* a) {
  // Level 1: fold 512 -> 256 bits; s01 holds a0 in 128-bit blocks 0-1, a1 in blocks 2-3.
  const auto fold2 = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x44), _mm512_shuffle_f32x4(x, y, 0xee));
  };
  const __m512 s01 = fold2(a[0], a[1]);
  const __m512 s23 = fold2(a[2], a[3]);
  const __m512 s45 = fold2(a[4], a[5]);
  const __m512 s67 = fold2(a[6], a[7]);
  // Level 2: block k of u0 holds 4 partial sums of a[k], of u1 those of a[k + 4].
  const auto fold4 = [](__m512 x, __m512 y) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xdd));
  };
  const __m512 u0 = fold4(s01, s23);
  const __m512 u1 = fold4(s45, s67);
  // Level 3: lane 4k = sum of a[k], lane 4k + 1 = sum of a[k + 4].
  const __m512 p = _mm512_add_ps(_mm512_unpacklo_ps(u0, u1), _mm512_unpackhi_ps(u0, u1));
  const __m512 r = _mm512_add_ps(p, _mm512_permute_ps(p, 0x4e));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, r));
}

// Scores of NJ query rows against each position: the K row is converted once per tile.
template <int NJ>
void score_tile(const float* q, int head_dim, const uint16_t* k, int64_t k_stride, int64_t n_pos, float scale,
                float* scores, int64_t score_stride) {
  const int n_full = head_dim / k_lanes * k_lanes;
  const __mmask16 m_tail = tail_mask(head_dim - n_full);
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint16_t* kt = k + t * k_stride;
    __m512 acc[NJ];
    for (int j = 0; j < NJ; ++j) acc[j] = _mm512_setzero_ps();
    for (int d = 0; d < n_full; d += k_lanes) {
      const __m512 kv = load_f16(kt + d);
      for (int j = 0; j < NJ; ++j) acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + j * head_dim + d), kv, acc[j]);
    }
    if (m_tail != 0) {
      const __m512 kv = load_f16_masked(m_tail, kt + n_full);
      for (int j = 0; j < NJ; ++j) {
        acc[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m_tail, q + j * head_dim + n_full), kv, acc[j]);
      }
    }
    if constexpr (NJ == 8) {
      float dots[8];
      _mm256_storeu_ps(dots, _mm256_mul_ps(reduce8(acc), _mm256_set1_ps(scale)));
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = dots[j];
    } else {
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = _mm512_reduce_add_ps(acc[j]) * scale;
    }
  }
}

void score_range_f16_avx512(const float* q, int n_q, int head_dim, const uint16_t* k, int64_t k_stride, int64_t n_pos,
                            float scale, float* scores, int64_t score_stride) {
  constexpr int k_tile = 8;
  for (int j0 = 0; j0 < n_q; j0 += k_tile) {
    const float* qt = q + static_cast<int64_t>(j0) * head_dim;
    float* st = scores + j0 * score_stride;
    switch (n_q - j0 >= k_tile ? k_tile : n_q - j0) {
      case 8: score_tile<8>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 7: score_tile<7>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 6: score_tile<6>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 5: score_tile<5>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 4: score_tile<4>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 3: score_tile<3>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 2: score_tile<2>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      default: score_tile<1>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
    }
  }
}

// acc tile of NJ query rows x NV vectors of dims, held in registers over all positions;
// the last vector of the tile is masked by m_last.
template <int NJ, int NV>
void accumulate_tile(const float* w, int64_t w_stride, const uint16_t* v, int64_t v_stride, int64_t n_pos, float* acc,
                     int head_dim, __mmask16 m_last) {
  // GCC keeps a[][] in registers only when these loops are unrolled before scalar
  // replacement, hence the pragmas (without them it stores all 16 vectors every position).
  __m512 a[NJ][NV];
#pragma GCC unroll 4
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NV - 1; ++i) a[j][i] = _mm512_loadu_ps(acc + j * head_dim + i * k_lanes);
    a[j][NV - 1] = _mm512_maskz_loadu_ps(m_last, acc + j * head_dim + (NV - 1) * k_lanes);
  }
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint16_t* vt = v + t * v_stride;
    __m512 vv[NV];
#pragma GCC unroll 4
    for (int i = 0; i < NV - 1; ++i) vv[i] = load_f16(vt + i * k_lanes);
    vv[NV - 1] = load_f16_masked(m_last, vt + (NV - 1) * k_lanes);
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) {
      const __m512 wj = _mm512_set1_ps(w[j * w_stride + t]);
#pragma GCC unroll 4
      for (int i = 0; i < NV; ++i) a[j][i] = _mm512_fmadd_ps(wj, vv[i], a[j][i]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NV - 1; ++i) _mm512_storeu_ps(acc + j * head_dim + i * k_lanes, a[j][i]);
    _mm512_mask_storeu_ps(acc + j * head_dim + (NV - 1) * k_lanes, m_last, a[j][NV - 1]);
  }
}

using AccumulateTile = void (*)(const float*, int64_t, const uint16_t*, int64_t, int64_t, float*, int, __mmask16);
constexpr int k_acc_rows = 4;  // query rows per tile
constexpr int k_acc_vecs = 4;  // vectors of 16 dims per tile
constexpr AccumulateTile k_acc_tiles[k_acc_rows][k_acc_vecs] = {
    {accumulate_tile<1, 1>, accumulate_tile<1, 2>, accumulate_tile<1, 3>, accumulate_tile<1, 4>},
    {accumulate_tile<2, 1>, accumulate_tile<2, 2>, accumulate_tile<2, 3>, accumulate_tile<2, 4>},
    {accumulate_tile<3, 1>, accumulate_tile<3, 2>, accumulate_tile<3, 3>, accumulate_tile<3, 4>},
    {accumulate_tile<4, 1>, accumulate_tile<4, 2>, accumulate_tile<4, 3>, accumulate_tile<4, 4>},
};

void accumulate_range_f16_avx512(const float* w, int64_t w_stride, int n_q, const uint16_t* v, int64_t v_stride,
                                 int64_t n_pos, int head_dim, float* acc) {
  constexpr int k_tile_dims = k_acc_vecs * k_lanes;
  for (int d0 = 0; d0 < head_dim; d0 += k_tile_dims) {
    const int n_dims = head_dim - d0 >= k_tile_dims ? k_tile_dims : head_dim - d0;
    const int n_vecs = (n_dims + k_lanes - 1) / k_lanes;
    const int last = n_dims - (n_vecs - 1) * k_lanes;
    const __mmask16 m_last = last == k_lanes ? static_cast<__mmask16>(0xffff) : tail_mask(last);
    for (int j0 = 0; j0 < n_q; j0 += k_acc_rows) {
      const int n_rows = n_q - j0 >= k_acc_rows ? k_acc_rows : n_q - j0;
      k_acc_tiles[n_rows - 1][n_vecs - 1](w + j0 * w_stride, w_stride, v + d0, v_stride, n_pos,
                                          acc + static_cast<int64_t>(j0) * head_dim + d0, head_dim, m_last);
    }
  }
}

constexpr OpsTable k_avx512_table = {
    Isa::avx512,       rmsnorm_avx512,        silu_mul_avx512, add_inplace_avx512,     softmax_inplace_avx512,
    rope_apply_avx512, f32_to_f16_row_avx512, exp_row_avx512,  score_range_f16_avx512, accumulate_range_f16_avx512,
};

}  // namespace

const OpsTable& ops_avx512() { return k_avx512_table; }

}  // namespace kvc::kernels

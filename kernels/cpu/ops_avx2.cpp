// AVX2 + FMA + F16C variants of the ops kernels; float tails use masked loads and stores.
// Like every *_avx2.cpp this file uses no standard-library templates, so no function
// compiled for AVX2 can be picked by the linker for a caller on an older CPU.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/ops_impl.h"
#include "kernels/cpu/quant.h"

namespace kvc::kernels {
namespace {

constexpr int k_lanes = 8;

// Lanes [0, n) set, for n in [0, 8].
__m256i tail_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// AMD CPUs run vmaskmovps slowly (a masked store costs tens of cycles), so the masked forms
// are used only for the partial last vector of n - i < 8 floats.
__m256 load_n(const float* p, int64_t n) {
  return n >= k_lanes ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(n));
}
void store_n(float* p, __m256 v, int64_t n) {
  if (n >= k_lanes) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, tail_mask(n), v);
  }
}

float hsum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

float hmax(__m256 v) {
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}

// exp(x) for 8 floats; the same method as the AVX-512 variant (ops_avx512.cpp): Cody-Waite
// reduction by ln2, degree-7 Taylor polynomial, 2^n applied as two factors so overflow gives
// inf and underflow goes through subnormals to 0. NaN propagates.
__m256 exp8(__m256 x) {
  constexpr double k_ln2 = 0.6931471805599453094;
  constexpr auto k_ln2_hi = static_cast<float>(k_ln2);
  constexpr auto k_ln2_lo = static_cast<float>(k_ln2 - static_cast<double>(k_ln2_hi));
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);  // operand order keeps NaN
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(k_ln2_hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(k_ln2_lo), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);  // in [-150, 129]
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

__m256 load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

void rmsnorm_avx2(const float* x, const float* w, int64_t n, float eps, float* out) {
  __m256 acc0 = _mm256_setzero_ps();
  __m256 acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 * k_lanes <= n; i += 2 * k_lanes) {
    const __m256 a = _mm256_loadu_ps(x + i);
    const __m256 b = _mm256_loadu_ps(x + i + k_lanes);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  for (; i < n; i += k_lanes) {
    const __m256 a = load_n(x + i, n - i);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
  }
  const float sum_sq = hsum(_mm256_add_ps(acc0, acc1));
  const float rms = _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(sum_sq / static_cast<float>(n) + eps)));
  const __m256 inv_rms = _mm256_set1_ps(1.0f / rms);
  for (i = 0; i < n; i += k_lanes) {
    const int64_t left = n - i;
    const __m256 a = load_n(x + i, left);
    const __m256 b = load_n(w + i, left);
    store_n(out + i, _mm256_mul_ps(_mm256_mul_ps(a, inv_rms), b), left);
  }
}

void silu_mul_avx2(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n; i += k_lanes) {
    const int64_t left = n - i;
    const __m256 g = load_n(gate + i, left);
    const __m256 u = load_n(up + i, left);
    const __m256 e = exp8(_mm256_xor_ps(g, sign));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    store_n(out + i, _mm256_mul_ps(silu, u), left);
  }
}

void add_inplace_avx2(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += k_lanes) {
    const int64_t left = n - i;
    store_n(x + i, _mm256_add_ps(load_n(x + i, left), load_n(y + i, left)), left);
  }
}

void softmax_inplace_avx2(float* x, int64_t n) {
  if (n <= 0) return;
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 vmax = neg_inf;
  for (int64_t i = 0; i < n; i += k_lanes) {
    const int64_t left = n - i;
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, load_n(x + i, left), _mm256_castsi256_ps(tail_mask(left))));
  }
  const __m256 max = _mm256_set1_ps(hmax(vmax));
  __m256 vsum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += k_lanes) {
    const int64_t left = n - i;
    const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(load_n(x + i, left), max)), _mm256_castsi256_ps(tail_mask(left)));
    vsum = _mm256_add_ps(vsum, e);
    store_n(x + i, e, left);
  }
  const __m256 inv_sum = _mm256_set1_ps(1.0f / hsum(vsum));
  for (int64_t i = 0; i < n; i += k_lanes) {
    const int64_t left = n - i;
    store_n(x + i, _mm256_mul_ps(load_n(x + i, left), inv_sum), left);
  }
}

void rope_apply_avx2(float* x, int n_heads, int head_dim, int n_rot, bool interleaved, const float* cos_full,
                     const float* sin_signed) {
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    if (interleaved) {
      // Pairs never straddle a vector: n_rot and every chunk start are even.
      for (int i = 0; i < n_rot; i += k_lanes) {
        const int64_t left = n_rot - i;
        const __m256 a = load_n(xh + i, left);
        const __m256 swapped = _mm256_permute_ps(a, 0xb1);  // (x1, x0, x3, x2, ...)
        const __m256 c = load_n(cos_full + i, left);
        const __m256 s = load_n(sin_signed + i, left);
        store_n(xh + i, _mm256_fmadd_ps(swapped, s, _mm256_mul_ps(a, c)), left);
      }
    } else {
      for (int i = 0; i < half; i += k_lanes) {
        const int64_t left = half - i;
        const __m256 a = load_n(xh + i, left);
        const __m256 b = load_n(xh + half + i, left);
        const __m256 c = load_n(cos_full + i, left);
        const __m256 s = load_n(sin_signed + half + i, left);
        store_n(xh + i, _mm256_fnmadd_ps(b, s, _mm256_mul_ps(a, c)), left);
        store_n(xh + half + i, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)), left);
      }
    }
  }
}

void f32_to_f16_row_avx2(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + k_lanes <= n; i += k_lanes) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  if (i < n) {
    const __m128i h = _mm256_cvtps_ph(load_n(x + i, n - i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    uint16_t tmp[k_lanes];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(tmp), h);
    std::memcpy(out + i, tmp, static_cast<size_t>(n - i) * sizeof(uint16_t));
  }
}

void exp_row_avx2(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += k_lanes) {
    const int64_t left = n - i;
    store_n(out + i, exp8(load_n(x + i, left)), left);
  }
}

// Dims [n_full, head_dim) left over by the 8-wide loops (head_dim not a multiple of 8).
float dot_tail(const float* q, const uint16_t* k, int begin, int end) {
  float dot = 0.0f;
  for (int d = begin; d < end; ++d) dot += q[d] * fp16_to_f32(k[d]);
  return dot;
}

// Scores of NJ query rows against each position: the K row is converted once per tile.
template <int NJ>
void score_tile(const float* q, int head_dim, const uint16_t* k, int64_t k_stride, int64_t n_pos, float scale,
                float* scores, int64_t score_stride) {
  const int n_full = head_dim / k_lanes * k_lanes;
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint16_t* kt = k + t * k_stride;
    __m256 acc[NJ];
    for (int j = 0; j < NJ; ++j) acc[j] = _mm256_setzero_ps();
    for (int d = 0; d < n_full; d += k_lanes) {
      const __m256 kv = load_f16(kt + d);
      for (int j = 0; j < NJ; ++j) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + j * head_dim + d), kv, acc[j]);
    }
    float dots[NJ];
    if constexpr (NJ == 4) {
      // Three hadds leave [a0 a0 a1 a1 a2 a2 a3 a3] split over the two 128-bit halves.
      const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
      _mm_storeu_ps(dots, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
    } else {
      for (int j = 0; j < NJ; ++j) dots[j] = hsum(acc[j]);
    }
    for (int j = 0; j < NJ; ++j) {
      if (n_full < head_dim) dots[j] += dot_tail(q + j * head_dim, kt, n_full, head_dim);
      scores[j * score_stride + t] = dots[j] * scale;
    }
  }
}

void score_range_f16_avx2(const float* q, int n_q, int head_dim, const uint16_t* k, int64_t k_stride, int64_t n_pos,
                          float scale, float* scores, int64_t score_stride) {
  constexpr int k_tile = 4;
  for (int j0 = 0; j0 < n_q; j0 += k_tile) {
    const float* qt = q + static_cast<int64_t>(j0) * head_dim;
    float* st = scores + j0 * score_stride;
    switch (n_q - j0 >= k_tile ? k_tile : n_q - j0) {
      case 4: score_tile<4>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 3: score_tile<3>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 2: score_tile<2>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      default: score_tile<1>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
    }
  }
}

// acc tile of NJ query rows x NV full vectors of dims, held in registers over all positions.
template <int NJ, int NV>
void accumulate_tile(const float* w, int64_t w_stride, const uint16_t* v, int64_t v_stride, int64_t n_pos, float* acc,
                     int head_dim) {
  // GCC keeps a[][] in registers only when these loops are unrolled before scalar
  // replacement, hence the pragmas.
  __m256 a[NJ][NV];
#pragma GCC unroll 4
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NV; ++i) a[j][i] = _mm256_loadu_ps(acc + j * head_dim + i * k_lanes);
  }
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint16_t* vt = v + t * v_stride;
    __m256 vv[NV];
#pragma GCC unroll 4
    for (int i = 0; i < NV; ++i) vv[i] = load_f16(vt + i * k_lanes);
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) {
      const __m256 wj = _mm256_set1_ps(w[j * w_stride + t]);
#pragma GCC unroll 4
      for (int i = 0; i < NV; ++i) a[j][i] = _mm256_fmadd_ps(wj, vv[i], a[j][i]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(acc + j * head_dim + i * k_lanes, a[j][i]);
  }
}

using AccumulateTile = void (*)(const float*, int64_t, const uint16_t*, int64_t, int64_t, float*, int);
constexpr int k_acc_rows = 2;  // query rows per tile
constexpr int k_acc_vecs = 4;  // vectors of 8 dims per tile
constexpr AccumulateTile k_acc_tiles[k_acc_rows][k_acc_vecs] = {
    {accumulate_tile<1, 1>, accumulate_tile<1, 2>, accumulate_tile<1, 3>, accumulate_tile<1, 4>},
    {accumulate_tile<2, 1>, accumulate_tile<2, 2>, accumulate_tile<2, 3>, accumulate_tile<2, 4>},
};

void accumulate_range_f16_avx2(const float* w, int64_t w_stride, int n_q, const uint16_t* v, int64_t v_stride,
                               int64_t n_pos, int head_dim, float* acc) {
  constexpr int k_tile_dims = k_acc_vecs * k_lanes;
  const int n_full = head_dim / k_lanes * k_lanes;
  for (int d0 = 0; d0 < n_full; d0 += k_tile_dims) {
    const int n_vecs = (n_full - d0 >= k_tile_dims ? k_tile_dims : n_full - d0) / k_lanes;
    for (int j0 = 0; j0 < n_q; j0 += k_acc_rows) {
      const int n_rows = n_q - j0 >= k_acc_rows ? k_acc_rows : n_q - j0;
      k_acc_tiles[n_rows - 1][n_vecs - 1](w + j0 * w_stride, w_stride, v + d0, v_stride, n_pos,
                                          acc + static_cast<int64_t>(j0) * head_dim + d0, head_dim);
    }
  }
  if (n_full == head_dim) return;
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint16_t* vt = v + t * v_stride;
    for (int j = 0; j < n_q; ++j) {
      const float wj = w[j * w_stride + t];
      float* aj = acc + static_cast<int64_t>(j) * head_dim;
      for (int d = n_full; d < head_dim; ++d) aj[d] += wj * fp16_to_f32(vt[d]);
    }
  }
}

constexpr OpsTable k_avx2_table = {
    Isa::avx2,       rmsnorm_avx2,        silu_mul_avx2, add_inplace_avx2,     softmax_inplace_avx2,
    rope_apply_avx2, f32_to_f16_row_avx2, exp_row_avx2,  score_range_f16_avx2, accumulate_range_f16_avx2,
};

}  // namespace

const OpsTable& ops_avx2() { return k_avx2_table; }

}  // namespace kvc::kernels

// AVX2 + FMA + F16C KV row kernels: groups are dequantized in registers (int8 or nibbles ->
// float times the group's scale) and fed to FMAs; nothing is written back to memory.
// Like every *_avx2.cpp this file uses no standard-library templates, so no function
// compiled for AVX2 can be picked by the linker for a caller on an older CPU.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kv_ops.h"

namespace kvc::kernels {
namespace {

constexpr int k_lanes = 8;
constexpr int k_q8_bytes = 2 + k_kv_group_max;
constexpr int k_q4_bytes = 2 + k_kv_group_max / 2;
// Evaluated at compile time: no inline function from a shared header is compiled here.
// (q4c K: 16 bytes of nibbles, no scale.)
template <KvType T>
constexpr int64_t k_group_bytes = T == KvType::q8    ? k_q8_bytes
                                  : T == KvType::q4c ? k_kv_group_max / 2
                                                     : k_q4_bytes;

float group_scale(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return _cvtsh_ss(bits);
}

// The 32 elements of a quantized group as four vectors of floats, v[i] = elements [8i, 8i+8).
struct Group {
  __m256 v[4];
};

__m256 to_float(__m128i bytes8, __m256 d) { return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes8)), d); }

template <KvType T>
Group load_group(const uint8_t* p) {
  if constexpr (T == KvType::q4c) {  // the nibbles as they are (the block's scales are in q)
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i a = _mm_and_si128(bytes, nib);
    const __m128i b = _mm_and_si128(_mm_srli_epi16(bytes, 4), nib);
    auto f = [](__m128i x) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(x)); };
    return {{f(a), f(_mm_srli_si128(a, 8)), f(b), f(_mm_srli_si128(b, 8))}};
  }
  const __m256 d = _mm256_set1_ps(group_scale(p));
  __m128i a;  // elements [0, 16) as int8
  __m128i b;  // elements [16, 32)
  if constexpr (T == KvType::q8) {
    a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18));
  } else {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2));
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i eight = _mm_set1_epi8(8);
    a = _mm_sub_epi8(_mm_and_si128(bytes, nib), eight);
    b = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), nib), eight);
  }
  return {{to_float(a, d), to_float(_mm_srli_si128(a, 8), d), to_float(b, d), to_float(_mm_srli_si128(b, 8), d)}};
}

float hmax(__m256 v) {
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}
float hmin(__m256 v) {
  const __m128 m4 = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 m2 = _mm_min_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_min_ss(m2, _mm_movehdup_ps(m2)));
}
float hsum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The 32 values round-to-nearest-even(clamp(x * id, lo, hi)) + bias as bytes, in order.
// NaN goes to lo (max returns its second operand on NaN), matching the scalar reference.
__m256i quantize32(const float* x, __m256 id, float lo, float hi, int bias) {
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 v = _mm256_min_ps(
        _mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i * k_lanes), id), _mm256_set1_ps(lo)), _mm256_set1_ps(hi));
    q[i] = _mm256_add_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(bias));
  }
  // packs work per 128-bit lane: the bytes come out as dwords (0 4 1 5 2 6 3 7) of q order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void encode_q8_avx2(const float* x, int64_t n, uint8_t* out) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t g = 0; g < n / k_kv_group_max; ++g, x += k_kv_group_max, out += k_q8_bytes) {
    __m256 m = _mm256_and_ps(_mm256_loadu_ps(x), abs_mask);
    for (int i = 1; i < 4; ++i) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i * k_lanes), abs_mask));
    uint16_t d_bits = 0;
    const __m256 id = _mm256_set1_ps(detail::kv_group_scale(hmax(m) / 127.0f, &d_bits));
    std::memcpy(out, &d_bits, 2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2), quantize32(x, id, -127.0f, 127.0f, 0));
  }
}

void encode_q4_avx2(const float* x, int64_t n, uint8_t* out) {
  for (int64_t g = 0; g < n / k_kv_group_max; ++g, x += k_kv_group_max, out += k_q4_bytes) {
    __m256 mx = _mm256_loadu_ps(x);
    __m256 mn = mx;
    for (int i = 1; i < 4; ++i) {
      const __m256 v = _mm256_loadu_ps(x + i * k_lanes);
      mx = _mm256_max_ps(mx, v);
      mn = _mm256_min_ps(mn, v);
    }
    const float hi = hmax(mx);
    const float lo = hmin(mn);
    const float m = hi >= -lo ? hi : lo;
    uint16_t d_bits = 0;
    const __m256 id = _mm256_set1_ps(detail::kv_group_scale(m / -8.0f, &d_bits));
    std::memcpy(out, &d_bits, 2);
    const __m256i nibbles = quantize32(x, id, -8.0f, 7.0f, 8);  // element i in byte i
    const __m128i low = _mm256_castsi256_si128(nibbles);
    const __m128i high = _mm256_extracti128_si256(nibbles, 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2), _mm_or_si128(low, _mm_slli_epi16(high, 4)));
  }
}

template <KvType T>
void decode_avx2(const uint8_t* in, int64_t n, float* out) {
  for (int64_t g = 0; g < n / k_kv_group_max; ++g, in += k_group_bytes<T>, out += k_kv_group_max) {
    const Group v = load_group<T>(in);
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + i * k_lanes, v.v[i]);
  }
}

// Scores of NJ query rows: each K row is dequantized once (in registers) for all NJ rows.
template <KvType T, int NJ>
void score_tile(const float* q, int head_dim, const uint8_t* k, int64_t k_stride, int64_t n_pos, float scale,
                float* scores, int64_t score_stride) {
  const int n_groups = head_dim / k_kv_group_max;
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* kt = k + t * k_stride;
    __m256 acc[NJ];
    for (int j = 0; j < NJ; ++j) acc[j] = _mm256_setzero_ps();
    for (int g = 0; g < n_groups; ++g) {
      const Group kg = load_group<T>(kt + g * k_group_bytes<T>);
      const float* qg = q + g * k_kv_group_max;
      for (int j = 0; j < NJ; ++j) {
        for (int i = 0; i < 4; ++i) {
          acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + j * head_dim + i * k_lanes), kg.v[i], acc[j]);
        }
      }
    }
    if constexpr (NJ == 4) {
      // Three hadds leave [s0 s0 s1 s1 s2 s2 s3 s3] split over the two 128-bit halves.
      const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
      float dots[4];
      _mm_storeu_ps(dots,
                    _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), _mm_set1_ps(scale)));
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = dots[j];
    } else {
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = hsum(acc[j]) * scale;
    }
  }
}

template <KvType T>
void score_range_avx2(const float* q, int n_q, int head_dim, const uint8_t* k, int64_t k_stride, int64_t n_pos,
                      float scale, float* scores, int64_t score_stride) {
  constexpr int k_tile = 4;
  for (int j0 = 0; j0 < n_q; j0 += k_tile) {
    const float* qt = q + static_cast<int64_t>(j0) * head_dim;
    float* st = scores + j0 * score_stride;
    switch (n_q - j0 >= k_tile ? k_tile : n_q - j0) {
      case 4: score_tile<T, 4>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 3: score_tile<T, 3>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 2: score_tile<T, 2>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      default: score_tile<T, 1>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
    }
  }
}

// acc tile of NJ query rows x one group (32 dims), held in registers over all positions.
template <KvType T, int NJ>
void accumulate_tile(const float* w, int64_t w_stride, const uint8_t* v, int64_t v_stride, int64_t n_pos, float* acc,
                     int head_dim) {
  // The pragmas let GCC keep a[][] in registers (it unrolls before scalar replacement).
  __m256 a[NJ][4];
#pragma GCC unroll 2
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) a[j][i] = _mm256_loadu_ps(acc + j * head_dim + i * k_lanes);
  }
  for (int64_t t = 0; t < n_pos; ++t) {
    const Group vg = load_group<T>(v + t * v_stride);
#pragma GCC unroll 2
    for (int j = 0; j < NJ; ++j) {
      const __m256 wj = _mm256_set1_ps(w[j * w_stride + t]);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) a[j][i] = _mm256_fmadd_ps(wj, vg.v[i], a[j][i]);
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(acc + j * head_dim + i * k_lanes, a[j][i]);
  }
}

template <KvType T>
void accumulate_range_avx2(const float* w, int64_t w_stride, int n_q, const uint8_t* v, int64_t v_stride, int64_t n_pos,
                           int head_dim, float* acc) {
  constexpr int k_rows = 2;  // query rows per tile: 8 accumulators + 4 values in 16 registers
  const int n_groups = head_dim / k_kv_group_max;
  for (int g = 0; g < n_groups; ++g) {
    for (int j0 = 0; j0 < n_q; j0 += k_rows) {
      const float* wt = w + j0 * w_stride;
      const uint8_t* vg = v + g * k_group_bytes<T>;
      float* at = acc + static_cast<int64_t>(j0) * head_dim + g * k_kv_group_max;
      if (n_q - j0 >= k_rows) {
        accumulate_tile<T, 2>(wt, w_stride, vg, v_stride, n_pos, at, head_dim);
      } else {
        accumulate_tile<T, 1>(wt, w_stride, vg, v_stride, n_pos, at, head_dim);
      }
    }
  }
}

// ScaleQFn (kv_ops.h); head_dim a multiple of 8.
void scale_q_f16_avx2(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, float scale,
                      float* out, float* qm) {
  for (int j = 0; j < n_q; ++j) {
    __m256 dot = _mm256_setzero_ps();
    for (int c = 0; c < head_dim; c += k_lanes) {
      const int64_t o = static_cast<int64_t>(j) * head_dim + c;
      const __m256 qv = _mm256_loadu_ps(q + o);
      const __m256 dc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + c)));
      const __m256 mc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + c)));
      _mm256_storeu_ps(out + o, _mm256_mul_ps(qv, dc));
      dot = _mm256_fmadd_ps(qv, mc, dot);
    }
    qm[j] = hsum(dot) * scale;
  }
}

constexpr KvOpsTable k_avx2_table = {
    Isa::avx2,
    encode_q8_avx2,
    encode_q4_avx2,
    decode_avx2<KvType::q8>,
    decode_avx2<KvType::q4>,
    score_range_avx2<KvType::q8>,
    score_range_avx2<KvType::q4>,
    accumulate_range_avx2<KvType::q8>,
    accumulate_range_avx2<KvType::q4>,
    nullptr,  // K scores stay float: no integer dot product on this ISA
    nullptr,
    detail::score_range_small_group_avx2,
    detail::accumulate_range_small_group_avx2,
    scale_q_f16_avx2,
    score_range_avx2<KvType::q4c>,
    nullptr,
};

}  // namespace

const KvOpsTable& kv_ops_avx2() { return k_avx2_table; }

}  // namespace kvc::kernels

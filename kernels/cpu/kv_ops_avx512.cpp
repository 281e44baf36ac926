// AVX-512 (F/BW/VL/DQ) KV row kernels: groups are dequantized in registers (int8 or nibbles
// -> float times the group's scale) and fed to FMAs; nothing is written back to memory.
// Like every *_avx512.cpp this file uses no standard-library templates, so no function
// compiled for AVX-512 can be picked by the linker for a caller on an older CPU.
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized (GCC bug 105593); not our warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kv_ops.h"

namespace kvc::kernels {
namespace {

constexpr int k_lanes = 16;
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

// The 32 elements of a quantized group as two vectors of floats: lo = [0, 16), hi = [16, 32).
struct Group {
  __m512 lo;
  __m512 hi;
};

template <KvType T>
Group load_group(const uint8_t* p) {
  if constexpr (T == KvType::q4c) {  // the nibbles as they are (the block's scales are in q)
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i nib = _mm_set1_epi8(0x0f);
    return {_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(bytes, nib))),
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(bytes, 4), nib)))};
  }
  const __m512 d = _mm512_set1_ps(group_scale(p));
  __m128i a;
  __m128i b;
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
  return {_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(a)), d),
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), d)};
}

// round-to-nearest-even(clamp(x * id, lo, hi)) as int32; NaN goes to lo (max returns its
// second operand on NaN), matching the scalar reference.
__m512i quantize16(__m512 x, __m512 id, float lo, float hi) {
  const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x, id), _mm512_set1_ps(lo)), _mm512_set1_ps(hi));
  return _mm512_cvtps_epi32(v);
}

void encode_q8_avx512(const float* x, int64_t n, uint8_t* out) {
  for (int64_t g = 0; g < n / k_kv_group_max; ++g, x += k_kv_group_max, out += k_q8_bytes) {
    const __m512 a = _mm512_loadu_ps(x);
    const __m512 b = _mm512_loadu_ps(x + k_lanes);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    uint16_t d_bits = 0;
    const __m512 id = _mm512_set1_ps(detail::kv_group_scale(amax / 127.0f, &d_bits));
    std::memcpy(out, &d_bits, 2);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2), _mm512_cvtepi32_epi8(quantize16(a, id, -127.0f, 127.0f)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 18), _mm512_cvtepi32_epi8(quantize16(b, id, -127.0f, 127.0f)));
  }
}

void encode_q4_avx512(const float* x, int64_t n, uint8_t* out) {
  for (int64_t g = 0; g < n / k_kv_group_max; ++g, x += k_kv_group_max, out += k_q4_bytes) {
    const __m512 a = _mm512_loadu_ps(x);
    const __m512 b = _mm512_loadu_ps(x + k_lanes);
    const float mx = _mm512_reduce_max_ps(_mm512_max_ps(a, b));
    const float mn = _mm512_reduce_min_ps(_mm512_min_ps(a, b));
    const float m = mx >= -mn ? mx : mn;
    uint16_t d_bits = 0;
    const __m512 id = _mm512_set1_ps(detail::kv_group_scale(m / -8.0f, &d_bits));
    std::memcpy(out, &d_bits, 2);
    const __m512i eight = _mm512_set1_epi32(8);
    const __m128i lo = _mm512_cvtepi32_epi8(_mm512_add_epi32(quantize16(a, id, -8.0f, 7.0f), eight));
    const __m128i hi = _mm512_cvtepi32_epi8(_mm512_add_epi32(quantize16(b, id, -8.0f, 7.0f), eight));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2), _mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
  }
}

template <KvType T>
void decode_avx512(const uint8_t* in, int64_t n, float* out) {
  for (int64_t g = 0; g < n / k_kv_group_max; ++g, in += k_group_bytes<T>, out += k_kv_group_max) {
    const Group v = load_group<T>(in);
    _mm512_storeu_ps(out, v.lo);
    _mm512_storeu_ps(out + k_lanes, v.hi);
  }
}

// Horizontal sums of a[0..7] in one vector: lane k = sum of the lanes of a[k].
__m256 transpose_sum8(const __m512* a) {
  // Halve each vector and pair them: block pair (0,1) of p[i] sums a[2i], (2,3) a[2i+1].
  __m512 p[4];
  for (int i = 0; i < 4; ++i) {
    p[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
  }
  // Block k of r0 holds 4 partial sums of a[k]; block k of r1 those of a[k + 4].
  const __m512 r0 = _mm512_add_ps(_mm512_shuffle_f32x4(p[0], p[1], 0x88), _mm512_shuffle_f32x4(p[0], p[1], 0xdd));
  const __m512 r1 = _mm512_add_ps(_mm512_shuffle_f32x4(p[2], p[3], 0x88), _mm512_shuffle_f32x4(p[2], p[3], 0xdd));
  // Within each block: lanes (0, 1) = 2 partials of (a[k], a[k + 4]) after one unpack-add.
  const __m512 s = _mm512_add_ps(_mm512_unpacklo_ps(r0, r1), _mm512_unpackhi_ps(r0, r1));
  const __m512 f = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4e));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, f));
}

// Scores of NJ query rows: each K row is dequantized once (in registers) for all NJ rows.
template <KvType T, int NJ>
void score_tile(const float* q, int head_dim, const uint8_t* k, int64_t k_stride, int64_t n_pos, float scale,
                float* scores, int64_t score_stride) {
  const int n_groups = head_dim / k_kv_group_max;
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* kt = k + t * k_stride;
    __m512 acc[NJ];
    for (int j = 0; j < NJ; ++j) acc[j] = _mm512_setzero_ps();
    for (int g = 0; g < n_groups; ++g) {
      const Group kg = load_group<T>(kt + g * k_group_bytes<T>);
      const float* qg = q + g * k_kv_group_max;
      for (int j = 0; j < NJ; ++j) {
        acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(qg + j * head_dim), kg.lo, acc[j]);
        acc[j] = _mm512_fmadd_ps(_mm512_loadu_ps(qg + j * head_dim + k_lanes), kg.hi, acc[j]);
      }
    }
    if constexpr (NJ == 8) {
      float dots[8];
      _mm256_storeu_ps(dots, _mm256_mul_ps(transpose_sum8(acc), _mm256_set1_ps(scale)));
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = dots[j];
    } else {
      for (int j = 0; j < NJ; ++j) scores[j * score_stride + t] = _mm512_reduce_add_ps(acc[j]) * scale;
    }
  }
}

template <KvType T>
void score_range_avx512(const float* q, int n_q, int head_dim, const uint8_t* k, int64_t k_stride, int64_t n_pos,
                        float scale, float* scores, int64_t score_stride) {
  constexpr int k_tile = 8;
  for (int j0 = 0; j0 < n_q; j0 += k_tile) {
    const float* qt = q + static_cast<int64_t>(j0) * head_dim;
    float* st = scores + j0 * score_stride;
    switch (n_q - j0 >= k_tile ? k_tile : n_q - j0) {
      case 8: score_tile<T, 8>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 7: score_tile<T, 7>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 6: score_tile<T, 6>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 5: score_tile<T, 5>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 4: score_tile<T, 4>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 3: score_tile<T, 3>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      case 2: score_tile<T, 2>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
      default: score_tile<T, 1>(qt, head_dim, k, k_stride, n_pos, scale, st, score_stride); break;
    }
  }
}

// acc tile of NJ query rows x NG groups (32 dims each), held in registers over all positions.
template <KvType T, int NJ, int NG>
void accumulate_tile(const float* w, int64_t w_stride, const uint8_t* v, int64_t v_stride, int64_t n_pos, float* acc,
                     int head_dim) {
  // The pragmas let GCC keep a[][] in registers (it unrolls before scalar replacement).
  constexpr int NV = 2 * NG;
  __m512 a[NJ][NV];
#pragma GCC unroll 4
  for (int j = 0; j < NJ; ++j) {
#pragma GCC unroll 4
    for (int i = 0; i < NV; ++i) a[j][i] = _mm512_loadu_ps(acc + j * head_dim + i * k_lanes);
  }
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* vt = v + t * v_stride;
    __m512 vv[NV];
#pragma GCC unroll 2
    for (int g = 0; g < NG; ++g) {
      const Group vg = load_group<T>(vt + g * k_group_bytes<T>);
      vv[2 * g] = vg.lo;
      vv[2 * g + 1] = vg.hi;
    }
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
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(acc + j * head_dim + i * k_lanes, a[j][i]);
  }
}

template <KvType T>
void accumulate_range_avx512(const float* w, int64_t w_stride, int n_q, const uint8_t* v, int64_t v_stride,
                             int64_t n_pos, int head_dim, float* acc) {
  using Tile = void (*)(const float*, int64_t, const uint8_t*, int64_t, int64_t, float*, int);
  constexpr int k_rows = 4;    // query rows per tile
  constexpr int k_groups = 2;  // groups of 32 dims per tile
  constexpr Tile k_tiles[k_rows][k_groups] = {
      {accumulate_tile<T, 1, 1>, accumulate_tile<T, 1, 2>},
      {accumulate_tile<T, 2, 1>, accumulate_tile<T, 2, 2>},
      {accumulate_tile<T, 3, 1>, accumulate_tile<T, 3, 2>},
      {accumulate_tile<T, 4, 1>, accumulate_tile<T, 4, 2>},
  };
  const int n_groups = head_dim / k_kv_group_max;
  for (int g0 = 0; g0 < n_groups; g0 += k_groups) {
    const int ng = n_groups - g0 >= k_groups ? k_groups : n_groups - g0;
    for (int j0 = 0; j0 < n_q; j0 += k_rows) {
      const int nj = n_q - j0 >= k_rows ? k_rows : n_q - j0;
      k_tiles[nj - 1][ng - 1](w + j0 * w_stride, w_stride, v + g0 * k_group_bytes<T>, v_stride, n_pos,
                              acc + static_cast<int64_t>(j0) * head_dim + g0 * k_kv_group_max, head_dim);
    }
  }
}

constexpr KvOpsTable k_avx512_table = {
    Isa::avx512,
    encode_q8_avx512,
    encode_q4_avx512,
    decode_avx512<KvType::q8>,
    decode_avx512<KvType::q4>,
    score_range_avx512<KvType::q8>,
    score_range_avx512<KvType::q4>,
    accumulate_range_avx512<KvType::q8>,
    accumulate_range_avx512<KvType::q4>,
    nullptr,
    nullptr,
    detail::score_range_small_group_avx2,  // groups of 16 and 8: the AVX2 loops
    detail::accumulate_range_small_group_avx2,
    detail::scale_q_f16_avx512,
    score_range_avx512<KvType::q4c>,
    nullptr,
};

constexpr KvOpsTable k_avx512_vnni_table = {
    Isa::avx512_vnni,
    encode_q8_avx512,
    encode_q4_avx512,
    decode_avx512<KvType::q8>,
    decode_avx512<KvType::q4>,
    score_range_avx512<KvType::q8>,
    score_range_avx512<KvType::q4>,
    accumulate_range_avx512<KvType::q8>,
    accumulate_range_avx512<KvType::q4>,
    detail::score_range_q8_vnni,
    detail::score_range_q4_vnni,
    detail::score_range_small_group_avx2,
    detail::accumulate_range_small_group_avx2,
    detail::scale_q_f16_avx512,
    score_range_avx512<KvType::q4c>,
    detail::score_block_q4c_vnni,
};

}  // namespace

const KvOpsTable& kv_ops_avx512() { return k_avx512_table; }
const KvOpsTable& kv_ops_avx512_vnni() { return k_avx512_vnni_table; }

}  // namespace kvc::kernels

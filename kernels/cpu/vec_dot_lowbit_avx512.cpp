// AVX-512 VNNI kernels for Q2_K and Q3_K weights x Q8_K activations (register tiles).
// GCC 12 flags the self-initialised "undefined" vectors inside its own AVX-512 intrinsics
// as uninitialised: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/cpu/tile_dispatch.h"
#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels {

namespace {

using tiling::ActTile;

// A super-block in 4 steps of 64 values; step k holds chunks 2k and 2k+1 (see
// vec_dot_kquant_avx2.cpp: chunk c = 4n + j is bits 2j+1..2j of qs[32n..32n+31], Q3_K's third
// bit is bit c of hmask), so one 32-byte load of qs serves both. vpdpbusd sums 4 products
// per dword: lane l of step k belongs to sub-block 4k + l / 4, |sum| <= 4 * 7 * 127 < 2^15,
// so vpdpwssd with the scale in the low int16 of each dword (the high one 0) applies it
// exactly. Q3_K's weights are q + 4; the -4 and Q2_K's mins come through the bsums.
// Prefill prepares each row tile once (weights, per-step scales) for every token tile.

// Q3_K's 16 scales from their 12 bytes (quant.h), as int8 in [-32, 31].
inline __m128i q3_k_scales(const uint8_t* s) {
  uint32_t a0, a1, a2;
  std::memcpy(&a0, s, 4);
  std::memcpy(&a1, s + 4, 4);
  std::memcpy(&a2, s + 8, 4);
  const uint32_t lo4 = 0x0f0f0f0fu, lo2 = 0x03030303u;
  const __m128i v = _mm_setr_epi32(static_cast<int>((a0 & lo4) | ((a2 & lo2) << 4)),
                                   static_cast<int>((a1 & lo4) | (((a2 >> 2) & lo2) << 4)),
                                   static_cast<int>(((a0 >> 4) & lo4) | (((a2 >> 4) & lo2) << 4)),
                                   static_cast<int>(((a1 >> 4) & lo4) | (((a2 >> 6) & lo2) << 4)));
  return _mm_sub_epi8(v, _mm_set1_epi8(32));
}

// One row's super-block, ready for the dot products.
struct PreparedLowBit {
  __m512i q[4];  // step k's 64 weights as unsigned bytes (Q3_K: q + 4)
  __m512i s[4];  // step k's scales: lane l holds sub-block 4k + l / 4's in its low int16
  __m256i side;  // (16 int16) Q2_K: the sub-blocks' mins; Q3_K: their scales
  float d, dmin;
};

template <bool k_q3>
struct LowBitKernel {
  using Block = std::conditional_t<k_q3, BlockQ3_K, BlockQ2_K>;
  static constexpr int k_block = 256;
  static constexpr int k_rows = 2;
  static constexpr int k_tokens = 4;

  static __m512i step_weights(const Block& blk, int k) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * (k / 2)));
    const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(q), q, 1);
    const int s0 = 4 * (k % 2);  // chunk 2k: bits s0, s0 + 1; chunk 2k + 1: bits s0 + 2, s0 + 3
    const __m512i shift = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(s0))),
                                             _mm256_set1_epi16(static_cast<short>(s0 + 2)), 1);
    __m512i v = _mm512_and_si512(_mm512_srlv_epi16(both, shift), _mm512_set1_epi8(3));
    if constexpr (k_q3) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask));
      const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
      const __m512i hshift = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(static_cast<short>(2 * k))),
                                                _mm256_set1_epi16(static_cast<short>(2 * k + 1)), 1);
      v = _mm512_or_si512(v,
                          _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(hz, hshift), 2), _mm512_set1_epi8(4)));
    }
    return v;
  }

  // Prefill (tiling::tile_prepared): each row tile prepared once, read by every token tile.
  using Prepared = PreparedLowBit;
  static constexpr int k_prepared_rows = 4;
  static constexpr int k_prepared_tokens = 3;
  static int64_t n_prepared(int64_t n_cols) { return n_cols / 256; }
  static void prepare(const uint8_t* row, int64_t /*n_cols*/, int64_t u, PreparedLowBit* out) {
    const Block& blk = reinterpret_cast<const Block*>(row)[u];
    __m512i sc;  // (16 int32) sub-block s's scale in the low int16 of lane s, 0 above
    out->d = _cvtsh_ss(blk.d);
    if constexpr (k_q3) {
      const __m128i v = q3_k_scales(blk.scales);
      sc = _mm512_and_si512(_mm512_cvtepi8_epi32(v), _mm512_set1_epi32(0xFFFF));
      out->side = _mm256_cvtepi8_epi16(v);
      out->dmin = 0.0f;
    } else {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
      sc = _mm512_cvtepu8_epi32(_mm_and_si128(v, _mm_set1_epi8(0x0F)));
      out->side = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)));
      out->dmin = _cvtsh_ss(blk.dmin);
    }
    const __m512i lane_sub = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    for (int k = 0; k < 4; ++k) {
      out->q[k] = step_weights(blk, k);
      out->s[k] = _mm512_permutexvar_epi32(_mm512_add_epi32(lane_sub, _mm512_set1_epi32(4 * k)), sc);
    }
  }

  // units(b): the R prepared rows of super-block b. The same arithmetic for prefill and
  // decode, so a token's outputs do not depend on how many tokens share the call.
  template <int R, int T, typename Units>
  static void run_units(Units units, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const PreparedLowBit* pb = units(b);
      __m512i iacc[R][T];
      for (auto& row : iacc)
        for (auto& v : row) v = zero;
      for (int k = 0; k < 4; ++k) {
        for (int t = 0; t < T; ++t) {
          const __m512i av = _mm512_loadu_si512(a.qs + t * a.n_cols + 256 * b + 64 * k);
          for (int r = 0; r < R; ++r)
            iacc[r][t] = _mm512_dpwssd_epi32(iacc[r][t], _mm512_dpbusd_epi32(zero, pb[r].q[k], av), pb[r].s[k]);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r) {
          const __m512i side = _mm512_zextsi256_si512(_mm256_madd_epi16(bs, pb[r].side));
          if constexpr (k_q3) {
            const __m512i isum = _mm512_sub_epi32(iacc[r][t], _mm512_slli_epi32(side, 2));
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(pb[r].d * ad), acc[r][t]);
          } else {
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r][t]), _mm512_set1_ps(pb[r].d * ad), acc[r][t]);
            acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(side), _mm512_set1_ps(pb[r].dmin * ad), acc[r][t]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
  }

  template <int R, int T>
  static void run_prepared(const PreparedLowBit* p, const uint8_t*, size_t, const ActTile& a, float* y, int64_t ys) {
    run_units<R, T>([p](int64_t b) { return p + b * R; }, a, y, ys);
  }

  // Decode: each super-block prepared in registers just before use.
  template <int R, int T>
  static void run_streamed(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    PreparedLowBit tmp[R];
    auto units = [&](int64_t b) {
      for (int r = 0; r < R; ++r) {
        tiling::prefetch_ahead<sizeof(Block) + 63>(reinterpret_cast<const Block*>(w + r * rb) + b, rb, k_rows);
        prepare(w + r * rb, a.n_cols, b, &tmp[r]);
      }
      return static_cast<const PreparedLowBit*>(tmp);
    };
    run_units<R, T>(units, a, y, ys);
  }
};

}  // namespace

void tile_q2_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_prepared<LowBitKernel<false>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_q3_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_prepared<LowBitKernel<true>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

}  // namespace kvc::kernels

// AVX2 kernels for Q2_K and Q3_K weights x Q8_K activations (register tiles).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/cpu/tile_dispatch.h"
#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels {

namespace {

using tiling::ActTile;

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

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

// Both formats hold 2-bit values in 8 chunks of 32: chunk c = 4n + j (value 32 c + l) is
// bits 2j+1..2j of qs[32n + l], and Q3_K's third bit is bit c of hmask[l]. A chunk covers
// sub-blocks 2c and 2c+1 (16 values each), so vpmaddubsw's int16 lanes 0-7 take sub-block
// 2c's scale and lanes 8-15 sub-block 2c+1's in vpmaddwd. Unsigned weights (Q3_K: q + 4, in
// [0, 7]) against signed activations; Q3_K's -4 comes back through the bsums:
//   sum_s sc_s sum_i (w_i - 4) a_i = sum_s sc_s sum_i w_i a_i - 4 sum_s sc_s bsum_s.
// |pair| <= 2 * 7 * 127 and |pair * scale| sums stay far inside int16 / int32.
template <bool k_q3>
struct LowBitKernel {
  using Block = std::conditional_t<k_q3, BlockQ3_K, BlockQ2_K>;
  static constexpr int k_block = 256;
  static constexpr int k_rows = 2;
  static constexpr int k_tokens = 2;

  // The 32 weights of chunk c (q or q + 4) as unsigned bytes.
  static __m256i chunk(const Block& blk, int c) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * (c / 4)));
    __m256i v = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * (c % 4))), _mm256_set1_epi8(3));
    if constexpr (k_q3) {
      const __m256i h =
          _mm256_srl_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.hmask)), _mm_cvtsi32_si128(c));
      v = _mm256_or_si256(v, _mm256_and_si256(_mm256_slli_epi16(h, 2), _mm256_set1_epi8(4)));
    }
    return v;
  }

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    __m256 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      int16_t sc[R][16];  // the sub-blocks' scales
      __m256i m16[R];     // Q2_K: (16 int16) the sub-blocks' mins; Q3_K: their scales
      float wd[R], wdmin[R];
      for (int r = 0; r < R; ++r) {
        const Block& blk = reinterpret_cast<const Block*>(w + r * rb)[b];
        tiling::prefetch_ahead<sizeof(Block) + 63>(&blk, rb, k_rows);
        wd[r] = _cvtsh_ss(blk.d);
        if constexpr (k_q3) {
          const __m256i s16 = _mm256_cvtepi8_epi16(q3_k_scales(blk.scales));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc[r]), s16);
          m16[r] = s16;
          wdmin[r] = 0.0f;
        } else {
          const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(sc[r]),
                              _mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0F))));
          m16[r] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
          wdmin[r] = _cvtsh_ss(blk.dmin);
        }
      }
      __m256i iacc[R][T];
      for (auto& row : iacc)
        for (auto& v : row) v = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        __m256i wq[R], ws[R];
        for (int r = 0; r < R; ++r) {
          const Block& blk = reinterpret_cast<const Block*>(w + r * rb)[b];
          wq[r] = chunk(blk, c);
          ws[r] = _mm256_set_m128i(_mm_set1_epi16(sc[r][2 * c + 1]), _mm_set1_epi16(sc[r][2 * c]));
        }
        for (int t = 0; t < T; ++t) {
          const __m256i av =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + t * a.n_cols + 256 * b + 32 * c));
          for (int r = 0; r < R; ++r)
            iacc[r][t] = _mm256_add_epi32(iacc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(wq[r], av), ws[r]));
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r) {
          const __m256i side = _mm256_madd_epi16(bs, m16[r]);  // sum_s m_s bsum_s (Q3_K: sc_s bsum_s)
          if constexpr (k_q3) {
            const __m256i isum = _mm256_sub_epi32(iacc[r][t], _mm256_slli_epi32(side, 2));
            acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(wd[r] * ad), acc[r][t]);
          } else {
            acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r][t]), _mm256_set1_ps(wd[r] * ad), acc[r][t]);
            acc[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(side), _mm256_set1_ps(wdmin[r] * ad), acc[r][t]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = hsum(acc[r][t]);
  }
};

}  // namespace

void tile_q2_k_avx2(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens, float* y,
                    int64_t ys) {
  tiling::tile_quant<LowBitKernel<false>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_q3_k_avx2(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens, float* y,
                    int64_t ys) {
  tiling::tile_quant<LowBitKernel<true>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

}  // namespace kvc::kernels

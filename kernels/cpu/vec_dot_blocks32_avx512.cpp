// AVX-512 VNNI kernels for Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights x Q8_0 activations (register tiles).
// GCC 12 flags the self-initialised "undefined" vectors inside its own AVX-512 intrinsics
// as uninitialised: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/tile_dispatch.h"
#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels {

namespace {

using tiling::ActTile;

// One 512-bit step covers two 32-value blocks in their natural order (value j of block k at
// byte 32 k + j), for weights and activations alike. vpdpbusd multiplies unsigned weight
// bytes by signed activation bytes: unsigned weights q with an offset o (Q5_0: 16; IQ4_NL:
// its level + 128, offset 128) start each token's accumulator at -o * sum(a), so dword lanes
// 0-7 sum block 0's exact integer dot and lanes 8-15 block 1's. Q4_1 and Q5_1 add
// m * sum(a), the sums taken once per token by vpdpbusd with ones.

inline __m512 pair_scales(__m128 two) {  // [s0 x 8, s1 x 8]
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(two));
}

// The 64 nibbles of blocks 0 and 1 (1: zeros unless k_pair) as bytes in natural order.
template <bool k_pair, typename Block>
inline __m512i nibbles(const Block* blk) {
  const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs));
  const __m128i x1 = k_pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs)) : _mm_setzero_si128();
  const __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), x1, 1);
  const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
  return _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F));
}

// Q5's fifth bits of blocks 0 and 1 as 0x10 in the bytes of their values.
template <bool k_pair, typename Block>
inline __m512i fifth_bits(const Block* blk) {
  uint32_t h0, h1 = 0;
  std::memcpy(&h0, blk[0].qh, 4);
  if (k_pair) std::memcpy(&h1, blk[1].qh, 4);
  return _mm512_maskz_mov_epi8(static_cast<__mmask64>(h0) | static_cast<__mmask64>(h1) << 32, _mm512_set1_epi8(0x10));
}

// The fp16 field of blocks 0 and 1 (0: unless k_pair) as [f0 x 8, f1 x 8].
template <bool k_pair, typename Block>
inline __m512 pair_halves(const Block* blk, const uint16_t Block::*field) {
  const uint32_t two = blk[0].*field | (k_pair ? static_cast<uint32_t>(blk[1].*field) << 16 : 0u);
  return pair_scales(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(two))));
}

struct Q4_1Weights {
  using Block = BlockQ4_1;
  static constexpr int k_offset = 0;
  static constexpr bool k_min = true;
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    return nibbles<k_pair>(blk);
  }
};

struct Q5_0Weights {
  using Block = BlockQ5_0;
  static constexpr int k_offset = 16;
  static constexpr bool k_min = false;
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    return _mm512_or_si512(nibbles<k_pair>(blk), fifth_bits<k_pair>(blk));
  }
};

struct Q5_1Weights {
  using Block = BlockQ5_1;
  static constexpr int k_offset = 0;
  static constexpr bool k_min = true;
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    return _mm512_or_si512(nibbles<k_pair>(blk), fifth_bits<k_pair>(blk));
  }
};

struct IQ4_NLWeights {
  using Block = BlockIQ4_NL;
  static constexpr int k_offset = 128;
  static constexpr bool k_min = false;
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    // The 16 levels + 128 (all in [1, 241]), looked up per 128-bit lane.
    const __m128i levels = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k_iq4nl_values)),
                                         _mm_set1_epi8(static_cast<char>(-128)));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(levels), nibbles<k_pair>(blk));
  }
};

// MXFP4: IQ4_NL's lookup with the doubled e2m1 levels (+ 128: [116, 140]); an E8M0 scale byte.
struct MXFP4Weights {
  using Block = BlockMXFP4;
  static constexpr int k_offset = 128;
  static constexpr bool k_min = false;
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    const __m128i levels = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k_mxfp4_values)),
                                         _mm_set1_epi8(static_cast<char>(-128)));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(levels), nibbles<k_pair>(blk));
  }
  template <bool k_pair>
  static __m512 scales(const Block* blk) {
    return pair_scales(_mm_setr_ps(e8m0_to_f32_half(blk[0].e), k_pair ? e8m0_to_f32_half(blk[1].e) : 0.0f, 0.0f, 0.0f));
  }
};

// Blocks 0 and 1's scales as [d0 x 8, d1 x 8]: W::scales where the format defines them, else its fp16 d.
template <typename W, bool k_pair>
inline __m512 block_scales(const typename W::Block* blk) {
  if constexpr (requires { W::template scales<k_pair>(blk); }) {
    return W::template scales<k_pair>(blk);
  } else {
    return pair_halves<k_pair>(blk, &W::Block::d);
  }
}

template <typename W>
struct Blocks32Kernel {
  using Block = typename W::Block;
  static constexpr int k_block = 32;
  static constexpr int k_rows = 4;
  static constexpr int k_tokens = 4;

  template <int R, int T, bool k_pair>
  static inline void step(const uint8_t* w, size_t rb, const ActTile& a, int64_t b, __m512 (&acc)[R][T]) {
    __m512i wq[R];
    __m512 wd[R], wm[R];
    for (int r = 0; r < R; ++r) {
      const Block* blk = reinterpret_cast<const Block*>(w + r * rb) + b;
      tiling::prefetch_ahead<2 * sizeof(Block) + 63>(blk, rb, k_rows);
      wq[r] = W::template load<k_pair>(blk);
      wd[r] = block_scales<W, k_pair>(blk);
      if constexpr (W::k_min) wm[r] = pair_halves<k_pair>(blk, &Block::m);
    }
    const __m512i zero = _mm512_setzero_si512();
    for (int t = 0; t < T; ++t) {
      const int8_t* q = a.qs + t * a.n_cols + 32 * b;
      const __m512i av = k_pair ? _mm512_loadu_si512(q) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, q);
      __m512i init = zero;
      if constexpr (W::k_offset != 0)
        init = _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(static_cast<char>(W::k_offset)), _mm512_sub_epi8(zero, av));
      __m512 a_sum = _mm512_setzero_ps();
      if constexpr (W::k_min) a_sum = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, _mm512_set1_epi8(1), av));
      const float* d = a.d + t * a.d_stride + b;
      const __m512 ad =
          pair_scales(k_pair ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(d))) : _mm_load_ss(d));
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(init, wq[r], av);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd[r], ad), acc[r][t]);
        if constexpr (W::k_min) acc[r][t] = _mm512_fmadd_ps(a_sum, _mm512_mul_ps(wm[r], ad), acc[r][t]);
      }
    }
  }

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 32;
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= n_blocks; b += 2) step<R, T, true>(w, rb, a, b, acc);
    if (b < n_blocks) step<R, T, false>(w, rb, a, b, acc);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
};

}  // namespace

void tile_q4_1_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_quant<Blocks32Kernel<Q4_1Weights>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_q5_0_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_quant<Blocks32Kernel<Q5_0Weights>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_q5_1_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_quant<Blocks32Kernel<Q5_1Weights>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_iq4_nl_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                             float* y, int64_t ys) {
  tiling::tile_quant<Blocks32Kernel<IQ4_NLWeights>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_mxfp4_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                            float* y, int64_t ys) {
  tiling::tile_quant<Blocks32Kernel<MXFP4Weights>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

}  // namespace kvc::kernels

// AVX2 kernels: activation quantization, register-tiled dot products of the 32-value block types,
// Q4_K, Q5_K and Q6_K and of float weights, and the kernel set.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/cpu/tile_dispatch.h"
#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels {

// Q2_K and Q3_K weights, in vec_dot_kquant_avx2.cpp.
void tile_q2_k_avx2(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens, float* y,
                    int64_t ys);
void tile_q3_k_avx2(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens, float* y,
                    int64_t ys);

namespace {

using tiling::ActTile;

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

inline int hsum_epi32(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i s2 = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
}

// ---- activation quantization (bit-identical to the scalar version) ----

// Quantizes 8 values with multiplier id; stores 8 int8s and returns the int32 lanes.
inline __m256i quantize8(const float* x, __m256 id, int8_t* q) {
  const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i b8 = _mm_packs_epi16(w16, w16);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(q), b8);
  return v;
}

inline float abs_max(const float* x, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float amax = abs_max(x + 32 * b, 32);
    const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (int i = 0; i < 32; i += 8) quantize8(x + 32 * b + i, id, qs + 32 * b + i);
    d[b] = amax / 127.0f;
  }
}

void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float amax = abs_max(x + 256 * b, 256);
    const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (int g = 0; g < 16; ++g) {
      const int64_t i = 256 * b + 16 * g;
      const __m256i s = _mm256_add_epi32(quantize8(x + i, id, qs + i), quantize8(x + i + 8, id, qs + i + 8));
      bsums[i / 16] = static_cast<int16_t>(hsum_epi32(s));
    }
    d[b] = amax / 127.0f;
  }
}

// ---- 32-value block weights x Q8_0 activations: one block per 256-bit step ----
//
// vpmaddubsw multiplies unsigned by signed bytes. Unsigned weights q with an offset o
// (Q4_0: 8, Q5_0: 16) give q * a minus o * a (o * a per token); signed ones (Q8_0, IQ4_NL's
// levels) give |w| * (a with w's sign). Pair sums stay within int16 (|a| <= 127, |w| <= 127).
// Q4_1 and Q5_1 add m * sum(a): the sums come from the same pass over each token's block.

// The 32 nibbles of a Q4_0-shaped block, byte j = value j.
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(x, 4), x), _mm256_set1_epi8(0x0F));
}

// Bit j of qh (a little-endian uint32) as 0x10 in byte j: Q5's fifth bits.
inline __m256i fifth_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(h)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

inline __m256i signed_pairs(__m256i w, __m256i a) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

struct Q4_0Weights {
  using Block = BlockQ4_0;
  static constexpr int k_offset = 8;
  static constexpr bool k_min = false;
  static __m256i load(const Block& blk) { return nibbles(blk.qs); }
  static __m256i pairs(__m256i w, __m256i a) { return _mm256_maddubs_epi16(w, a); }
};

struct Q4_1Weights {
  using Block = BlockQ4_1;
  static constexpr int k_offset = 0;
  static constexpr bool k_min = true;
  static __m256i load(const Block& blk) { return nibbles(blk.qs); }
  static __m256i pairs(__m256i w, __m256i a) { return _mm256_maddubs_epi16(w, a); }
};

struct Q5_0Weights {
  using Block = BlockQ5_0;
  static constexpr int k_offset = 16;
  static constexpr bool k_min = false;
  static __m256i load(const Block& blk) { return _mm256_or_si256(nibbles(blk.qs), fifth_bits(blk.qh)); }
  static __m256i pairs(__m256i w, __m256i a) { return _mm256_maddubs_epi16(w, a); }
};

struct Q5_1Weights {
  using Block = BlockQ5_1;
  static constexpr int k_offset = 0;
  static constexpr bool k_min = true;
  static __m256i load(const Block& blk) { return _mm256_or_si256(nibbles(blk.qs), fifth_bits(blk.qh)); }
  static __m256i pairs(__m256i w, __m256i a) { return _mm256_maddubs_epi16(w, a); }
};

struct IQ4_NLWeights {
  using Block = BlockIQ4_NL;
  static constexpr int k_offset = 0;
  static constexpr bool k_min = false;
  static __m256i load(const Block& blk) {
    const __m128i levels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k_iq4nl_values));
    return _mm256_shuffle_epi8(_mm256_set_m128i(levels, levels), nibbles(blk.qs));
  }
  static __m256i pairs(__m256i w, __m256i a) { return signed_pairs(w, a); }
};

// MXFP4: IQ4_NL's lookup with the doubled e2m1 levels; the scale is an E8M0 byte, not fp16.
struct MXFP4Weights {
  using Block = BlockMXFP4;
  static constexpr int k_offset = 0;
  static constexpr bool k_min = false;
  static __m256i load(const Block& blk) {
    const __m128i levels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k_mxfp4_values));
    return _mm256_shuffle_epi8(_mm256_set_m128i(levels, levels), nibbles(blk.qs));
  }
  static __m256i pairs(__m256i w, __m256i a) { return signed_pairs(w, a); }
  static float scale(const Block& blk) { return e8m0_to_f32_half(blk.e); }
};

// A block's scale: W::scale where the format defines one, else its fp16 d.
template <typename W>
inline float block_scale(const typename W::Block& blk) {
  if constexpr (requires { W::scale(blk); }) {
    return W::scale(blk);
  } else {
    return _cvtsh_ss(blk.d);
  }
}

struct Q8_0Weights {
  using Block = BlockQ8_0;
  static constexpr int k_offset = 0;
  static constexpr bool k_min = false;
  static __m256i load(const Block& blk) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs)); }
  static __m256i pairs(__m256i w, __m256i a) { return signed_pairs(w, a); }
};

template <typename W>
struct Q8_0FormKernel {
  static constexpr int k_block = 32;
  static constexpr int k_rows = 4;
  static constexpr int k_tokens = 2;

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 32;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m256i wq[R];
      float wd[R], wm[R];
      for (int r = 0; r < R; ++r) {
        const auto& blk = reinterpret_cast<const typename W::Block*>(w + r * rb)[b];
        tiling::prefetch_ahead<sizeof(typename W::Block) + 63>(&blk, rb, k_rows);
        wq[r] = W::load(blk);
        wd[r] = block_scale<W>(blk);
        if constexpr (W::k_min) wm[r] = _cvtsh_ss(blk.m);
      }
      for (int t = 0; t < T; ++t) {
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + t * a.n_cols + 32 * b));
        const float ad = a.d[t * a.d_stride + b];
        __m256i a_offset = _mm256_setzero_si256();
        if constexpr (W::k_offset != 0) a_offset = _mm256_maddubs_epi16(_mm256_set1_epi8(W::k_offset), av);
        __m256 a_sum = _mm256_setzero_ps();  // 8 partial sums of the block's a
        if constexpr (W::k_min)
          a_sum = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), av), ones));
        for (int r = 0; r < R; ++r) {
          __m256i p = W::pairs(wq[r], av);
          if constexpr (W::k_offset != 0) p = _mm256_sub_epi16(p, a_offset);
          const __m256i dot = _mm256_madd_epi16(p, ones);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(wd[r] * ad), acc[r][t]);
          if constexpr (W::k_min) acc[r][t] = _mm256_fmadd_ps(a_sum, _mm256_set1_ps(wm[r] * ad), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = hsum(acc[r][t]);
  }
};

// ---- Q4_K and Q6_K weights x Q8_K activations: integer sums per super-block ----

inline void unpack_q4_k_words(const uint8_t* s, uint32_t out[4]) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, s, 4);
  std::memcpy(&w1, s + 4, 4);
  std::memcpy(&w2, s + 8, 4);
  out[0] = w0 & 0x3f3f3f3fu;
  out[1] = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
  out[2] = w1 & 0x3f3f3f3fu;
  out[3] = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
}

// Q4_K, or Q5_K (Block = BlockQ5_K): the same scales, mins and nibbles, plus qh's fifth bits
// (maddubs pairs of 5-bit weights stay below 2 * 31 * 127 < 2^15).
template <typename Block>
struct Q4_KKernel {
  static constexpr bool k_five = std::is_same_v<Block, BlockQ5_K>;
  static constexpr int k_block = 256;
  static constexpr int k_rows = 2;
  static constexpr int k_tokens = 2;

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t sm[R][16];  // 8 scales then 8 mins
      __m256i m16[R];     // lane g: min of sub-block g / 2 (pairs with bsums[g])
      float wd[R], wdmin[R];
      for (int r = 0; r < R; ++r) {
        const Block& blk = reinterpret_cast<const Block*>(w + r * rb)[b];
        tiling::prefetch_ahead<sizeof(Block) + 63>(&blk, rb, k_rows);
        uint32_t words[4];
        unpack_q4_k_words(blk.scales, words);
        std::memcpy(sm[r], words, 16);
        const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm[r] + 8)));
        m16[r] = _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8));
        wd[r] = _cvtsh_ss(blk.d);
        wdmin[r] = _cvtsh_ss(blk.dmin);
      }
      __m256i iacc[R][T];
      for (auto& row : iacc)
        for (auto& v : row) v = _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        __m256i wlo[R], whi[R], slo[R], shi[R];
        for (int r = 0; r < R; ++r) {
          const Block& blk = reinterpret_cast<const Block*>(w + r * rb)[b];
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * k));
          wlo[r] = _mm256_and_si256(q, low4);
          whi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
          if constexpr (k_five) {  // bits 2k and 2k + 1 of qh to bit 4
            const __m256i h = _mm256_srl_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh)),
                                               _mm_cvtsi32_si128(2 * k));
            const __m256i bit4 = _mm256_set1_epi8(0x10);
            wlo[r] = _mm256_or_si256(wlo[r], _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
            whi[r] = _mm256_or_si256(whi[r], _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
          }
          slo[r] = _mm256_set1_epi16(sm[r][2 * k]);
          shi[r] = _mm256_set1_epi16(sm[r][2 * k + 1]);
        }
        for (int t = 0; t < T; ++t) {
          const int8_t* q = a.qs + t * a.n_cols + 256 * b + 64 * k;
          const __m256i alo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
          const __m256i ahi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
          for (int r = 0; r < R; ++r) {
            const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(wlo[r], alo), slo[r]);
            const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(whi[r], ahi), shi[r]);
            iacc[r][t] = _mm256_add_epi32(iacc[r][t], _mm256_add_epi32(plo, phi));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r) {
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r][t]), _mm256_set1_ps(wd[r] * ad), acc[r][t]);
          acc[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bs, m16[r])), _mm256_set1_ps(wdmin[r] * ad),
                                       acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = hsum(acc[r][t]);
  }
};

struct Q6_KKernel {
  static constexpr int k_block = 256;
  static constexpr int k_rows = 2;
  static constexpr int k_tokens = 2;

  // The 32 unsigned 6-bit values of quarter k (positions 32k..32k+31) of one half.
  static __m256i quarter(const uint8_t* ql, __m256i qh, int k) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32 * (k % 2)));
    const __m256i low4 = _mm256_and_si256(k < 2 ? lo : _mm256_srli_epi16(lo, 4), _mm256_set1_epi8(0x0F));
    __m256i hi;  // bits 2k, 2k+1 of qh moved to bits 4, 5
    switch (k) {
      case 0: hi = _mm256_slli_epi16(qh, 4); break;
      case 1: hi = _mm256_slli_epi16(qh, 2); break;
      case 2: hi = qh; break;
      default: hi = _mm256_srli_epi16(qh, 2); break;
    }
    return _mm256_or_si256(low4, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
  }

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    __m256 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m256i sc32[R];  // 32 * scale as int16, for the -32 offset through bsums
      float wd[R];
      for (int r = 0; r < R; ++r) {
        const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(w + r * rb)[b];
        tiling::prefetch_ahead<sizeof(BlockQ6_K) + 63>(&blk, rb, k_rows);
        sc32[r] =
            _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales))), 5);
        wd[r] = _cvtsh_ss(blk.d);
      }
      __m256i iacc[R][T];
      for (auto& row : iacc)
        for (auto& v : row) v = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
          __m256i wq[R], ws[R];
          for (int r = 0; r < R; ++r) {
            const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(w + r * rb)[b];
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
            wq[r] = quarter(blk.ql + 64 * h, qh, k);
            const int s = 8 * h + 2 * k;  // int16 lanes 0-7 take scale s, lanes 8-15 scale s + 1
            ws[r] = _mm256_set_m128i(_mm_set1_epi16(blk.scales[s + 1]), _mm_set1_epi16(blk.scales[s]));
          }
          for (int t = 0; t < T; ++t) {
            const __m256i av =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + t * a.n_cols + 256 * b + 128 * h + 32 * k));
            for (int r = 0; r < R; ++r)
              iacc[r][t] = _mm256_add_epi32(iacc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(wq[r], av), ws[r]));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r) {
          const __m256i isum = _mm256_sub_epi32(iacc[r][t], _mm256_madd_epi16(sc32[r], bs));
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(wd[r] * ad), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = hsum(acc[r][t]);
  }
};

// ---- float weights ----

struct F32Load {
  using Elem = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float one(const float* p) { return *p; }
};
struct F16Load {
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float one(const uint16_t* p) { return _cvtsh_ss(*p); }
};
struct BF16Load {
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static float one(const uint16_t* p) { return bf16_to_f32(*p); }
};

template <typename L, int T>
void float_rows(const uint8_t* w, size_t rb, int64_t n_rows, const float* x, int64_t n_cols, float* y, int64_t ys) {
  const int64_t n_main = n_cols - n_cols % 8;
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* wr = reinterpret_cast<const typename L::Elem*>(w + r * rb);
    __m256 acc[T];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_main; i += 8) {
      const __m256 wv = L::load(wr + i);
      for (int t = 0; t < T; ++t) acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + t * n_cols + i), acc[t]);
    }
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[t]);
      for (int64_t i = n_main; i < n_cols; ++i) s += L::one(wr + i) * x[t * n_cols + i];
      y[t * ys + r] = s;
    }
  }
}

template <typename L>
void tile_float(const uint8_t* w, size_t rb, int64_t n_rows, const float* x, int64_t n_cols, int64_t n_tokens, float* y,
                int64_t ys) {
  int64_t t = 0;
  for (; t + 4 <= n_tokens; t += 4) float_rows<L, 4>(w, rb, n_rows, x + t * n_cols, n_cols, y + t * ys, ys);
  for (; t < n_tokens; ++t) float_rows<L, 1>(w, rb, n_rows, x + t * n_cols, n_cols, y + t * ys, ys);
}

}  // namespace

const KernelSet& kernels_avx2() {
  static const KernelSet k{
      "avx2",
      quantize_q8_0,
      quantize_q8_k,
      tiling::tile_quant<Q8_0FormKernel<Q4_0Weights>>,
      tiling::tile_quant<Q8_0FormKernel<Q4_1Weights>>,
      tiling::tile_quant<Q8_0FormKernel<Q5_0Weights>>,
      tiling::tile_quant<Q8_0FormKernel<Q5_1Weights>>,
      tiling::tile_quant<Q8_0FormKernel<IQ4_NLWeights>>,
      tiling::tile_quant<Q8_0FormKernel<Q8_0Weights>>,
      tile_q2_k_avx2,
      tile_q3_k_avx2,
      tiling::tile_quant<Q4_KKernel<BlockQ4_K>>,
      tiling::tile_quant<Q4_KKernel<BlockQ5_K>>,
      tiling::tile_quant<Q6_KKernel>,
      tile_float<F32Load>,
      tile_float<F16Load>,
      tile_float<BF16Load>,
      tiling::tile_quant<Q8_0FormKernel<MXFP4Weights>>,
  };
  return k;
}

}  // namespace kvc::kernels

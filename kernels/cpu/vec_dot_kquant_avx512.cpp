// AVX-512 VNNI kernels for Q4_K, Q5_K and Q6_K weights x Q8_K activations (register tiles).
// GCC 12 flags the self-initialised "undefined" vectors inside its own AVX-512 intrinsics
// as uninitialised: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/tile_dispatch.h"
#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels {

namespace {

using tiling::ActTile;

inline __m512 pair_scales(__m128 two) {  // [s0 x 8, s1 x 8]
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(two));
}

// ---- Q4_K and Q6_K weights x Q8_K activations ----
//
// Sub-block scales are small integers, so each super-block's sum stays integer:
// vpmaddubsw (unsigned weight x signed activation -> pairs of int16) then vpdpwssd with the
// sub-block scale; one float multiply-add per super-block, row and token.

// Q4_K scales and mins as bytes, from the 12 packed bytes (see unpack_q4_k_scales): the four
// 32-bit words sc[0..3], sc[4..7], m[0..3], m[4..7].
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

// Q6_K prefill: the 256 values of a super-block are dealt into four registers so that dword l
// of register i is the block's dword 4l + i, for weights and activations alike: int32 lane l
// of every register then holds sub-block l (16 values). Each lane starts at -32 * bsum_l (the
// format's offset), four chained vpdpbusd add the 16 products, and one vpmulld applies the
// sub-block scale, all exact in int32: |lane| <= 16 * 32 * 127 * 128 < 2^31.
inline void deal_dwords(const __m512i (&in)[4], __m512i (&out)[4]) {  // in: values 64k..64k+63 in order
  const __m512i tr = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4,
                                      0);  // 128-bit lane i: dwords i, 4+i, 8+i, 12+i
  __m512i c[4];
  for (int k = 0; k < 4; ++k) c[k] = _mm512_permutexvar_epi32(tr, in[k]);
  const __m512i u01_lo = _mm512_shuffle_i64x2(c[0], c[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i u23_lo = _mm512_shuffle_i64x2(c[2], c[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512i u01_hi = _mm512_shuffle_i64x2(c[0], c[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512i u23_hi = _mm512_shuffle_i64x2(c[2], c[3], _MM_SHUFFLE(3, 2, 3, 2));
  out[0] = _mm512_shuffle_i64x2(u01_lo, u23_lo, _MM_SHUFFLE(2, 0, 2, 0));
  out[1] = _mm512_shuffle_i64x2(u01_lo, u23_lo, _MM_SHUFFLE(3, 1, 3, 1));
  out[2] = _mm512_shuffle_i64x2(u01_hi, u23_hi, _MM_SHUFFLE(2, 0, 2, 0));
  out[3] = _mm512_shuffle_i64x2(u01_hi, u23_hi, _MM_SHUFFLE(3, 1, 3, 1));
}

struct PreparedQ6_K {
  __m512i q[4];  // (4 registers, 64 bytes) the dealt unsigned 6-bit values
  __m512i s;     // (16 int32) lane l: the scale of sub-block l
  float d;
};

// Q4_K prefill: the 256 values of a super-block are dealt into four registers so that qword j
// of register i is the block's qword 4j + i, for weights and activations alike. The int32
// lanes 2j, 2j+1 of every register then belong to sub-block j, so four chained vpdpbusd sum
// 16 products per lane, |sum| <= 16 * 15 * 127 < 2^15, before one vpmaddwd applies the
// sub-block scales: 5 integer ops per 256 values instead of 8.
inline void deal_qwords(const __m512i (&in)[4], __m512i (&out)[4]) {  // in: values 64k..64k+63 in order
  for (int i = 0; i < 4; ++i) {
    const __m512i idx = _mm512_set_epi64(0, 0, 0, 0, 12 + i, 8 + i, 4 + i, i);  // slots 0-3: a[i], a[4+i], b[i], b[4+i]
    const __m512i t01 = _mm512_permutex2var_epi64(in[0], idx, in[1]);
    const __m512i t23 = _mm512_permutex2var_epi64(in[2], idx, in[3]);
    out[i] = _mm512_inserti64x4(t01, _mm512_castsi512_si256(t23), 1);
  }
}

// Deals each 256 values of the activations (n_tokens, n_cols) with `deal`, once per call.
template <void (*deal)(const __m512i (&)[4], __m512i (&)[4])>
QuantizedActs deal_acts(const QuantizedActs& acts, int64_t n_tokens) {
  thread_local std::vector<int8_t> dealt;
  const auto n = static_cast<size_t>(n_tokens * acts.n_cols);
  if (dealt.size() < n) dealt.resize(n);
  for (size_t i = 0; i < n; i += 256) {
    __m512i in[4], out[4];
    for (int k = 0; k < 4; ++k) in[k] = _mm512_loadu_si512(acts.qs + i + 64 * k);
    deal(in, out);
    for (int k = 0; k < 4; ++k) _mm512_storeu_si512(dealt.data() + i + 64 * k, out[k]);
  }
  return {dealt.data(), acts.d, acts.bsums, acts.n_cols};
}

struct MinsQ4_K {
  __m256i m;  // (16 int16) per bsum: the min of its sub-block
  float dmin;
};

// The sub-block scales as vpmaddwd factors for the dealt dots: int16 position 2l holds scale
// l / 2, position 2l + 1 zero. words: unpack_q4_k_words' output.
inline __m512i q4_k_scale_lanes(const uint32_t words[4]) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(words));
  const __m512i idx = _mm512_set_epi16(8, 7, 8, 7, 8, 6, 8, 6, 8, 5, 8, 5, 8, 4, 8, 4, 8, 3, 8, 3, 8, 2, 8, 2, 8, 1, 8,
                                       1, 8, 0, 8, 0);  // index 8: a zero of the extension
  return _mm512_permutexvar_epi16(idx, _mm512_zextsi128_si512(_mm_cvtepu8_epi16(bytes)));
}

// words: unpack_q4_k_words' output; dmin: the block's f16 dmin.
inline MinsQ4_K q4_k_mins(const uint32_t words[4], uint16_t dmin) {
  const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(words + 2)));
  return {_mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8)), _cvtsh_ss(dmin)};
}

template <typename Block>  // BlockQ4_K or BlockQ5_K
inline MinsQ4_K q4_k_mins(const Block& blk) {
  uint32_t words[4];
  unpack_q4_k_words(blk.scales, words);
  return q4_k_mins(words, blk.dmin);
}

// The nibbles of a Q4_K block dealt as deal_qwords deals its values in order: value qword
// 4j + i lies in packed qword 4 (j / 2) + i, low nibbles for even j, high for odd j.
inline void q4_k_dealt(const BlockQ4_K& blk, __m512i (&out)[4]) {
  const __m512i p0 = _mm512_loadu_si512(blk.qs);
  const __m512i p1 = _mm512_loadu_si512(blk.qs + 64);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int i = 0; i < 4; ++i) {
    const __m512i idx = _mm512_set_epi64(12 + i, 12 + i, 8 + i, 8 + i, 4 + i, 4 + i, i, i);
    const __m512i g = _mm512_permutex2var_epi64(p0, idx, p1);
    out[i] = _mm512_and_si512(_mm512_mask_blend_epi64(0xAA, g, _mm512_srli_epi16(g, 4)), low4);
  }
}

// Q5_K: the 5-bit values in order (64k + l: nibble of qs[32k + l] | bit 2k of qh[l] << 4,
// 64k + 32 + l: high nibble | bit 2k + 1), dealt as deal_qwords deals the activations.
inline void q5_k_dealt(const BlockQ5_K& blk, __m512i (&out)[4]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
  __m512i natural[4];
  for (int k = 0; k < 4; ++k) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * k));
    const __m512i nib = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
    const __m256i hk = _mm256_srl_epi16(h, _mm_cvtsi32_si128(2 * k));  // bits 2k, 2k + 1 to bits 0, 1
    const __m512i hb =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_slli_epi16(hk, 4)), _mm256_slli_epi16(hk, 3), 1);
    natural[k] = _mm512_or_si512(_mm512_and_si512(nib, low4), _mm512_and_si512(hb, bit4));
  }
  deal_qwords(natural, out);
}

struct PreparedQ4_K {
  __m512i q[4];  // (4 registers, 64 bytes) the dealt unsigned nibbles (Q5_K: 5-bit values)
  __m512i s;     // (16 int32) lane l: scale of sub-block l / 2 in its low int16, 0 above
  __m256i m;     // (16 int16) per bsum: the min of its sub-block
  float d, dmin;
};

// Q4_K, or Q5_K (Block = BlockQ5_K) with the same scales and mins: its lanes sum 16 products
// of up to 31 * 127, which can pass 2^15, so the sub-block scales are applied by vpmulld
// (exact in int32) instead of vpmaddwd.
template <typename Block>
struct Q4_KKernel {
  static constexpr bool k_five = std::is_same_v<Block, BlockQ5_K>;
  static constexpr int k_block = 256;
  static constexpr int k_rows = 3;
  static constexpr int k_tokens = 4;

  using Prepared = PreparedQ4_K;  // 4 x 4 measured fastest of 2..6 x 2..6
  static constexpr int k_prepared_rows = 4;
  static constexpr int k_prepared_tokens = 4;
  static int64_t n_prepared(int64_t n_cols) { return n_cols / 256; }
  static void prepare(const uint8_t* row, int64_t /*n_cols*/, int64_t u, PreparedQ4_K* out) {
    const Block& blk = reinterpret_cast<const Block*>(row)[u];
    uint32_t words[4];
    unpack_q4_k_words(blk.scales, words);
    out->s = q4_k_scale_lanes(words);
    const MinsQ4_K mins = q4_k_mins(words, blk.dmin);
    out->m = mins.m;
    out->d = _cvtsh_ss(blk.d);
    out->dmin = mins.dmin;
    if constexpr (k_five) {
      q5_k_dealt(blk, out->q);
    } else {
      q4_k_dealt(blk, out->q);
    }
  }

  // The activations dealt like the weights, once per call: (n_tokens, n_cols).
  static QuantizedActs prepare_acts(const QuantizedActs& acts, int64_t n_tokens) {
    return deal_acts<deal_qwords>(acts, n_tokens);
  }

  // units(b): the R prepared rows of super-block b; mins(b, r): row r's MinsQ4_K of block b.
  template <int R, int T, typename Units, typename Mins>
  static void run_units(Units units, Mins mins, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const PreparedQ4_K* pb = units(b);
      __m512i dots[R][T];
      for (auto& row : dots)
        for (auto& v : row) v = _mm512_setzero_si512();
      for (int i = 0; i < 4; ++i) {
        __m512i wq[R];
        for (int r = 0; r < R; ++r) wq[r] = pb[r].q[i];
        for (int t = 0; t < T; ++t) {
          const __m512i av = _mm512_loadu_si512(a.qs + t * a.n_cols + 256 * b + 64 * i);
          for (int r = 0; r < R; ++r) dots[r][t] = _mm512_dpbusd_epi32(dots[r][t], wq[r], av);
        }
      }
      for (int t = 0; t < T; ++t) {
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(k_five ? _mm512_mullo_epi32(dots[r][t], pb[r].s)
                                                                : _mm512_madd_epi16(dots[r][t], pb[r].s)),
                                      _mm512_set1_ps(pb[r].d * ad), acc[r][t]);
      }
    }
    // The mins, two super-blocks per step: lanes 0-7 (8-15) sum block b's (b+1's) integer
    // m * bsums, scaled by its dmin * ad.
    int64_t b = 0;
    for (; b + 2 <= n_blocks; b += 2) {
      __m512i m2[R];
      __m512 dmin2[R];
      for (int r = 0; r < R; ++r) {
        const MinsQ4_K p0 = mins(b, r);
        const MinsQ4_K p1 = mins(b + 1, r);
        m2[r] = _mm512_inserti64x4(_mm512_castsi256_si512(p0.m), p1.m, 1);
        dmin2[r] = pair_scales(_mm_setr_ps(p0.dmin, p1.dmin, 0.0f, 0.0f));
      }
      for (int t = 0; t < T; ++t) {
        const __m512i bs = _mm512_loadu_si512(a.bsums + t * (a.n_cols / 16) + 16 * b);
        const __m512 ad2 =
            pair_scales(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a.d + t * a.d_stride + b))));
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(bs, m2[r])), _mm512_mul_ps(dmin2[r], ad2),
                                       acc[r][t]);
      }
    }
    if (b < n_blocks) {
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r) {
          const MinsQ4_K pr = mins(b, r);
          const __m512i corr = _mm512_zextsi256_si512(_mm256_madd_epi16(bs, pr.m));
          acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), _mm512_set1_ps(pr.dmin * ad), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
  }

  template <int R, int T>
  static void run_prepared(const PreparedQ4_K* p, const uint8_t*, size_t, const ActTile& a, float* y, int64_t ys) {
    run_units<R, T>([p](int64_t b) { return p + b * R; },
                    [p](int64_t b, int r) {
                      return MinsQ4_K{p[b * R + r].m, p[b * R + r].dmin};
                    },
                    a, y, ys);
  }

  // Decode: each super-block prepared in registers just before use.
  template <int R, int T>
  static void run_streamed(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    PreparedQ4_K tmp[R];
    auto units = [&](int64_t b) {
      for (int r = 0; r < R; ++r) {
        tiling::prefetch_ahead<sizeof(Block) + 63>(reinterpret_cast<const Block*>(w + r * rb) + b, rb, k_rows);
        prepare(w + r * rb, a.n_cols, b, &tmp[r]);
      }
      return static_cast<const PreparedQ4_K*>(tmp);
    };
    auto mins = [&](int64_t b, int r) { return q4_k_mins(reinterpret_cast<const Block*>(w + r * rb)[b]); };
    run_units<R, T>(units, mins, a, y, ys);
  }
};

struct Q6_KKernel {
  static constexpr int k_block = 256;
  static constexpr int k_rows = 3;
  static constexpr int k_tokens = 4;

  using Prepared = PreparedQ6_K;  // 4 x 3 measured fastest of 2..6 x 2..6
  static constexpr int k_prepared_rows = 4;
  static constexpr int k_prepared_tokens = 3;
  static int64_t n_prepared(int64_t n_cols) { return n_cols / 256; }
  static void prepare(const uint8_t* row, int64_t /*n_cols*/, int64_t u, PreparedQ6_K* out) {
    const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(row)[u];
    out->s = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    out->d = _cvtsh_ss(blk.d);
    __m512i natural[4];  // values 64k..64k+63 in order
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
      const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      natural[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_slli_epi16(hz, 4), bits45));
      natural[2 * h + 1] =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(hz, bits45));
    }
    deal_dwords(natural, out->q);
  }

  // The activations dealt like the weights, once per call: (n_tokens, n_cols).
  static QuantizedActs prepare_acts(const QuantizedActs& acts, int64_t n_tokens) {
    return deal_acts<deal_dwords>(acts, n_tokens);
  }

  // units(b): the R prepared rows of super-block b.
  template <int R, int T, typename Units>
  static void run_units(Units units, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const PreparedQ6_K* pb = units(b);
      __m512i dots[R][T];
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const __m512i init = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_cvtepi16_epi32(bs), 5));
        for (int r = 0; r < R; ++r) dots[r][t] = init;
      }
      for (int i = 0; i < 4; ++i) {
        __m512i wq[R];
        for (int r = 0; r < R; ++r) wq[r] = pb[r].q[i];
        for (int t = 0; t < T; ++t) {
          const __m512i av = _mm512_loadu_si512(a.qs + t * a.n_cols + 256 * b + 64 * i);
          for (int r = 0; r < R; ++r) dots[r][t] = _mm512_dpbusd_epi32(dots[r][t], wq[r], av);
        }
      }
      for (int t = 0; t < T; ++t) {
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r)
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(dots[r][t], pb[r].s)),
                                      _mm512_set1_ps(pb[r].d * ad), acc[r][t]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
  }

  template <int R, int T>
  static void run_prepared(const PreparedQ6_K* p, const uint8_t*, size_t, const ActTile& a, float* y, int64_t ys) {
    run_units<R, T>([p](int64_t b) { return p + b * R; }, a, y, ys);
  }

  // Decode: each super-block prepared in registers just before use.
  template <int R, int T>
  static void run_streamed(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    PreparedQ6_K tmp[R];
    auto units = [&](int64_t b) {
      for (int r = 0; r < R; ++r) {
        tiling::prefetch_ahead<sizeof(BlockQ6_K) + 63>(reinterpret_cast<const BlockQ6_K*>(w + r * rb) + b, rb, k_rows);
        prepare(w + r * rb, a.n_cols, b, &tmp[r]);
      }
      return static_cast<const PreparedQ6_K*>(tmp);
    };
    run_units<R, T>(units, a, y, ys);
  }
};

// ---- Q4_K with AMX tiles (Isa::avx512_amx) ----
//
// One arithmetic for every number of tokens, so that a prefill on the tiles and a decode on
// vpdpbusd give the same bits. Per row, token and super-block two exact integers,
//   I = sum_j sc_j * dot_j(q, a)    M = sum_j m_j * bsum_j(a)    (j: the 8 sub-blocks)
// and then, super-blocks in order from acc = 0:
//   acc = fma(float(I), d * ad, acc);  acc = fnmadd(float(M), dmin * ad, acc).

// Decode (up to four tokens): Q4_KKernel's integer lanes, summed across the register per
// super-block into I and M for four rows at once, then the two float steps with the rows in lanes.
struct Q4_KExactKernel {
  static constexpr int k_block = 256;
  static constexpr int k_rows = 4;
  static constexpr int k_tokens = 4;

  // x[r]: row r's eight partial sums of I (low half) and of M (high half). Returns I of rows 0-3
  // in 128-bit lane 0 and M of rows 0-3 in lane 2 (exact: integer adds in any order).
  static inline __m512i sum_halves(const __m512i (&x)[4]) {
    const __m512i a01 = _mm512_add_epi32(_mm512_unpacklo_epi32(x[0], x[1]), _mm512_unpackhi_epi32(x[0], x[1]));
    const __m512i a23 = _mm512_add_epi32(_mm512_unpacklo_epi32(x[2], x[3]), _mm512_unpackhi_epi32(x[2], x[3]));
    // 128-bit lane l: the sums of lane l of rows 0, 1, 2, 3.
    const __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi64(a01, a23), _mm512_unpackhi_epi64(a01, a23));
    return _mm512_add_epi32(b, _mm512_shuffle_i64x2(b, b, _MM_SHUFFLE(2, 3, 0, 1)));
  }

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    __m128 acc[T];  // lane r: row r
    for (auto& v : acc) v = _mm_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m512i q[R][4], s[R];
      __m256i m[R];
      alignas(16) float d[4] = {}, dmin[4] = {};
      for (int r = 0; r < R; ++r) {
        const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w + r * rb)[b];
        tiling::prefetch_ahead<sizeof(BlockQ4_K) + 63>(&blk, rb, k_rows);
        uint32_t words[4];
        unpack_q4_k_words(blk.scales, words);
        s[r] = q4_k_scale_lanes(words);
        const MinsQ4_K mins = q4_k_mins(words, blk.dmin);
        m[r] = mins.m;
        d[r] = _cvtsh_ss(blk.d);
        dmin[r] = mins.dmin;
        q4_k_dealt(blk, q[r]);
      }
      const __m128 dv = _mm_load_ps(d), dminv = _mm_load_ps(dmin);
      for (int t = 0; t < T; ++t) {
        __m512i av[4];
        for (int i = 0; i < 4; ++i) av[i] = _mm512_loadu_si512(a.qs + t * a.n_cols + 256 * b + 64 * i);
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        __m512i x[4];
        for (int r = 0; r < 4; ++r) {
          if (r >= R) {
            x[r] = _mm512_setzero_si512();
            continue;
          }
          __m512i dots = _mm512_setzero_si512();
          for (int i = 0; i < 4; ++i) dots = _mm512_dpbusd_epi32(dots, q[r][i], av[i]);
          const __m512i v = _mm512_madd_epi16(dots, s[r]);  // its lanes sum to I
          const __m256i v8 = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
          x[r] = _mm512_inserti64x4(_mm512_castsi256_si512(v8), _mm256_madd_epi16(bs, m[r]), 1);
        }
        const __m512 f = _mm512_cvtepi32_ps(sum_halves(x));
        const __m128 ad = _mm_set1_ps(a.d[t * a.d_stride + b]);
        acc[t] = _mm_fmadd_ps(_mm512_castps512_ps128(f), _mm_mul_ps(dv, ad), acc[t]);
        acc[t] = _mm_fnmadd_ps(_mm512_extractf32x4_ps(f, 2), _mm_mul_ps(dminv, ad), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) {
      alignas(16) float out[4];
      _mm_store_ps(out, acc[t]);
      for (int r = 0; r < R; ++r) y[t * ys + r] = out[r];
    }
  }
};

// The tile registers as the prefill uses them (palette 1): C tiles 0-2 (16 rows x 16 tokens of
// int32), B tile 3 (the activations of 16 tokens, 64 values: 16 rows of 4 values x 16 tokens),
// A tiles 4-6 (16 weight rows x 64 values). All are 16 rows of 64 bytes.
struct alignas(64) AmxConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16};
};

// r: 16 registers of 16 int32, transposed in place (r[i] lane j <- r[j] lane i).
inline void transpose16_epi32(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  __m512i u[16];  // u[4g + j], 128-bit lane l: column 4l + j of rows 4g..4g+3
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], _MM_SHUFFLE(3, 2, 3, 2));
    r[j] = _mm512_shuffle_i32x4(v0, v2, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + j] = _mm512_shuffle_i32x4(v0, v2, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + j] = _mm512_shuffle_i32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + j] = _mm512_shuffle_i32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// Prefill on the tiles: C[row][token] += A (weights, unsigned) x B (activations, signed) per 64
// values. The sub-block scales are folded into the weights, sc = 8 sh + sl with sl, sh <= 7, so
// q * sl and q * sh (<= 105) are bytes and a whole super-block sums in two C tiles, I = C0 + 8 C1;
// a third A tile holds each value's sub-block min, so C2 = M. A 16-row panel is converted once
// per call (12 KiB a super-block) and every tile of 16 tokens then runs over it.
struct Q4_KAmx {
  static constexpr int64_t k_panel_bytes = 3 * 4 * 1024;  // per super-block: lo, hi, mins x 4 chunks

  // The activations as B tiles: (token tile, 64-value chunk) -> 16 rows of (16 tokens x 4
  // values), tokens past n_tokens zero; and their scales as (token tile, super-block) -> 16 floats.
  static void arrange_acts(const QuantizedActs& acts, int64_t n_tokens, int8_t* out, float* out_d) {
    const int64_t n_chunks = acts.n_cols / 64, n_blocks = acts.n_cols / 256;
    for (int64_t tile = 0; tile * 16 < n_tokens; ++tile) {
      const int64_t nt = std::min<int64_t>(16, n_tokens - 16 * tile);
      for (int64_t c = 0; c < n_chunks; ++c) {
        __m512i r[16];
        for (int t = 0; t < 16; ++t)
          r[t] = t < nt ? _mm512_loadu_si512(acts.qs + (16 * tile + t) * acts.n_cols + 64 * c) : _mm512_setzero_si512();
        transpose16_epi32(r);
        for (int k = 0; k < 16; ++k) _mm512_storeu_si512(out + ((tile * n_chunks + c) * 16 + k) * 64, r[k]);
      }
      for (int64_t b = 0; b < n_blocks; ++b)
        for (int t = 0; t < 16; ++t)
          out_d[(tile * n_blocks + b) * 16 + t] = t < nt ? acts.d[(16 * tile + t) * n_blocks + b] : 0.0f;
    }
  }

  // Rows [0, nr) of a panel (nr <= 16; the rest zero) as A tiles, and their d and dmin.
  static void arrange_panel(const uint8_t* w, size_t rb, int nr, int64_t n_blocks, uint8_t* out, float* out_d,
                            float* out_dmin) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* ob = out + b * k_panel_bytes;
      for (int r = 0; r < 16; ++r) {
        if (r >= nr) {
          for (int k = 0; k < 12; ++k) _mm512_storeu_si512(ob + k * 1024 + r * 64, _mm512_setzero_si512());
          out_d[b * 16 + r] = out_dmin[b * 16 + r] = 0.0f;
          continue;
        }
        const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w + r * rb)[b];
        uint32_t words[4];
        unpack_q4_k_words(blk.scales, words);
        uint8_t sc[8], m[8];
        std::memcpy(sc, words, 8);
        std::memcpy(m, words + 2, 8);
        out_d[b * 16 + r] = _cvtsh_ss(blk.d);
        out_dmin[b * 16 + r] = _cvtsh_ss(blk.dmin);
        for (int c = 0; c < 4; ++c) {
          // Values 64c..64c+63: the low nibbles of packed bytes 32c..32c+31, then their high nibbles.
          const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
          const __m512i q =
              _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(p), _mm256_srli_epi16(p, 4), 1), low4);
          const int j0 = 2 * c, j1 = 2 * c + 1;
          // Byte pairs times a scale <= 7 in 16-bit lanes: each product fits its byte, no carry.
          const __m512i sl = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(sc[j0] & 7)),
                                                     _mm512_set1_epi16(static_cast<int16_t>(sc[j1] & 7)));
          const __m512i sh = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(sc[j0] >> 3)),
                                                     _mm512_set1_epi16(static_cast<int16_t>(sc[j1] >> 3)));
          const __m512i mins = _mm512_mask_blend_epi8(0xFFFFFFFF00000000ull, _mm512_set1_epi8(static_cast<char>(m[j0])),
                                                      _mm512_set1_epi8(static_cast<char>(m[j1])));
          _mm512_storeu_si512(ob + (3 * c + 0) * 1024 + r * 64, _mm512_mullo_epi16(q, sl));
          _mm512_storeu_si512(ob + (3 * c + 1) * 1024 + r * 64, _mm512_mullo_epi16(q, sh));
          _mm512_storeu_si512(ob + (3 * c + 2) * 1024 + r * 64, mins);
        }
      }
    }
  }

  __attribute__((target("amx-tile,amx-int8"))) static void run(const uint8_t* w, size_t rb, int64_t n_rows,
                                                               const QuantizedActs& acts, int64_t n_tokens, float* y,
                                                               int64_t ys) {
    const int64_t n_blocks = acts.n_cols / 256, n_chunks = acts.n_cols / 64;
    const int64_t n_tiles = (n_tokens + 15) / 16;
    // Tile rows are 64 bytes: a row across two cache lines makes every tile load several times slower.
    thread_local std::vector<uint8_t> scratch;
    const size_t acts_bytes = static_cast<size_t>(n_tiles * n_chunks * 1024);
    const size_t panel_bytes = static_cast<size_t>(n_blocks * k_panel_bytes);
    const size_t float_bytes = static_cast<size_t>((n_tiles + 2) * n_blocks * 16) * sizeof(float);
    scratch.resize(acts_bytes + panel_bytes + float_bytes + 64);
    uint8_t* base = scratch.data() + (-reinterpret_cast<uintptr_t>(scratch.data()) & 63);
    auto* bacts = reinterpret_cast<int8_t*>(base);
    uint8_t* panel = base + acts_bytes;
    auto* bad = reinterpret_cast<float*>(panel + panel_bytes);
    float* pd = bad + n_tiles * n_blocks * 16;
    float* pdmin = pd + n_blocks * 16;
    thread_local tiling::KeptActs arranged;  // the pieces of one product arrange its activations once
    if (!arranged.same(acts, base)) {
      arrange_acts(acts, n_tokens, bacts, bad);
      arranged.keep(acts, base);
    }

    static const AmxConfig config;
    _tile_loadconfig(&config);
    alignas(64) int32_t cbuf[3][16][16];
    alignas(64) float out[16][16];
    for (int64_t r0 = 0; r0 < n_rows; r0 += 16) {
      const int nr = static_cast<int>(std::min<int64_t>(16, n_rows - r0));
      arrange_panel(w + r0 * rb, rb, nr, n_blocks, panel, pd, pdmin);
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        __m512 acc[16];
        for (auto& v : acc) v = _mm512_setzero_ps();
        for (int64_t b = 0; b < n_blocks; ++b) {
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          const uint8_t* pb = panel + b * k_panel_bytes;
          for (int c = 0; c < 4; ++c) {
            _tile_loadd(3, bacts + (tile * n_chunks + 4 * b + c) * 1024, 64);
            _tile_loadd(4, pb + (3 * c + 0) * 1024, 64);
            _tile_dpbusd(0, 4, 3);
            _tile_loadd(5, pb + (3 * c + 1) * 1024, 64);
            _tile_dpbusd(1, 5, 3);
            _tile_loadd(6, pb + (3 * c + 2) * 1024, 64);
            _tile_dpbusd(2, 6, 3);
          }
          _tile_stored(0, cbuf[0], 64);
          _tile_stored(1, cbuf[1], 64);
          _tile_stored(2, cbuf[2], 64);
          const __m512 ad = _mm512_loadu_ps(bad + (tile * n_blocks + b) * 16);
          for (int r = 0; r < 16; ++r) {
            const __m512i lo = _mm512_load_si512(cbuf[0][r]);
            const __m512i hi = _mm512_load_si512(cbuf[1][r]);
            const __m512i i_sum = _mm512_add_epi32(lo, _mm512_slli_epi32(hi, 3));
            const __m512 m_sum = _mm512_cvtepi32_ps(_mm512_load_si512(cbuf[2][r]));
            acc[r] =
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(i_sum), _mm512_mul_ps(ad, _mm512_set1_ps(pd[b * 16 + r])), acc[r]);
            acc[r] = _mm512_fnmadd_ps(m_sum, _mm512_mul_ps(ad, _mm512_set1_ps(pdmin[b * 16 + r])), acc[r]);
          }
        }
        for (int r = 0; r < 16; ++r) _mm512_store_ps(out[r], acc[r]);
        const int64_t nt = std::min<int64_t>(16, n_tokens - 16 * tile);
        for (int64_t t = 0; t < nt; ++t)
          for (int r = 0; r < nr; ++r) y[(16 * tile + t) * ys + r0 + r] = out[r][t];
      }
    }
    _tile_release();
  }
};

}  // namespace

void tile_q4_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_prepared<Q4_KKernel<BlockQ4_K>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_q5_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_prepared<Q4_KKernel<BlockQ5_K>>(w, rb, n_rows, acts, n_tokens, y, ys);
}

void tile_q6_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys) {
  tiling::tile_prepared<Q6_KKernel>(w, rb, n_rows, acts, n_tokens, y, ys);
}

// Isa::avx512_amx: decode on vpdpbusd, five tokens or more on the tiles, one arithmetic.
void tile_q4_k_avx512_amx(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                          float* y, int64_t ys) {
  if (n_tokens > Q4_KExactKernel::k_tokens) return Q4_KAmx::run(w, rb, n_rows, acts, n_tokens, y, ys);
  const QuantizedActs dealt = deal_acts<deal_qwords>(acts, n_tokens);
  tiling::tile_quant<Q4_KExactKernel>(w, rb, n_rows, dealt, n_tokens, y, ys);
}

}  // namespace kvc::kernels

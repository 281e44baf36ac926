// AVX-512 VNNI kernels for Q4_K, Q5_K and Q6_K weights x Q8_K activations (register tiles).
// GCC 12 flags the self-initialised "undefined" vectors inside its own AVX-512 intrinsics
// as uninitialised: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

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

template <typename Block>  // BlockQ4_K or BlockQ5_K
inline MinsQ4_K q4_k_mins(const Block& blk) {
  uint32_t words[4];
  unpack_q4_k_words(blk.scales, words);
  const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(words + 2)));
  return {_mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8)), _cvtsh_ss(blk.dmin)};
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
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(words));
    // int16 position 2l takes scale l / 2, position 2l + 1 the zero at index 8.
    const __m512i idx = _mm512_set_epi16(8, 7, 8, 7, 8, 6, 8, 6, 8, 5, 8, 5, 8, 4, 8, 4, 8, 3, 8, 3, 8, 2, 8, 2, 8, 1,
                                         8, 1, 8, 0, 8, 0);
    out->s = _mm512_permutexvar_epi16(idx, _mm512_zextsi128_si512(_mm_cvtepu8_epi16(bytes)));
    const MinsQ4_K mins = q4_k_mins(blk);
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

}  // namespace kvc::kernels

// AVX-512 VNNI kernels: activation quantization, Q4_0/Q8_0 and float dot products, the kernel set.
// GCC 12 flags the self-initialised "undefined" vectors inside its own AVX-512 intrinsics
// (_mm512_cvtepi32_ps, _mm512_inserti64x4, ...) as uninitialised: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/tile_dispatch.h"
#include "kernels/cpu/vec_dot.h"

namespace kvc::kernels {

// Q4_K, Q5_K and Q6_K weights, in vec_dot_kquant_avx512.cpp.
void tile_q4_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);
void tile_q6_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);
void tile_q5_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);
void tile_q4_k_avx512_amx(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                          float* y, int64_t ys);
// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights, in vec_dot_blocks32_avx512.cpp.
void tile_q4_1_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);
void tile_q5_0_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);
void tile_q5_1_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);
void tile_iq4_nl_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                             float* y, int64_t ys);
void tile_mxfp4_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                            float* y, int64_t ys);
// Q2_K and Q3_K weights, in vec_dot_lowbit_avx512.cpp.
void tile_q2_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);
void tile_q3_k_avx512_vnni(const uint8_t* w, size_t rb, int64_t n_rows, const QuantizedActs& acts, int64_t n_tokens,
                           float* y, int64_t ys);

namespace {

using tiling::ActTile;

// ---- activation quantization (bit-identical to the scalar version) ----

// Quantizes 16 values with multiplier id; returns them as int32 lanes and stores int8s.
inline __m512i quantize16(const float* x, __m512 id, int8_t* q) {
  const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), id));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(v));
  return v;
}

inline float abs_max(const float* x, int n) {
  __m512 m = _mm512_setzero_ps();
  for (int i = 0; i < n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  return _mm512_reduce_max_ps(m);
}

void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float amax = abs_max(x + 32 * b, 32);
    const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    quantize16(x + 32 * b, id, qs + 32 * b);
    quantize16(x + 32 * b + 16, id, qs + 32 * b + 16);
    d[b] = amax / 127.0f;
  }
}

void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float amax = abs_max(x + 256 * b, 256);
    const __m512 id = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (int g = 0; g < 16; ++g) {
      const int64_t i = 256 * b + 16 * g;
      bsums[i / 16] = static_cast<int16_t>(_mm512_reduce_add_epi32(quantize16(x + i, id, qs + i)));
    }
    d[b] = amax / 127.0f;
  }
}

// ---- Q4_0 and Q8_0 weights x Q8_0 activations ----
//
// One 512-bit step covers two 32-value blocks. vpdpbusd multiplies unsigned weight bytes by
// signed activation bytes, so weights are made unsigned (Q4_0: the nibble itself; Q8_0:
// q + 128) and the offset is removed by starting each accumulator at -offset * sum(a),
// computed once per token: lanes 0-7 then sum to block 0's exact dot, lanes 8-15 to block 1's.

inline __m512 pair_scales(__m128 two) {  // [s0 x 8, s1 x 8]
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(two));
}

// Prefill layout of four blocks (128 values), for weights and activations alike: dword lane j
// of `lo` holds values 4 * (j / 4) .. +3 of block j % 4, of `hi` values 16 + 4 * (j / 4) .. +3,
// so lanes j, j + 4, j + 8, j + 12 of both registers sum block j % 4, whose scale is then
// one 128-bit broadcast of the four block scales.
// z: 128-bit lane k holds 16 values of block k (values 0-15 for lo, 16-31 for hi).
inline __m512i deal_quad(__m512i z) {
  const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);  // j -> 4 (j % 4) + j / 4
  return _mm512_permutexvar_epi32(idx, z);
}

// Prefill layout of sixteen blocks (512 values), for weights and activations alike: 128-bit
// lane k of register 4h + j holds dword j of values 16h..16h+15 of blocks 4g + k, g = 0..3,
// at dword position g, so int32 lane 4k + g of all eight registers belongs to block 4g + k:
// eight chained vpdpbusd sum a block's whole dot in one lane.
// x: four registers, 128-bit lane k of x[g] holding 16 values of block 4g + k; transposed
// within each 128-bit lane (dword j of x[g] to dword g of x[j]).
inline void transpose_in_lanes(__m512i (&x)[4]) {
  const __m512i t0 = _mm512_unpacklo_epi32(x[0], x[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(x[0], x[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(x[2], x[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(x[2], x[3]);
  x[0] = _mm512_unpacklo_epi64(t0, t2);
  x[1] = _mm512_unpackhi_epi64(t0, t2);
  x[2] = _mm512_unpacklo_epi64(t1, t3);
  x[3] = _mm512_unpackhi_epi64(t1, t3);
}

// 512 activation bytes in order, in the sixteen-block layout.
inline void deal_hex_acts(const int8_t* in, __m512i (&q)[8]) {
  __m512i lo[4], hi[4];
  for (int g = 0; g < 4; ++g) {
    const __m512i a01 = _mm512_loadu_si512(in + 128 * g);
    const __m512i a23 = _mm512_loadu_si512(in + 128 * g + 64);
    lo[g] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(2, 0, 2, 0));
    hi[g] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 1, 3, 1));
  }
  transpose_in_lanes(lo);
  transpose_in_lanes(hi);
  for (int j = 0; j < 4; ++j) {
    q[j] = lo[j];
    q[4 + j] = hi[j];
  }
}

// A prepared unit of a row: sixteen blocks (N = 8), or four (deal_quad) in the row's tail.
template <int N>
struct PreparedUnit {
  __m512i q[N];  // signed weights; a quad: q[0], q[1] (lo, hi)
  __m512i corr;  // (16 int32) -128 * the sum of each lane's weights
  __m512 d;      // each lane's block scale; a quad: the four scales in each 128-bit lane
};

struct Q4_0Weights {
  using Block = BlockQ4_0;
  static constexpr int k_offset = 8;
  static constexpr bool k_hex = true;  // prefill and decode in the sixteen-block layout
  // 64 unsigned weight bytes in natural order: [b0 0-15, b0 16-31, b1 0-15, b1 16-31].
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs));
    const __m128i x1 = k_pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs)) : _mm_setzero_si128();
    const __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), x1, 1);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
    return _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F));
  }
  // [d0, d1, d2, d3] x 4 of blocks 0-3 (18 bytes apart: halves 0, 9, 18, 27 of 64 bytes).
  static __m512 scales4x4(const Block* blk) {
    const __m512i idx = _mm512_set4_epi32(0x001B0012, 0x00090000, 0x001B0012, 0x00090000);
    const __m512i h = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512(blk));
    return _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  }
  // Unsigned q of blocks 0-3, dealt as deal_quad.
  static void unsigned_dealt(const Block* blk, __m512i& lo, __m512i& hi) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    auto qs = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i].qs)); };
    const __m256i y01 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(0)), qs(1), 1);
    const __m256i y23 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(2)), qs(3), 1);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y01), y23, 1);
    lo = deal_quad(_mm512_and_si512(z, low4));
    hi = deal_quad(_mm512_and_si512(_mm512_srli_epi16(z, 4), low4));
  }
  // Unsigned q of blocks 0-15 in the sixteen-block layout: the packed bytes transposed
  // first (dword j of a block's bytes holds values 4j..4j+3 and 16+4j..16+4j+3), then split.
  static void unsigned_hex(const Block* blk, __m512i (&q)[8]) {
    auto qs = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i].qs)); };
    __m512i z[4];
    for (int g = 0; g < 4; ++g) {
      const __m256i y01 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(4 * g)), qs(4 * g + 1), 1);
      const __m256i y23 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(4 * g + 2)), qs(4 * g + 3), 1);
      z[g] = _mm512_inserti64x4(_mm512_castsi256_si512(y01), y23, 1);
    }
    transpose_in_lanes(z);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
      q[j] = _mm512_and_si512(z[j], low4);
      q[4 + j] = _mm512_and_si512(_mm512_srli_epi16(z[j], 4), low4);
    }
  }
  // The scales of blocks 0-15 in hex order (lane 4k + g: block 4g + k): each group of four
  // blocks lies within one 64-byte load, its scales at halves 0, 9, 18, 27.
  static __m512 scales_hex(const Block* blk) {
    const __m512i idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 27, 27, 27, 27, 18, 18, 18, 18,
                                         9, 9, 9, 9, 0, 0, 0, 0);
    __m512i h = _mm512_setzero_si512();
    for (int g = 0; g < 4; ++g)
      h = _mm512_mask_permutexvar_epi16(h, 0x1111u << g, idx, _mm512_loadu_si512(blk + 4 * g));
    return _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  }
  // Signed q - 8 of blocks 0-3, 128-bit lane k = block k: values 0-15 (lo), 16-31 (hi).
  static void signed_values(const Block* blk, __m512i& lo, __m512i& hi) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i eight = _mm512_set1_epi8(8);
    auto qs = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i].qs)); };
    const __m256i y01 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(0)), qs(1), 1);
    const __m256i y23 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(2)), qs(3), 1);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y01), y23, 1);
    lo = _mm512_sub_epi8(_mm512_and_si512(z, low4), eight);
    hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(z, 4), low4), eight);
  }
};

struct Q8_0Weights {
  using Block = BlockQ8_0;
  static constexpr int k_offset = 128;
  // Four-block groups only: in the sixteen-block layout Q8_0's prefill ran 30 % faster but its
  // decode 20 % slower (AMD EPYC, Zen 4), and decode is what a chat waits on most.
  static constexpr bool k_hex = false;
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
    const __m256i y1 =
        k_pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs)) : _mm256_setzero_si256();
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(y0), y1, 1), _mm512_set1_epi8(-128));
  }
  // [d0, d1, d2, d3] x 4 of blocks 0-3 (34 bytes apart: halves 0, 17, 34, 51 of 128 bytes).
  static __m512 scales4x4(const Block* blk) {
    const auto* b = reinterpret_cast<const uint8_t*>(blk);
    const __m512i idx = _mm512_set4_epi32(0x00330022, 0x00110000, 0x00330022, 0x00110000);
    const __m512i h = _mm512_permutex2var_epi16(_mm512_loadu_si512(b), idx, _mm512_loadu_si512(b + 64));
    return _mm512_cvtph_ps(_mm512_castsi512_si256(h));
  }
  // q + 128 of blocks 0-3, dealt as deal_quad.
  static void unsigned_dealt(const Block* blk, __m512i& lo, __m512i& hi) {
    auto y = [&](int i) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[i].qs)); };
    const __m512i z01 = _mm512_inserti64x4(_mm512_castsi256_si512(y(0)), y(1), 1);
    const __m512i z23 = _mm512_inserti64x4(_mm512_castsi256_si512(y(2)), y(3), 1);
    // lane j: block j % 4 (in z01 for blocks 0-1, z23 from index 16), its dword j / 4 (+ 4 for hi).
    const __m512i idx_lo = _mm512_set_epi32(27, 19, 11, 3, 26, 18, 10, 2, 25, 17, 9, 1, 24, 16, 8, 0);
    const __m512i idx_hi = _mm512_add_epi32(idx_lo, _mm512_set1_epi32(4));
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(-128));
    lo = _mm512_xor_si512(_mm512_permutex2var_epi32(z01, idx_lo, z23), flip);
    hi = _mm512_xor_si512(_mm512_permutex2var_epi32(z01, idx_hi, z23), flip);
  }
  static void signed_values(const Block* blk, __m512i& lo, __m512i& hi) {
    auto half = [&](int h) {
      auto qs = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i].qs + 16 * h)); };
      const __m256i y01 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(0)), qs(1), 1);
      const __m256i y23 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(2)), qs(3), 1);
      return _mm512_inserti64x4(_mm512_castsi256_si512(y01), y23, 1);
    };
    lo = half(0);
    hi = half(1);
  }
};

template <typename W>
struct Q8_0FormKernel {
  static constexpr int k_block = 32;
  static constexpr int k_rows = 4;
  static constexpr int k_tokens = 4;

  template <int R, int T, bool k_pair>
  static inline void step(const uint8_t* w, size_t rb, const ActTile& a, int64_t b, __m512 (&acc)[R][T]) {
    __m512i wq[R];
    __m512 wd[R];
    for (int r = 0; r < R; ++r) {
      const auto* blk = reinterpret_cast<const typename W::Block*>(w + r * rb) + b;
      tiling::prefetch_ahead<2 * sizeof(typename W::Block) + 63>(blk, rb, k_rows);
      wq[r] = W::template load<k_pair>(blk);
      const uint32_t d2 = blk[0].d | (k_pair ? static_cast<uint32_t>(blk[1].d) << 16 : 0u);
      wd[r] = pair_scales(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(d2))));
    }
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(W::k_offset));
    for (int t = 0; t < T; ++t) {
      const int8_t* q = a.qs + t * a.n_cols + 32 * b;
      const __m512i av = k_pair ? _mm512_loadu_si512(q) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, q);
      const __m512i init =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, _mm512_sub_epi8(_mm512_setzero_si512(), av));
      const float* d = a.d + t * a.d_stride + b;
      const __m512 ad =
          pair_scales(k_pair ? _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(d))) : _mm_load_ss(d));
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(init, wq[r], av);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd[r], ad), acc[r][t]);
      }
    }
  }

  // Pairs and single blocks from b on, then the horizontal sums.
  template <int R, int T>
  static inline void finish(const uint8_t* w, size_t rb, const ActTile& a, int64_t b, __m512 (&acc)[R][T], float* y,
                            int64_t ys) {
    const int64_t n_blocks = a.n_cols / 32;
    for (; b + 2 <= n_blocks; b += 2) step<R, T, true>(w, rb, a, b, acc);
    if (b < n_blocks) step<R, T, false>(w, rb, a, b, acc);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
  }

  // Prefill (tiling::tile_prepared): signed weights against unsigned activations a + 128,
  // both in the sixteen-block layout (a "hex": deal_hex_acts, W::unsigned_hex) where W has it,
  // and per four blocks (a "quad": deal_quad) in a row's tail; each dot starts at the weights'
  // own correction -128 * sum(w), so no per-token offset work is left. p: (n_units, R): a
  // row's hexes, then its tail's quads.
  using Prepared = PreparedUnit<W::k_hex ? 8 : 2>;
  static constexpr int k_prepared_rows = 4;
  static constexpr int k_prepared_tokens = W::k_hex ? 3 : 4;  // hex: 4 x 3 beat 3x3, 4x2, 3x4, 5x2, 4x4
  static constexpr int64_t k_hex_cols = W::k_hex ? 512 : 0x7fffffffffffffff;
  static int64_t n_hexes(int64_t n_cols) { return n_cols / k_hex_cols; }
  static int64_t n_tail_quads(int64_t n_cols) { return n_cols % k_hex_cols / 128; }
  static int64_t n_prepared(int64_t n_cols) { return n_hexes(n_cols) + n_tail_quads(n_cols); }
  static void prepare_hex(const typename W::Block* blk, Prepared* out) {
    const __m512i k128 = _mm512_set1_epi8(static_cast<char>(-128));
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(W::k_offset));
    __m512i sums = _mm512_setzero_si512();
    W::unsigned_hex(blk, out->q);
    for (__m512i& q : out->q) {
      q = _mm512_sub_epi8(q, offset);
      sums = _mm512_dpbusd_epi32(sums, k128, q);
    }
    out->d = W::scales_hex(blk);
    out->corr = _mm512_sub_epi32(_mm512_setzero_si512(), sums);
  }
  static void prepare(const uint8_t* row, int64_t n_cols, int64_t u, Prepared* out) {
    const auto* blocks = reinterpret_cast<const typename W::Block*>(row);
    const int64_t n_hex = n_hexes(n_cols);
    if constexpr (W::k_hex) {
      if (u < n_hex) return prepare_hex(blocks + 16 * u, out);
    }
    const auto* blk = blocks + 16 * n_hex + 4 * (u - n_hex);
    W::signed_values(blk, out->q[0], out->q[1]);
    out->q[0] = deal_quad(out->q[0]);
    out->q[1] = deal_quad(out->q[1]);
    const __m512i k128 = _mm512_set1_epi8(static_cast<char>(-128));
    const __m512i sums =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, out->q[0]), k128, out->q[1]);
    out->corr = _mm512_sub_epi32(_mm512_setzero_si512(), sums);
    const __m128i h = _mm_set_epi16(0, 0, 0, 0, static_cast<short>(blk[3].d), static_cast<short>(blk[2].d),
                                    static_cast<short>(blk[1].d), static_cast<short>(blk[0].d));
    out->d = _mm512_broadcast_f32x4(_mm_cvtph_ps(h));
  }

  // The activations as a + 128, dealt per sixteen blocks (their scales moved to the lanes of
  // their blocks, in a copy) and then per four; trailing blocks stay as they are.
  static QuantizedActs prepare_acts(const QuantizedActs& acts, int64_t n_tokens) {
    thread_local std::vector<int8_t> dealt;
    thread_local std::vector<float> dealt_d;
    const auto n = static_cast<size_t>(n_tokens * acts.n_cols);
    const int64_t d_stride = acts.n_cols / 32;
    if (dealt.size() < n) dealt.resize(n);
    const int64_t n_hex_cols = n_hexes(acts.n_cols) * 512;
    const bool moves_d = n_hex_cols > 0;  // without hexes every scale stays where it is
    if (moves_d && dealt_d.size() < static_cast<size_t>(n_tokens * d_stride))
      dealt_d.resize(static_cast<size_t>(n_tokens * d_stride));
    const int64_t n_quad_cols = n_hex_cols + n_tail_quads(acts.n_cols) * 128;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(-128));
    const __m512i hex_order =
        _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);  // lane 4k+g: 4g+k
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int8_t* in = acts.qs + t * acts.n_cols;
      int8_t* out = dealt.data() + t * acts.n_cols;
      const float* din = acts.d + t * d_stride;
      float* dout = moves_d ? dealt_d.data() + t * d_stride : nullptr;
      for (int64_t c = 0; c < n_hex_cols; c += 512) {
        __m512i q[8];
        deal_hex_acts(in + c, q);
        for (int k = 0; k < 8; ++k) _mm512_storeu_si512(out + c + 64 * k, _mm512_xor_si512(q[k], flip));
        _mm512_storeu_ps(dout + c / 32, _mm512_permutexvar_ps(hex_order, _mm512_loadu_ps(din + c / 32)));
      }
      for (int64_t c = n_hex_cols; c < n_quad_cols; c += 128) {
        const __m512i a01 = _mm512_loadu_si512(in + c);
        const __m512i a23 = _mm512_loadu_si512(in + c + 64);
        const __m512i lo = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(2, 0, 2, 0));
        const __m512i hi = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 1, 3, 1));
        _mm512_storeu_si512(out + c, _mm512_xor_si512(deal_quad(lo), flip));
        _mm512_storeu_si512(out + c + 64, _mm512_xor_si512(deal_quad(hi), flip));
      }
      // (with zero columns the buffers may be null, which memcpy does not allow even for 0 bytes)
      if (acts.n_cols > n_quad_cols) {
        std::memcpy(out + n_quad_cols, in + n_quad_cols, static_cast<size_t>(acts.n_cols - n_quad_cols));
      }
      if (moves_d && acts.n_cols > n_hex_cols) {
        std::memcpy(dout + n_hex_cols / 32, din + n_hex_cols / 32,
                    static_cast<size_t>(d_stride - n_hex_cols / 32) * sizeof(float));
      }
    }
    return {dealt.data(), moves_d ? dealt_d.data() : acts.d, acts.bsums, acts.n_cols};
  }

  // The tail's quads (a + 128 against units(n_hex + g)) and then its pairs and single blocks.
  template <int R, int T, typename Units>
  static void run_tail(Units units, const uint8_t* w, size_t rb, const ActTile& a, __m512 (&acc)[R][T], float* y,
                       int64_t ys) {
    const int64_t n_hex = n_hexes(a.n_cols), n_quads = n_tail_quads(a.n_cols);
    for (int64_t g = 0; g < n_quads; ++g) {
      const Prepared* pg = units(n_hex + g);
      const int64_t c = 512 * n_hex + 128 * g;
      for (int t = 0; t < T; ++t) {
        const int8_t* q = a.qs + t * a.n_cols + c;
        const __m512i alo = _mm512_loadu_si512(q);
        const __m512i ahi = _mm512_loadu_si512(q + 64);
        const __m512 ad = _mm512_broadcast_f32x4(_mm_loadu_ps(a.d + t * a.d_stride + c / 32));
        for (int r = 0; r < R; ++r) {
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(pg[r].corr, alo, pg[r].q[0]), ahi, pg[r].q[1]);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(pg[r].d, ad), acc[r][t]);
        }
      }
    }
    finish<R, T>(w, rb, a, 16 * n_hex + 4 * n_quads, acc, y, ys);
  }

  // p: (n_units, R). The hexes: eight chained vpdpbusd leave each block's whole dot in its
  // lane, and one float multiply-add per 512 values applies the sixteen blocks' scales.
  template <int R, int T>
  static void run_prepared(const Prepared* p, const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    const int64_t n_hex = n_hexes(a.n_cols);
    if constexpr (W::k_hex)
      for (int64_t h = 0; h < n_hex; ++h) {
        const Prepared* ph = p + h * R;
        // Loads are the limit (one 64-byte load per cycle on some cores, two vpdpbusd): each
        // register of weights serves T tokens and each of activations R rows.
        __m512i dots[R][T];
        for (int r = 0; r < R; ++r) {
          const __m512i corr = _mm512_load_si512(&ph[r].corr);
          for (int t = 0; t < T; ++t) dots[r][t] = corr;
        }
        for (int k = 0; k < 8; ++k) {
          __m512i wq[R];
          for (int r = 0; r < R; ++r) {
            wq[r] = _mm512_load_si512(&ph[r].q[k]);
            __asm__("" : "+v"(wq[r]));  // held in a register: the compiler would fold a load into each use
          }
          for (int t = 0; t < T; ++t) {
            const __m512i av = _mm512_loadu_si512(a.qs + t * a.n_cols + 512 * h + 64 * k);
            for (int r = 0; r < R; ++r) dots[r][t] = _mm512_dpbusd_epi32(dots[r][t], av, wq[r]);
          }
        }
        for (int t = 0; t < T; ++t) {
          const __m512 ad = _mm512_loadu_ps(a.d + t * a.d_stride + 16 * h);
          for (int r = 0; r < R; ++r)
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots[r][t]), _mm512_mul_ps(ph[r].d, ad), acc[r][t]);
        }
      }
    run_tail<R, T>([p](int64_t u) { return p + u * R; }, w, rb, a, acc, y, ys);
  }

  // Decode: rows streamed from memory and dealt as prepare() deals them, with unsigned weights
  // against signed activations and the offset removed per token instead: every lane's integer
  // and every float operation are run_prepared's, so the outputs are identical.
  template <int R, int T>
  static void run_streamed(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(-128));
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(W::k_offset));
    const __m512i zero = _mm512_setzero_si512();
    const int64_t n_hex = n_hexes(a.n_cols);
    if constexpr (W::k_hex)
      for (int64_t h = 0; h < n_hex; ++h) {
        __m512i init[T], sa[T][8];  // sa: the signed activations, for every row
        for (int t = 0; t < T; ++t) {
          init[t] = zero;
          for (int k = 0; k < 8; ++k) {
            sa[t][k] = _mm512_xor_si512(_mm512_loadu_si512(a.qs + t * a.n_cols + 512 * h + 64 * k), flip);
            init[t] = _mm512_dpbusd_epi32(init[t], offset, _mm512_sub_epi8(zero, sa[t][k]));
          }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const auto* blk = reinterpret_cast<const typename W::Block*>(w + r * rb) + 16 * h;
          // Twice prefetch_ahead's distance: a row's 512 values are taken in one burst, not
          // four rows side by side (measured: decode at parity with the quad layout only so).
          tiling::prefetch_ahead<16 * sizeof(typename W::Block) + 63>(blk, rb, 2 * k_rows);
          __m512i wq[8];
          W::unsigned_hex(blk, wq);
          const __m512 wd = W::scales_hex(blk);
          // Two chains of four (an exact integer sum either way): eight dependent vpdpbusd
          // would leave one token's decode waiting on their latency.
          __m512i even[T], odd[T];
          for (int t = 0; t < T; ++t) {
            even[t] = init[t];
            odd[t] = zero;
          }
          for (int k = 0; k < 8; k += 2)
            for (int t = 0; t < T; ++t) {
              even[t] = _mm512_dpbusd_epi32(even[t], wq[k], sa[t][k]);
              odd[t] = _mm512_dpbusd_epi32(odd[t], wq[k + 1], sa[t][k + 1]);
            }
          for (int t = 0; t < T; ++t)
            acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(even[t], odd[t])),
                                        _mm512_mul_ps(wd, _mm512_loadu_ps(a.d + t * a.d_stride + 16 * h)), acc[r][t]);
        }
      }
    const int64_t n_quads = n_tail_quads(a.n_cols);
    for (int64_t g = 0; g < n_quads; ++g) {
      const int64_t c = 512 * n_hex + 128 * g;
      __m512i wlo[R], whi[R];
      __m512 wd[R];
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const typename W::Block*>(w + r * rb) + c / 32;
        tiling::prefetch_ahead<4 * sizeof(typename W::Block) + 63>(blk, rb, k_rows);
        W::unsigned_dealt(blk, wlo[r], whi[r]);
        wd[r] = W::scales4x4(blk);
      }
      for (int t = 0; t < T; ++t) {
        const int8_t* q = a.qs + t * a.n_cols + c;
        const __m512i alo = _mm512_xor_si512(_mm512_loadu_si512(q), flip);
        const __m512i ahi = _mm512_xor_si512(_mm512_loadu_si512(q + 64), flip);
        const __m512i init = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, offset, _mm512_sub_epi8(zero, alo)), offset,
                                                 _mm512_sub_epi8(zero, ahi));
        const __m512 ad = _mm512_broadcast_f32x4(_mm_loadu_ps(a.d + t * a.d_stride + c / 32));
        for (int r = 0; r < R; ++r) {
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, wlo[r], alo), whi[r], ahi);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd[r], ad), acc[r][t]);
        }
      }
    }
    finish<R, T>(w, rb, a, 16 * n_hex + 4 * n_quads, acc, y, ys);
  }
};

// ---- float weights ----

struct F32Load {
  using Elem = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_tail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16Load {
  using Elem = uint16_t;
  static __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load_tail(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16Load {
  using Elem = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_tail(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

template <typename L, int T>
void float_rows(const uint8_t* w, size_t rb, int64_t n_rows, const float* x, int64_t n_cols, float* y, int64_t ys) {
  const __mmask16 tail = static_cast<__mmask16>((1u << (n_cols % 16)) - 1);
  const int64_t n_main = n_cols - n_cols % 16;
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* wr = reinterpret_cast<const typename L::Elem*>(w + r * rb);
    __m512 acc[T];
    for (auto& v : acc) v = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_main; i += 16) {
      const __m512 wv = L::load(wr + i);
      for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + t * n_cols + i), acc[t]);
    }
    if (tail) {
      const __m512 wv = L::load_tail(wr + n_main, tail);
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(tail, x + t * n_cols + n_main), acc[t]);
    }
    for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[t]);
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

const KernelSet& kernels_avx512_vnni() {
  static const KernelSet k{
      "avx512_vnni",
      quantize_q8_0,
      quantize_q8_k,
      tiling::tile_prepared<Q8_0FormKernel<Q4_0Weights>>,
      tile_q4_1_avx512_vnni,
      tile_q5_0_avx512_vnni,
      tile_q5_1_avx512_vnni,
      tile_iq4_nl_avx512_vnni,
      tiling::tile_prepared<Q8_0FormKernel<Q8_0Weights>>,
      tile_q2_k_avx512_vnni,
      tile_q3_k_avx512_vnni,
      tile_q4_k_avx512_vnni,
      tile_q5_k_avx512_vnni,
      tile_q6_k_avx512_vnni,
      tile_float<F32Load>,
      tile_float<F16Load>,
      tile_float<BF16Load>,
      tile_mxfp4_avx512_vnni,
  };
  return k;
}

const KernelSet& kernels_avx512_amx() {
  static const KernelSet k = [] {
    KernelSet s = kernels_avx512_vnni();
    s.name = "avx512_amx";
    s.q4_k = tile_q4_k_avx512_amx;
    return s;
  }();
  return k;
}

}  // namespace kvc::kernels

// AVX-512 VNNI kernels: activation quantization and register-tiled quantized dot products.
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

// Four blocks side by side, for one dot over 128 values: lanes 4k..4k+3 sum block k.
struct Quad {
  __m512i lo, hi;  // unsigned weights of values 0-15 / 16-31 of blocks 0-3
  __m512 d;        // [d0 x 4, d1 x 4, d2 x 4, d3 x 4]
};

inline __m512 quad_scales(uint16_t d0, uint16_t d1, uint16_t d2, uint16_t d3) {
  const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m128i h = _mm_set_epi16(0, 0, 0, 0, static_cast<short>(d3), static_cast<short>(d2), static_cast<short>(d1),
                                  static_cast<short>(d0));
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_cvtph_ps(h)));
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

struct PreparedQuad {
  __m512i lo, hi;  // signed weights, dealt as deal_quad
  __m512i corr;    // (16 int32) -128 * the sum of lane j's 8 weights in lo and hi
  float d[4];      // the four block scales
};

struct Q4_0Weights {
  using Block = BlockQ4_0;
  static constexpr int k_offset = 8;
  // 64 unsigned weight bytes in natural order: [b0 0-15, b0 16-31, b1 0-15, b1 16-31].
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs));
    const __m128i x1 = k_pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs)) : _mm_setzero_si128();
    const __m256i y = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), x1, 1);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y), _mm256_srli_epi16(y, 4), 1);
    return _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F));
  }
  // The low nibbles of blocks 0-3 are values 0-15, the high nibbles values 16-31.
  static Quad load_quad(const Block* blk) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    auto qs = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i].qs)); };
    const __m256i y01 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(0)), qs(1), 1);
    const __m256i y23 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(2)), qs(3), 1);
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(y01), y23, 1);
    return {_mm512_and_si512(z, low4), _mm512_and_si512(_mm512_srli_epi16(z, 4), low4),
            quad_scales(blk[0].d, blk[1].d, blk[2].d, blk[3].d)};
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
  template <bool k_pair>
  static __m512i load(const Block* blk) {
    const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
    const __m256i y1 = k_pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs)) : _mm256_setzero_si256();
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(y0), y1, 1), _mm512_set1_epi8(-128));
  }
  // q + 128 of bytes 0-15 (lo) and 16-31 (hi) of blocks 0-3.
  static Quad load_quad(const Block* blk) {
    const __m512i flip = _mm512_set1_epi8(-128);
    auto half = [&](int h) {
      auto qs = [&](int i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[i].qs + 16 * h)); };
      const __m256i y01 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(0)), qs(1), 1);
      const __m256i y23 = _mm256_inserti128_si256(_mm256_castsi128_si256(qs(2)), qs(3), 1);
      return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(y01), y23, 1), flip);
    };
    return {half(0), half(1), quad_scales(blk[0].d, blk[1].d, blk[2].d, blk[3].d)};
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
      const __m512i init = _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, _mm512_sub_epi8(_mm512_setzero_si512(), av));
      const float* d = a.d + t * a.d_stride + b;
      const __m512 ad = pair_scales(k_pair ? _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(d))) : _mm_load_ss(d));
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(init, wq[r], av);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd[r], ad), acc[r][t]);
      }
    }
  }

  // Four blocks per step. Blocks 0-3's values 0-15 fill one register and values 16-31
  // another, so one dot covers 128 values and lanes 4k..4k+3 sum to block k; the
  // activations are regrouped to match with two 128-bit lane shuffles per token.
  // quads: (R) weight quads of this step, from registers or from a prepared tile.
  template <int R, int T>
  static inline void quad_dots(const Quad* quads, const ActTile& a, int64_t b, __m512 (&acc)[R][T]) {
    const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(W::k_offset));
    for (int t = 0; t < T; ++t) {
      const int8_t* q = a.qs + t * a.n_cols + 32 * b;
      const __m512i a01 = _mm512_loadu_si512(q);
      const __m512i a23 = _mm512_loadu_si512(q + 64);
      const __m512i alo = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i ahi = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 1, 3, 1));
      const __m512i zero = _mm512_setzero_si512();
      const __m512i init = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, offset, _mm512_sub_epi8(zero, alo)), offset,
                                               _mm512_sub_epi8(zero, ahi));
      const __m512 ad = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_loadu_ps(a.d + t * a.d_stride + b)));
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, quads[r].lo, alo), quads[r].hi, ahi);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(quads[r].d, ad), acc[r][t]);
      }
    }
  }

  template <int R, int T>
  static inline void quad_step(const uint8_t* w, size_t rb, const ActTile& a, int64_t b, __m512 (&acc)[R][T]) {
    Quad quads[R];
    for (int r = 0; r < R; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(w + r * rb) + b;
      tiling::prefetch_ahead<4 * sizeof(BlockQ4_0) + 63>(blk, rb, k_rows);
      quads[r] = W::load_quad(blk);
    }
    quad_dots<R, T>(quads, a, b, acc);
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
  // both dealt per four blocks as deal_quad does; each dot starts at the weights' own
  // correction -128 * sum(w), so no per-token offset work is left. p: (n_quads, R).
  using Prepared = PreparedQuad;
  static constexpr int k_prepared_rows = 4;
  static constexpr int k_prepared_tokens = 4;
  static int64_t n_prepared(int64_t n_cols) { return n_cols / 128; }
  static void prepare(const uint8_t* row, int64_t u, PreparedQuad* out) {
    const auto* blk = reinterpret_cast<const typename W::Block*>(row) + 4 * u;
    W::signed_values(blk, out->lo, out->hi);
    out->lo = deal_quad(out->lo);
    out->hi = deal_quad(out->hi);
    const __m512i k128 = _mm512_set1_epi8(static_cast<char>(-128));
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, out->lo), k128, out->hi);
    out->corr = _mm512_sub_epi32(_mm512_setzero_si512(), sums);
    const __m128i h = _mm_set_epi16(0, 0, 0, 0, static_cast<short>(blk[3].d), static_cast<short>(blk[2].d),
                                    static_cast<short>(blk[1].d), static_cast<short>(blk[0].d));
    _mm_storeu_ps(out->d, _mm_cvtph_ps(h));
  }

  // The activations as a + 128 dealt per four blocks; trailing blocks stay as they are.
  static QuantizedActs prepare_acts(const QuantizedActs& acts, int64_t n_tokens) {
    thread_local std::vector<int8_t> dealt;
    const auto n = static_cast<size_t>(n_tokens * acts.n_cols);
    if (dealt.size() < n) dealt.resize(n);
    const int64_t n_quad_cols = acts.n_cols / 128 * 128;
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(-128));
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int8_t* in = acts.qs + t * acts.n_cols;
      int8_t* out = dealt.data() + t * acts.n_cols;
      for (int64_t c = 0; c < n_quad_cols; c += 128) {
        const __m512i a01 = _mm512_loadu_si512(in + c);
        const __m512i a23 = _mm512_loadu_si512(in + c + 64);
        const __m512i lo = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(2, 0, 2, 0));
        const __m512i hi = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 1, 3, 1));
        _mm512_storeu_si512(out + c, _mm512_xor_si512(deal_quad(lo), flip));
        _mm512_storeu_si512(out + c + 64, _mm512_xor_si512(deal_quad(hi), flip));
      }
      std::memcpy(out + n_quad_cols, in + n_quad_cols, static_cast<size_t>(acts.n_cols - n_quad_cols));
    }
    return {dealt.data(), acts.d, acts.bsums, acts.n_cols};
  }

  // units(g): the R prepared rows of quad g. The same arithmetic for every source and tile
  // size, so a token's outputs do not depend on how many tokens share the call.
  template <int R, int T, typename Units>
  static void run_units(Units units, const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_quads = a.n_cols / 128;
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_quads; ++g) {
      const PreparedQuad* pg = units(g);
      for (int t = 0; t < T; ++t) {
        const int8_t* q = a.qs + t * a.n_cols + 128 * g;
        const __m512i alo = _mm512_loadu_si512(q);
        const __m512i ahi = _mm512_loadu_si512(q + 64);
        const __m512 ad = _mm512_broadcast_f32x4(_mm_loadu_ps(a.d + t * a.d_stride + 4 * g));
        for (int r = 0; r < R; ++r) {
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(pg[r].corr, alo, pg[r].lo), ahi, pg[r].hi);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                                      _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_loadu_ps(pg[r].d)), ad), acc[r][t]);
        }
      }
    }
    finish<R, T>(w, rb, a, 4 * n_quads, acc, y, ys);
  }

  template <int R, int T>
  static void run_prepared(const PreparedQuad* p, const uint8_t* w, size_t rb, const ActTile& a, float* y,
                           int64_t ys) {
    run_units<R, T>([p](int64_t g) { return p + g * R; }, w, rb, a, y, ys);
  }

  // Decode: rows streamed from memory, dealt as run_units's, with unsigned weights against
  // signed activations and the offset removed per token instead: every lane's integer and
  // every float operation are the same as run_units's, so the outputs are identical.
  template <int R, int T>
  static void run_streamed(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_quads = a.n_cols / 128;
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(-128));
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(W::k_offset));
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t g = 0; g < n_quads; ++g) {
      __m512i wlo[R], whi[R];
      __m512 wd[R];
      for (int r = 0; r < R; ++r) {
        const auto* blk = reinterpret_cast<const typename W::Block*>(w + r * rb) + 4 * g;
        tiling::prefetch_ahead<4 * sizeof(typename W::Block) + 63>(blk, rb, k_rows);
        W::unsigned_dealt(blk, wlo[r], whi[r]);
        const __m128i h = _mm_set_epi16(0, 0, 0, 0, static_cast<short>(blk[3].d), static_cast<short>(blk[2].d),
                                        static_cast<short>(blk[1].d), static_cast<short>(blk[0].d));
        wd[r] = _mm512_broadcast_f32x4(_mm_cvtph_ps(h));
      }
      for (int t = 0; t < T; ++t) {
        const int8_t* q = a.qs + t * a.n_cols + 128 * g;
        const __m512i alo = _mm512_xor_si512(_mm512_loadu_si512(q), flip);
        const __m512i ahi = _mm512_xor_si512(_mm512_loadu_si512(q + 64), flip);
        const __m512i init = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, offset, _mm512_sub_epi8(zero, alo)), offset,
                                                 _mm512_sub_epi8(zero, ahi));
        const __m512 ad = _mm512_broadcast_f32x4(_mm_loadu_ps(a.d + t * a.d_stride + 4 * g));
        for (int r = 0; r < R; ++r) {
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, wlo[r], alo), whi[r], ahi);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd[r], ad), acc[r][t]);
        }
      }
    }
    finish<R, T>(w, rb, a, 4 * n_quads, acc, y, ys);
  }

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 32;
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    int64_t b = 0;
    if constexpr (W::k_offset == 8) {
      for (; b + 4 <= n_blocks; b += 4) quad_step<R, T>(w, rb, a, b, acc);
    }
    finish<R, T>(w, rb, a, b, acc, y, ys);
  }
};

// ---- Q4_K and Q6_K weights x Q8_K activations ----
//
// Sub-block scales are small integers, so each super-block's sum stays integer:
// vpmaddubsw (unsigned weight x signed activation -> pairs of int16) then vpdpwssd with the
// sub-block scale; one float multiply-add per super-block, row and token.

inline float hsum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

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
  const __m512i tr = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);  // 128-bit lane i: dwords i, 4+i, 8+i, 12+i
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

inline MinsQ4_K q4_k_mins(const BlockQ4_K& blk) {
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

struct PreparedQ4_K {
  __m512i q[4];  // (4 registers, 64 bytes) the dealt unsigned nibbles
  __m512i s;     // (16 int32) lane l: scale of sub-block l / 2 in its low int16, 0 above
  __m256i m;     // (16 int16) per bsum: the min of its sub-block
  float d, dmin;
};

struct Q4_KKernel {
  static constexpr int k_block = 256;
  static constexpr int k_rows = 3;
  static constexpr int k_tokens = 4;

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    __m512 acc[R][T];
    __m256 macc[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm512_setzero_ps();
        macc[r][t] = _mm256_setzero_ps();
      }
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m512i sc16[R];  // lanes 0..7: the 8 sub-block scales as int16
      __m256i m16[R];   // lane g: min of sub-block g / 2 (pairs with bsums[g])
      float wd[R], wdmin[R];
      for (int r = 0; r < R; ++r) {
        const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w + r * rb)[b];
        tiling::prefetch_ahead<sizeof(BlockQ4_K) + 63>(&blk, rb, k_rows);
        uint32_t words[4];
        unpack_q4_k_words(blk.scales, words);
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(words));
        sc16[r] = _mm512_castsi128_si512(_mm_cvtepu8_epi16(bytes));
        const __m128i m8 = _mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8));
        m16[r] = _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8));
        wd[r] = _cvtsh_ss(blk.d);
        wdmin[r] = _cvtsh_ss(blk.dmin);
      }
      __m512i iacc[R][T];
      for (auto& row : iacc)
        for (auto& v : row) v = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        // int16 lanes 0-15 take scale 2k (low nibbles), lanes 16-31 scale 2k+1 (high nibbles).
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(2 * k)),
                                               _mm256_set1_epi16(static_cast<short>(2 * k + 1)), 1);
        __m512i wq[R], ws[R];
        for (int r = 0; r < R; ++r) {
          const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(w + r * rb)[b];
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * k));
          const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
          wq[r] = _mm512_and_si512(z, low4);
          ws[r] = _mm512_permutexvar_epi16(idx, sc16[r]);
        }
        for (int t = 0; t < T; ++t) {
          const __m512i av = _mm512_loadu_si512(a.qs + t * a.n_cols + 256 * b + 64 * k);
          for (int r = 0; r < R; ++r)
            iacc[r][t] = _mm512_dpwssd_epi32(iacc[r][t], _mm512_maddubs_epi16(wq[r], av), ws[r]);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r) {
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r][t]), _mm512_set1_ps(wd[r] * ad), acc[r][t]);
          macc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(bs, m16[r])),
                                       _mm256_set1_ps(wdmin[r] * ad), macc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]) - hsum256(macc[r][t]);
  }

  using Prepared = PreparedQ4_K;  // 4 x 4 measured fastest of 2..6 x 2..6
  static constexpr int k_prepared_rows = 4;
  static constexpr int k_prepared_tokens = 4;
  static int64_t n_prepared(int64_t n_cols) { return n_cols / 256; }
  static void prepare(const uint8_t* row, int64_t u, PreparedQ4_K* out) {
    const BlockQ4_K& blk = reinterpret_cast<const BlockQ4_K*>(row)[u];
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
    q4_k_dealt(blk, out->q);
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
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(dots[r][t], pb[r].s)),
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
        const __m512 ad2 = pair_scales(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(a.d + t * a.d_stride + b))));
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
                    [p](int64_t b, int r) { return MinsQ4_K{p[b * R + r].m, p[b * R + r].dmin}; }, a, y, ys);
  }

  // Decode: each super-block prepared in registers just before use.
  template <int R, int T>
  static void run_streamed(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    PreparedQ4_K tmp[R];
    auto units = [&](int64_t b) {
      for (int r = 0; r < R; ++r) {
        tiling::prefetch_ahead<sizeof(BlockQ4_K) + 63>(reinterpret_cast<const BlockQ4_K*>(w + r * rb) + b, rb, k_rows);
        prepare(w + r * rb, b, &tmp[r]);
      }
      return static_cast<const PreparedQ4_K*>(tmp);
    };
    auto mins = [&](int64_t b, int r) { return q4_k_mins(reinterpret_cast<const BlockQ4_K*>(w + r * rb)[b]); };
    run_units<R, T>(units, mins, a, y, ys);
  }
};

struct Q6_KKernel {
  static constexpr int k_block = 256;
  static constexpr int k_rows = 3;
  static constexpr int k_tokens = 4;

  template <int R, int T>
  static void run(const uint8_t* w, size_t rb, const ActTile& a, float* y, int64_t ys) {
    const int64_t n_blocks = a.n_cols / 256;
    __m512 acc[R][T];
    for (auto& row : acc)
      for (auto& v : row) v = _mm512_setzero_ps();
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    for (int64_t b = 0; b < n_blocks; ++b) {
      __m512i sc16[R];  // lanes 0..15: the 16 scales as int16
      __m256i sc32[R];  // 32 * scale, for the -32 offset through bsums
      float wd[R];
      for (int r = 0; r < R; ++r) {
        const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(w + r * rb)[b];
        tiling::prefetch_ahead<sizeof(BlockQ6_K) + 63>(&blk, rb, k_rows);
        const __m256i s = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
        sc16[r] = _mm512_castsi256_si512(s);
        sc32[r] = _mm256_slli_epi16(s, 5);
        wd[r] = _cvtsh_ss(blk.d);
      }
      __m512i iacc[R][T];
      for (auto& row : iacc)
        for (auto& v : row) v = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        // int16 lane i of the low (high) 64 values of half h takes scale 8h + i/8 (8h + 4 + i/8).
        const __m512i lane = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1,
                                              1, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i idx_lo = _mm512_add_epi16(lane, _mm512_set1_epi16(static_cast<short>(8 * h)));
        const __m512i idx_hi = _mm512_add_epi16(lane, _mm512_set1_epi16(static_cast<short>(8 * h + 4)));
        __m512i wlo[R], whi[R], slo[R], shi[R];
        for (int r = 0; r < R; ++r) {
          const BlockQ6_K& blk = reinterpret_cast<const BlockQ6_K*>(w + r * rb)[b];
          const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
          const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
          wlo[r] = _mm512_or_si512(_mm512_and_si512(ql, low4), _mm512_and_si512(_mm512_slli_epi16(hz, 4), bits45));
          whi[r] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), _mm512_and_si512(hz, bits45));
          slo[r] = _mm512_permutexvar_epi16(idx_lo, sc16[r]);
          shi[r] = _mm512_permutexvar_epi16(idx_hi, sc16[r]);
        }
        for (int t = 0; t < T; ++t) {
          const int8_t* q = a.qs + t * a.n_cols + 256 * b + 128 * h;
          const __m512i alo = _mm512_loadu_si512(q);
          const __m512i ahi = _mm512_loadu_si512(q + 64);
          for (int r = 0; r < R; ++r) {
            iacc[r][t] = _mm512_dpwssd_epi32(iacc[r][t], _mm512_maddubs_epi16(wlo[r], alo), slo[r]);
            iacc[r][t] = _mm512_dpwssd_epi32(iacc[r][t], _mm512_maddubs_epi16(whi[r], ahi), shi[r]);
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums + t * (a.n_cols / 16) + 16 * b));
        const float ad = a.d[t * a.d_stride + b];
        for (int r = 0; r < R; ++r) {
          const __m512i offset = _mm512_zextsi256_si512(_mm256_madd_epi16(sc32[r], bs));
          const __m512i isum = _mm512_sub_epi32(iacc[r][t], offset);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(wd[r] * ad), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) y[t * ys + r] = _mm512_reduce_add_ps(acc[r][t]);
  }

  using Prepared = PreparedQ6_K;  // 4 x 3 measured fastest of 2..6 x 2..6
  static constexpr int k_prepared_rows = 4;
  static constexpr int k_prepared_tokens = 3;
  static int64_t n_prepared(int64_t n_cols) { return n_cols / 256; }
  static void prepare(const uint8_t* row, int64_t u, PreparedQ6_K* out) {
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
        prepare(w + r * rb, b, &tmp[r]);
      }
      return static_cast<const PreparedQ6_K*>(tmp);
    };
    run_units<R, T>(units, a, y, ys);
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
  static __m512 load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
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
void tile_float(const uint8_t* w, size_t rb, int64_t n_rows, const float* x, int64_t n_cols, int64_t n_tokens,
                float* y, int64_t ys) {
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
      tiling::tile_prepared<Q8_0FormKernel<Q8_0Weights>>,
      tiling::tile_prepared<Q4_KKernel>,
      tiling::tile_prepared<Q6_KKernel>,
      tile_float<F32Load>,
      tile_float<F16Load>,
      tile_float<BF16Load>,
  };
  return k;
}

}  // namespace kvc::kernels

// GGUF block formats: hand-built blocks against the format's formulas, and quantize round trips.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/quant.h"
#include "kernels/quant_test_helpers.h"

using namespace kvc::kernels;
using namespace kvc::kernels::test;

namespace {

// Element i of a Q4_K block: sub-block j = i / 32; byte 32 * (j / 2) + i % 32; low nibble
// for even j, high for odd.
float q4k_element(const BlockQ4_K& b, int i) {
  const int j = i / 32;
  const uint8_t byte = b.qs[32 * (j / 2) + i % 32];
  const int q = (j % 2 == 0) ? byte % 16 : byte / 16;
  int sc, m;
  q4k_scale_min(b.scales, j, sc, m);
  return fp16_to_f32(b.d) * static_cast<float>(sc) * static_cast<float>(q) -
         fp16_to_f32(b.dmin) * static_cast<float>(m);
}

// Element i of a Q6_K block: half h = i / 128; quarter k = (i % 128) / 32; lane l = i % 32.
// Low bits: ql[64h + l + 32 (k odd)], nibble k / 2; high bits: qh[32h + l] bits 2k+1..2k;
// scale: scales[8h + 2k + l / 16].
float q6k_element(const BlockQ6_K& b, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  const uint8_t lo_byte = b.ql[64 * h + l + (k % 2 == 1 ? 32 : 0)];
  const int lo = k >= 2 ? lo_byte / 16 : lo_byte % 16;
  const int hi = (b.qh[32 * h + l] / (1 << (2 * k))) % 4;
  const int sc = b.scales[8 * h + 2 * k + l / 16];
  return fp16_to_f32(b.d) * static_cast<float>(sc) * static_cast<float>(lo + 16 * hi - 32);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() & 0xFF);
  return v;
}

enum class Dist { normal, uniform, zero, outliers, constant, positive };

std::vector<float> make_data(Dist dist, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) {
    switch (dist) {
      case Dist::normal: x[i] = 0.02f * normal(rng); break;
      case Dist::uniform: x[i] = uniform(rng); break;
      case Dist::zero: x[i] = 0.0f; break;
      case Dist::outliers: x[i] = normal(rng) * (i % 97 == 5 ? 60.0f : 1.0f); break;
      case Dist::constant: x[i] = -1.25f; break;
      case Dist::positive: x[i] = 1.0f + std::fabs(normal(rng)); break;
    }
  }
  return x;
}

const char* dist_name(Dist d) {
  switch (d) {
    case Dist::normal: return "normal";
    case Dist::uniform: return "uniform";
    case Dist::zero: return "zero";
    case Dist::outliers: return "outliers";
    case Dist::constant: return "constant";
    case Dist::positive: return "positive";
  }
  return "?";
}

float amax_of(const float* x, int n) {
  float a = 0.0f;
  for (int i = 0; i < n; ++i) a = std::fmax(a, std::fabs(x[i]));
  return a;
}
double amax_d(const float* x, int n) { return static_cast<double>(amax_of(x, n)); }

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  return dequant(t, q.data(), n);
}

// Largest ratio of |error| to the bound bound_of(block values, index in block) over x.
template <typename Bound>
double worst_ratio(const std::vector<float>& x, const std::vector<float>& y, int block, Bound bound_of) {
  double worst = 0.0;
  for (size_t b = 0; b < x.size(); b += static_cast<size_t>(block)) {
    for (int i = 0; i < block; ++i) {
      const double err = std::fabs(static_cast<double>(x[b + i]) - static_cast<double>(y[b + i]));
      const double bound = bound_of(&x[b], i);
      if (err == 0.0) continue;
      worst = std::fmax(worst, bound > 0 ? err / bound : std::numeric_limits<double>::infinity());
    }
  }
  return worst;
}

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = static_cast<double>(x[i]), d = xi - static_cast<double>(y[i]);
    e += d * d;
    s += xi * xi;
  }
  return s > 0 ? std::sqrt(e / s) : std::sqrt(e);
}

}  // namespace

TEST_CASE("Q8_0 hand-built block dequantizes to d * q", "[kernels]") {
  BlockQ8_0 b{};
  b.d = k_half_0_5;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  const auto y = dequant(DType::q8_0, &b, 32);
  for (int j = 0; j < 32; ++j) REQUIRE(y[j] == 0.5f * static_cast<float>(j * 8 - 128));
}

TEST_CASE("Q4_0 hand-built block: low nibbles are values 0..15, high nibbles 16..31", "[kernels]") {
  BlockQ4_0 b{};
  b.d = k_half_two;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(DType::q4_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    REQUIRE(y[j] == 2.0f * static_cast<float>(j - 8));
    REQUIRE(y[j + 16] == 2.0f * static_cast<float>(7 - j));
  }
}

TEST_CASE("Q4_K hand-built block: 6-bit scales and mins of sub-blocks 4..7 borrow high bits", "[kernels]") {
  BlockQ4_K b{};
  b.d = k_half_one;
  b.dmin = k_half_one;
  b.scales[1] = 0xC0;   // bits 7..6 = high bits of sub-block 5's scale (3); scale of 1 = 0
  b.scales[9] = 0x02;   // low 4 bits of sub-block 5's scale; its min's low bits = 0
  b.scales[6] = 0x80;   // bits 7..6 = high bits of sub-block 6's min (2); min of 2 = 0
  b.scales[10] = 0x50;  // low 4 bits of sub-block 6's min (5); its scale's low bits = 0
  b.scales[0] = 3;      // sub-block 0: scale 3, min 0
  std::memset(b.qs, 0x00, sizeof b.qs);
  for (int l = 0; l < 32; ++l) b.qs[64 + l] = 0x10;  // sub-block 5 (high nibbles of group 2): q = 1
  for (int l = 0; l < 32; ++l) b.qs[l] = 0x07;       // sub-block 0 (low nibbles of group 0): q = 7
  const auto y = dequant(DType::q4_k, &b, 256);
  for (int i = 0; i < 256; ++i) {
    const int j = i / 32;
    const float expected = j == 0 ? 21.0f : j == 5 ? 50.0f : j == 6 ? -37.0f : 0.0f;
    INFO("value " << i);
    REQUIRE(y[i] == expected);
  }
}

TEST_CASE("Q4_K random blocks match the element formula", "[kernels]") {
  const int n_blocks = 16;
  auto bytes = random_bytes(n_blocks * sizeof(BlockQ4_K), 11);
  std::vector<BlockQ4_K> blocks(n_blocks);
  std::memcpy(blocks.data(), bytes.data(), bytes.size());
  for (int i = 0; i < n_blocks; ++i) {  // finite scales of moderate size
    blocks[i].d = f32_to_fp16(0.01f * static_cast<float>(i + 1));
    blocks[i].dmin = f32_to_fp16(-0.003f * static_cast<float>(i + 2) * (i % 2 ? 1.0f : -1.0f));
  }
  const auto y = dequant(DType::q4_k, blocks.data(), n_blocks * 256);
  for (int b = 0; b < n_blocks; ++b) {
    for (int i = 0; i < 256; ++i) { REQUIRE(y[b * 256 + i] == Approx(q4k_element(blocks[b], i)).margin(1e-6)); }
  }
}

TEST_CASE("Q6_K hand-built block: ql, qh and scales interleave as the format says", "[kernels]") {
  BlockQ6_K b{};
  b.d = k_half_one;
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(k + 1);
  b.qh[5] = 0xC0;        // value 96 + 5 = 101: high bits 3
  b.ql[37] = 0xA0;       // value 101: low bits 10 (high nibble of ql[32 + 5])
  b.qh[32 + 20] = 0x04;  // second half, value 128 + 32 + 20 = 180: high bits 1 (bits 3..2)
  b.ql[64 + 52] = 0x0F;  // value 180: low bits 15 (low nibble of ql[64 + 32 + 20])
  const auto y = dequant(DType::q6_k, &b, 256);
  for (int i = 0; i < 256; ++i) {
    // Scale of value i: sub-blocks of 16 run in order, value i uses scales[i / 16].
    const float sc = static_cast<float>(i / 16 + 1);
    float q = -32.0f;
    if (i == 101) q = 10 + 48 - 32;
    if (i == 180) q = 15 + 16 - 32;
    INFO("value " << i);
    REQUIRE(y[i] == sc * q);
  }
}

TEST_CASE("Q6_K random blocks match the element formula", "[kernels]") {
  const int n_blocks = 16;
  auto bytes = random_bytes(n_blocks * sizeof(BlockQ6_K), 12);
  std::vector<BlockQ6_K> blocks(n_blocks);
  std::memcpy(blocks.data(), bytes.data(), bytes.size());
  for (int i = 0; i < n_blocks; ++i) blocks[i].d = f32_to_fp16(0.001f * static_cast<float>(i + 1));
  const auto y = dequant(DType::q6_k, blocks.data(), n_blocks * 256);
  for (int b = 0; b < n_blocks; ++b) {
    for (int i = 0; i < 256; ++i) REQUIRE(y[b * 256 + i] == Approx(q6k_element(blocks[b], i)).margin(1e-6));
  }
}

TEST_CASE("Q5_0 quantizer follows llama.cpp: the largest magnitude maps to level 0 of 32", "[kernels]") {
  std::vector<float> x(32, 0.0f);
  x[3] = -8.0f;   // largest magnitude, negative: d = 0.5
  x[4] = 8.0f;    // its opposite lies one step past level 31 and saturates
  x[5] = 1.0f;    // exactly 2 steps: level 18
  x[20] = 0.25f;  // half a step: rounds up to level 17
  BlockQ5_0 b{};
  quantize_row(DType::q5_0, x.data(), &b, 32);
  REQUIRE(fp16_to_f32(b.d) == 0.5f);
  const auto y = dequant(DType::q5_0, &b, 32);
  REQUIRE(y[3] == -8.0f);
  REQUIRE(y[4] == 7.5f);
  REQUIRE(y[5] == 1.0f);
  REQUIRE(y[20] == 0.5f);
  REQUIRE(y[0] == 0.0f);
}

TEST_CASE("Q4_1 and Q5_1 quantizers follow llama.cpp: the block's minimum is m, its range 15 or 31 steps",
          "[kernels]") {
  std::vector<float> x(32, 1.0f);
  x[7] = -2.0f;  // the minimum
  x[9] = 13.0f;  // the maximum: range 15
  BlockQ4_1 b4{};
  quantize_row(DType::q4_1, x.data(), &b4, 32);
  REQUIRE(fp16_to_f32(b4.d) == 1.0f);
  REQUIRE(fp16_to_f32(b4.m) == -2.0f);
  REQUIRE(dequant(DType::q4_1, &b4, 32) == x);  // every value lies on the grid
  x[9] = 29.0f;                                 // range 31
  BlockQ5_1 b5{};
  quantize_row(DType::q5_1, x.data(), &b5, 32);
  REQUIRE(fp16_to_f32(b5.d) == 1.0f);
  REQUIRE(dequant(DType::q5_1, &b5, 32) == x);
}

TEST_CASE("Q4_0 quantizer follows llama.cpp: the largest magnitude maps to level 0", "[kernels]") {
  std::vector<float> x(32, 0.0f);
  x[3] = -5.0f;    // largest magnitude, negative: d = 0.625
  x[4] = 5.0f;     // its opposite lies one step past level 15 and saturates
  x[5] = 1.25f;    // exactly 2 steps: level 10
  x[6] = 0.3125f;  // exactly half a step: rounds up to level 9
  BlockQ4_0 b{};
  quantize_row(DType::q4_0, x.data(), &b, 32);
  REQUIRE(fp16_to_f32(b.d) == 0.625f);
  REQUIRE((b.qs[3] & 0x0F) == 0);
  REQUIRE((b.qs[4] & 0x0F) == 15);
  REQUIRE((b.qs[5] & 0x0F) == 10);
  REQUIRE((b.qs[6] & 0x0F) == 9);
  REQUIRE((b.qs[0] & 0x0F) == 8);
  REQUIRE((b.qs[0] >> 4) == 8);

  x[20] = 6.0f;  // now a positive maximum: d = -0.75
  quantize_row(DType::q4_0, x.data(), &b, 32);
  REQUIRE(fp16_to_f32(b.d) == -0.75f);
  REQUIRE((b.qs[4] >> 4) == 0);
  const auto y = dequant(DType::q4_0, &b, 32);
  REQUIRE(y[20] == 6.0f);
}

TEST_CASE("Q8_0 quantizer: d = amax / 127 and q = round(x / d)", "[kernels]") {
  auto x = make_data(Dist::uniform, 64, 3);
  std::vector<BlockQ8_0> b(2);
  quantize_row(DType::q8_0, x.data(), b.data(), 64);
  for (int k = 0; k < 2; ++k) {
    const float amax = amax_of(&x[32 * k], 32);
    REQUIRE(b[k].d == f32_to_fp16(amax / 127.0f));
    for (int j = 0; j < 32; ++j) {
      REQUIRE(b[k].qs[j] == static_cast<int>(std::round(x[32 * k + j] / (amax / 127.0f))));
    }
  }
}

TEST_CASE("Q8_K quantizer: float d, rounded q and the 16-value sums", "[kernels]") {
  auto x = make_data(Dist::outliers, 512, 4);
  std::vector<BlockQ8_K> b(2);
  quantize_row(DType::q8_k, x.data(), b.data(), 512);
  for (int k = 0; k < 2; ++k) {
    const float d = amax_of(&x[256 * k], 256) / 127.0f;
    REQUIRE(b[k].d == d);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) {
        const int q = static_cast<int>(std::round(x[256 * k + 16 * g + j] / d));
        REQUIRE(b[k].qs[16 * g + j] == q);
        sum += q;
      }
      REQUIRE(b[k].bsums[g] == sum);
    }
  }
  const auto y = dequant(DType::q8_k, b.data(), 512);
  for (int i = 0; i < 512; ++i) REQUIRE(y[i] == b[i / 256].d * static_cast<float>(b[i / 256].qs[i % 256]));
}

TEST_CASE("F32, F16 and BF16 rows convert exactly", "[kernels]") {
  std::vector<float> x16, xb;
  for (int i = -1024; i < 1024; ++i) x16.push_back(static_cast<float>(i) * 0.125f);  // 11 bits: exact in f16
  for (int i = -255; i < 256; ++i) xb.push_back(static_cast<float>(i) * 0.125f);     // 8 bits: exact in bf16
  x16.push_back(65504.0f);                                                           // largest f16
  x16.push_back(std::ldexp(1.0f, -24));                                              // smallest f16 subnormal
  x16.push_back(-0.0f);
  xb.push_back(std::ldexp(1.0f, 120));
  xb.push_back(std::ldexp(-1.0f, -130));  // bf16 keeps float's subnormals
  xb.push_back(-0.0f);
  REQUIRE(round_trip(DType::f32, x16) == x16);
  REQUIRE(round_trip(DType::f16, x16) == x16);
  REQUIRE(round_trip(DType::bf16, xb) == xb);
  // Inexact values land within half an ulp of the 11-bit (f16) and 8-bit (bf16) mantissa.
  auto r = make_data(Dist::uniform, 1000, 5);
  const auto y16 = round_trip(DType::f16, r);
  const auto yb = round_trip(DType::bf16, r);
  for (size_t i = 0; i < r.size(); ++i) {
    REQUIRE(std::fabs(y16[i] - r[i]) <= std::fabs(r[i]) * std::ldexp(1.0f, -11) + std::ldexp(1.0f, -25));
    REQUIRE(std::fabs(yb[i] - r[i]) <= std::fabs(r[i]) * std::ldexp(1.0f, -8));
  }
}

TEST_CASE("Quantize round trips stay within each format's step", "[kernels]") {
  const int64_t n = 256 * 8;
  const double eps16 = std::ldexp(1.0, -10);  // relative fp16 rounding of a stored scale, with margin
  for (Dist dist : {Dist::normal, Dist::uniform, Dist::zero, Dist::outliers, Dist::constant, Dist::positive}) {
    INFO("distribution " << dist_name(dist));
    const auto x = make_data(dist, n, 7 + static_cast<uint32_t>(dist));

    // Q8_0: half a step d = amax / 127, plus the fp16 rounding of d times |q| <= 127.
    const auto y8 = round_trip(DType::q8_0, x);
    CHECK(worst_ratio(x, y8, 32, [](const float* b, int) {
            const double d = amax_d(b, 32) / 127.0;
            return d * (0.5 + 127 * 0.5 * std::ldexp(1.0, -10)) + 1e-30;
          }) <= 1.0);

    // Q4_0: one step d = amax / 8 (the opposite of the maximum saturates at level 15).
    const auto y4 = round_trip(DType::q4_0, x);
    CHECK(worst_ratio(x, y4, 32,
                      [eps16](const float* b, int) { return amax_d(b, 32) / 8.0 * (1.0 + 8 * eps16) + 1e-30; }) <= 1.0);

    // Q4_K: the sub-block's own grid h = range / 15 (range includes 0), one step h for the
    // search, plus 6-bit rounding of scale and min against the super-block's largest ones.
    const auto yk = round_trip(DType::q4_k, x);
    CHECK(worst_ratio(x, yk, 256, [](const float* b, int i) {
            double h_max = 0, m_max = 0, h_own = 0;
            for (int j = 0; j < 8; ++j) {
              double lo = 0, hi = 0;
              for (int l = 0; l < 32; ++l) {
                lo = std::fmin(lo, static_cast<double>(b[32 * j + l]));
                hi = std::fmax(hi, static_cast<double>(b[32 * j + l]));
              }
              h_max = std::fmax(h_max, (hi - lo) / 15);
              m_max = std::fmax(m_max, -lo);
              if (j == i / 32) h_own = (hi - lo) / 15;
            }
            return h_own + 15 * (h_max * 1.1 / 63) / 2 + (m_max / 63) / 2 + 1e-30;
          }) <= 1.0);

    // Q6_K: the sub-block's step s = amax16 / 32, plus the 8-bit rounding of the scale
    // against the super-block's largest (error up to |q| = 32 times half that step).
    const auto y6 = round_trip(DType::q6_k, x);
    CHECK(worst_ratio(x, y6, 256, [](const float* b, int i) {
            const double s_own = amax_d(b + 16 * (i / 16), 16) / 32.0;
            const double s_max = amax_d(b, 256) / 32.0;
            return s_own + 32 * (s_max * 1.1 / 127) / 2 + 1e-30;
          }) <= 1.0);

    if (dist == Dist::normal || dist == Dist::uniform) {
      // Typical quality on smooth data (uniform rounding error = step / sqrt(12)).
      CHECK(rel_rms(x, y8) < 0.01);
      CHECK(rel_rms(x, y4) < 0.12);
      CHECK(rel_rms(x, yk) < 0.08);
      CHECK(rel_rms(x, y6) < 0.02);
    }
    if (dist == Dist::zero) {
      for (const auto* y : {&y8, &y4, &yk, &y6}) CHECK(*y == x);
    }
  }
}

TEST_CASE("Round trips of Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K and Q5_K stay within each format's step", "[kernels]") {
  const int64_t n = 256 * 8;
  const double eps16 = std::ldexp(1.0, -10);  // relative fp16 rounding of a stored scale, with margin
  auto range_of = [](const float* b, int len) {
    double lo = 0, hi = 0;
    for (int l = 0; l < len; ++l) {
      lo = std::fmin(lo, static_cast<double>(b[l]));
      hi = std::fmax(hi, static_cast<double>(b[l]));
    }
    return std::pair{lo, hi};
  };
  for (Dist dist : {Dist::normal, Dist::uniform, Dist::zero, Dist::outliers, Dist::constant, Dist::positive}) {
    INFO("distribution " << dist_name(dist));
    const auto x = make_data(dist, n, 17 + static_cast<uint32_t>(dist));
    // Q4_1 / Q5_1: half a step of the min/max grid, plus fp16 rounding of d (times the level)
    // and of m.
    for (const auto& [t, top] : {std::pair{DType::q4_1, 15}, {DType::q5_1, 31}}) {
      INFO(dtype_name(t));
      CHECK(worst_ratio(x, round_trip(t, x), 32, [&, top = top](const float* b, int) {
              float lo = b[0], hi = b[0];
              for (int l = 1; l < 32; ++l) lo = std::fmin(lo, b[l]), hi = std::fmax(hi, b[l]);
              const double d = (static_cast<double>(hi) - static_cast<double>(lo)) / top;
              return d * (0.5 + top * eps16) + std::fabs(static_cast<double>(lo)) * eps16 + 1e-30;
            }) <= 1.0);
    }
    // Q5_0: one step amax / 16 (the opposite of the maximum saturates at level 31).
    CHECK(worst_ratio(x, round_trip(DType::q5_0, x), 32,
                      [&](const float* b, int) { return amax_d(b, 32) / 16.0 * (1.0 + 16 * eps16) + 1e-30; }) <= 1.0);
    // IQ4_NL: the scale search may clip the largest value a little; the widest gap between
    // levels is 24 of 127, so every value stays within a fifth of the block's largest.
    CHECK(worst_ratio(x, round_trip(DType::iq4_nl, x), 32,
                      [&](const float* b, int) { return amax_d(b, 32) * 0.2 + 1e-30; }) <= 1.0);
    // Q5_K: Q4_K's bound with 31 steps per sub-block.
    CHECK(worst_ratio(x, round_trip(DType::q5_k, x), 256, [&](const float* b, int i) {
            double h_max = 0, m_max = 0, h_own = 0;
            for (int j = 0; j < 8; ++j) {
              const auto [lo, hi] = range_of(b + 32 * j, 32);
              h_max = std::fmax(h_max, (hi - lo) / 31);
              m_max = std::fmax(m_max, -lo);
              if (j == i / 32) h_own = (hi - lo) / 31;
            }
            return h_own + 31 * (h_max * 1.1 / 63) / 2 + (m_max / 63) / 2 + 1e-30;
          }) <= 1.0);
    // Q2_K: 3 steps per sub-block of 16 and 4-bit scales and mins, each possibly one step
    // off their nearest (the refinement): the sub-block's own step plus one scale step times
    // the top level and one min step.
    CHECK(worst_ratio(x, round_trip(DType::q2_k, x), 256, [&](const float* b, int i) {
            double h_max = 0, m_max = 0, h_own = 0;
            for (int j = 0; j < 16; ++j) {
              const auto [lo, hi] = range_of(b + 16 * j, 16);
              h_max = std::fmax(h_max, (hi - lo) / 3);
              m_max = std::fmax(m_max, -lo);
              if (j == i / 16) h_own = (hi - lo) / 3;
            }
            return h_own + 3 * 1.5 * (h_max * 1.1 / 15) + 1.5 * (m_max * 1.1 / 15) + 1e-30;
          }) <= 1.0);
    // Q3_K: levels -4..3 per sub-block of 16, 6-bit signed scales against the largest.
    CHECK(worst_ratio(x, round_trip(DType::q3_k, x), 256, [&](const float* b, int i) {
            const double s_own = amax_d(b + 16 * (i / 16), 16) / 3.0;
            const double s_max = amax_d(b, 256) / 3.0;
            return s_own + 4 * 1.5 * (s_max * 1.1 / 32) + 1e-30;
          }) <= 1.0);
    if (dist == Dist::normal || dist == Dist::uniform) {
      // Typical quality on smooth data (measured on normal data: Q4_1 0.078, Q5_0 0.043,
      // Q5_1 0.038, IQ4_NL 0.075, Q5_K 0.035, Q3_K 0.144, Q2_K 0.258).
      INFO("rel RMS: Q4_1 " << rel_rms(x, round_trip(DType::q4_1, x)) << " Q5_0 "
                            << rel_rms(x, round_trip(DType::q5_0, x)) << " Q5_1 "
                            << rel_rms(x, round_trip(DType::q5_1, x)) << " IQ4_NL "
                            << rel_rms(x, round_trip(DType::iq4_nl, x)) << " Q5_K "
                            << rel_rms(x, round_trip(DType::q5_k, x)) << " Q3_K "
                            << rel_rms(x, round_trip(DType::q3_k, x)) << " Q2_K "
                            << rel_rms(x, round_trip(DType::q2_k, x)));
      CHECK(rel_rms(x, round_trip(DType::q4_1, x)) < 0.10);
      CHECK(rel_rms(x, round_trip(DType::q5_0, x)) < 0.05);
      CHECK(rel_rms(x, round_trip(DType::q5_1, x)) < 0.05);
      CHECK(rel_rms(x, round_trip(DType::iq4_nl, x)) < 0.09);
      CHECK(rel_rms(x, round_trip(DType::q5_k, x)) < 0.045);
      CHECK(rel_rms(x, round_trip(DType::q3_k, x)) < 0.18);
      CHECK(rel_rms(x, round_trip(DType::q2_k, x)) < 0.32);
    }
    if (dist == Dist::zero) {
      for (DType t : {DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q2_k, DType::q3_k, DType::q5_k})
        CHECK(round_trip(t, x) == x);
    }
  }
}

TEST_CASE("Quantizers survive NaN and Inf and keep the finite values", "[kernels]") {
  auto x = make_data(Dist::uniform, 256, 9);  // values in (-3, 3)
  x[1] = std::numeric_limits<float>::quiet_NaN();
  x[40] = std::numeric_limits<float>::infinity();
  x[77] = -std::numeric_limits<float>::infinity();
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::iq4_nl, DType::q2_k,
                  DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k, DType::q8_k}) {
    INFO(dtype_name(t));
    const int block = static_cast<int>(dtype_info(t).block_elems);
    auto block_amax = [&](int i) {
      float a = 0;
      for (int j = i / block * block; j < (i / block + 1) * block; ++j) {
        if (std::isfinite(x[j])) a = std::fmax(a, std::fabs(x[j]));
      }
      return a;
    };
    const auto y = round_trip(t, x);
    for (size_t i = 0; i < y.size(); ++i) REQUIRE(std::isfinite(y[i]));
    // NaN becomes 0 and +-Inf its block's largest finite magnitude, each within one step of
    // the format (on (-3, 3): Q2_K's 3 steps of up to 2, Q3_K's of ~ 3 / 4 (-4..3), the
    // 4-bit ones' 3 / 8).
    const float tol = t == DType::q2_k ? 1.5f : t == DType::q3_k ? 1.0f : 3.0f / 8.0f * 1.01f;
    REQUIRE(std::fabs(y[1]) <= tol);
    REQUIRE(std::fabs(y[40] - block_amax(40)) <= tol);
    REQUIRE(std::fabs(y[77] + block_amax(77)) <= tol);
    REQUIRE(std::fabs(y[100] - x[100]) <= tol);
  }
  const auto y16 = round_trip(DType::f16, x);
  REQUIRE(std::isnan(y16[1]));
  REQUIRE(std::isinf(y16[40]));
}

TEST_CASE("can_quantize_to covers every implemented type", "[kernels]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::iq4_nl, DType::q2_k, DType::q3_k, DType::q4_k, DType::q5_k, DType::q6_k, DType::q8_k}) {
    REQUIRE(can_quantize_to(t));
  }
  REQUIRE_FALSE(can_quantize_to(static_cast<DType>(9)));   // Q8_1: not implemented
  REQUIRE_FALSE(can_quantize_to(static_cast<DType>(23)));  // IQ4_XS: not implemented
}

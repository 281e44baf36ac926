// Block layouts of Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K and Q5_K: hand-built and random blocks
// against element formulas written here from the format's description (quant.h).
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cpu/quant.h"
#include "kernels/quant_test_helpers.h"

using namespace kvc::kernels;
using namespace kvc::kernels::test;

namespace {

// Element i of a Q4_1 / Q5_0 / Q5_1 block: nibble i % 16 of qs[i % 16] (high for i >= 16),
// the fifth bit bit i % 8 of qh[i / 8].
template <typename Block>
float q5_element(const Block& b, int i) {
  int q = i < 16 ? b.qs[i] % 16 : b.qs[i - 16] / 16;
  if constexpr (!std::is_same_v<Block, BlockQ4_1>) q += 16 * ((b.qh[i / 8] >> (i % 8)) % 2);
  if constexpr (std::is_same_v<Block, BlockQ5_0>) {
    return static_cast<float>(q - 16) * fp16_to_f32(b.d);
  } else {
    return static_cast<float>(q) * fp16_to_f32(b.d) + fp16_to_f32(b.m);
  }
}

// Element i of a Q2_K / Q3_K block: quarter k = (i % 128) / 32 of half h = i / 128, lane
// l = i % 32; 2 bits at 2k of qs[32h + l]; Q3_K's third bit is bit 4h + k of hmask[l].
float q2k_element(const BlockQ2_K& b, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  const int q = (b.qs[32 * h + l] >> (2 * k)) % 4;
  const int sc = b.scales[i / 16] % 16, m = b.scales[i / 16] / 16;
  return fp16_to_f32(b.d) * static_cast<float>(sc) * static_cast<float>(q) -
         fp16_to_f32(b.dmin) * static_cast<float>(m);
}
float q3k_element(const BlockQ3_K& b, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32, j = i / 16;
  const int q = (b.qs[32 * h + l] >> (2 * k)) % 4 - ((b.hmask[l] >> (4 * h + k)) % 2 ? 0 : 4);
  const int lo = j < 8 ? b.scales[j] % 16 : b.scales[j - 8] / 16;
  const int hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) % 4;
  return fp16_to_f32(b.d) * static_cast<float>(lo + 16 * hi - 32) * static_cast<float>(q);
}
// Q5_K: Q4_K's element plus 16 * bit (i / 32) of qh[i % 32].
float q5k_element(const BlockQ5_K& b, int i) {
  const int j = i / 32;
  const uint8_t byte = b.qs[32 * (j / 2) + i % 32];
  const int q = ((j % 2 == 0) ? byte % 16 : byte / 16) + 16 * ((b.qh[i % 32] >> j) % 2);
  int sc, m;
  q4k_scale_min(b.scales, j, sc, m);
  return fp16_to_f32(b.d) * static_cast<float>(sc) * static_cast<float>(q) -
         fp16_to_f32(b.dmin) * static_cast<float>(m);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() & 0xFF);
  return v;
}

}  // namespace

TEST_CASE("Q4_1, Q5_0 and Q5_1 hand-built blocks: nibbles, fifth bits from qh and the offset m", "[kernels]") {
  BlockQ5_1 b{};
  b.d = k_half_two;
  b.m = k_half_0_5;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  b.qh[0] = 0x01;  // value 0: + 16
  b.qh[2] = 0x80;  // value 23 (bit 23): + 16
  auto y = dequant(DType::q5_1, &b, 32);
  for (int j = 0; j < 32; ++j) {
    const int q = (j < 16 ? j : 31 - j) + (j == 0 || j == 23 ? 16 : 0);
    INFO("value " << j);
    REQUIRE(y[j] == 2.0f * static_cast<float>(q) + 0.5f);
  }
  BlockQ5_0 c{};
  c.d = k_half_one;
  std::memcpy(c.qs, b.qs, 16);
  std::memcpy(c.qh, b.qh, 4);
  y = dequant(DType::q5_0, &c, 32);
  for (int j = 0; j < 32; ++j)
    REQUIRE(y[j] == static_cast<float>((j < 16 ? j : 31 - j) + (j == 0 || j == 23 ? 16 : 0) - 16));
  BlockQ4_1 e{};
  e.d = k_half_two;
  e.m = f32_to_fp16(-3.0f);
  std::memcpy(e.qs, b.qs, 16);
  y = dequant(DType::q4_1, &e, 32);
  for (int j = 0; j < 32; ++j) REQUIRE(y[j] == 2.0f * static_cast<float>(j < 16 ? j : 31 - j) - 3.0f);
}

TEST_CASE("IQ4_NL hand-built block: each nibble picks one of the 16 fixed levels", "[kernels]") {
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  BlockIQ4_NL b{};
  b.d = k_half_0_5;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(DType::iq4_nl, &b, 32);
  for (int j = 0; j < 16; ++j) {
    REQUIRE(y[j] == 0.5f * static_cast<float>(levels[j]));
    REQUIRE(y[j + 16] == 0.5f * static_cast<float>(levels[15 - j]));
  }
}

TEST_CASE("Q2_K, Q3_K and Q5_K hand-built blocks: the bit positions the format describes", "[kernels]") {
  BlockQ2_K b2{};
  b2.d = k_half_one;
  b2.dmin = k_half_0_5;
  for (int s = 0; s < 16; ++s) b2.scales[s] = static_cast<uint8_t>((s % 15 + 1) | ((s % 4) << 4));
  b2.qs[32 + 7] = 0x30;  // value 128 + 64 + 7 = 199 (half 1, quarter 2): q = 3
  auto y = dequant(DType::q2_k, &b2, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 16;
    INFO("Q2_K value " << i);
    REQUIRE(y[i] == static_cast<float>(s % 15 + 1) * (i == 199 ? 3.0f : 0.0f) - 0.5f * static_cast<float>(s % 4));
  }
  BlockQ3_K b3{};
  b3.d = k_half_one;
  b3.scales[3] = 0x05;              // scale 3: low bits 5
  b3.scales[11] = 0x02;             // scale 3: high bits 2 (bits 1..0 of byte 8 + 3) -> 37 - 32 = 5
  b3.scales[5] = 0x40;              // scale 13: low bits 4 (high nibble of byte 5)
  b3.scales[9] = 0xC0;              // scale 13: high bits 3 (bits 7..6 of byte 8 + 1) -> 52 - 32 = 20
  std::memset(b3.hmask, 0xFF, 32);  // every q = low bits, no -4
  b3.qs[18] = 0x0C;                 // value 32 + 18 = 50 (half 0, quarter 1; sub-block 3): low bits 3
  b3.hmask[23] = 0xBF;              // value 128 + 64 + 23 = 215 (bit 4 + 2 clear; sub-block 13): q = 0 - 4
  y = dequant(DType::q3_k, &b3, 256);
  for (int i = 0; i < 256; ++i) {
    const int s = i / 16;
    const float sc = s == 3 ? 5.0f : s == 13 ? 20.0f : -32.0f;
    const float q = i == 50 ? 3.0f : i == 215 ? -4.0f : 0.0f;
    INFO("Q3_K value " << i);
    REQUIRE(y[i] == sc * q);
  }
  BlockQ5_K b5{};
  b5.d = k_half_one;
  b5.scales[2] = 2;      // sub-block 2: scale 2, min 0
  b5.qs[64 + 9] = 0x03;  // value 128 + 9 (sub-block 4, low nibble of group 2): 3
  b5.qh[9] = 0x14;       // bit 2: value 64 + 9 (sub-block 2) + 16; bit 4: value 137 + 16
  b5.scales[8] = 0x01;   // sub-block 4: scale 1 (low 4 bits of byte 8), min 0
  y = dequant(DType::q5_k, &b5, 256);
  for (int i = 0; i < 256; ++i) {
    const float expected = i == 73 ? 2.0f * 16.0f : i == 137 ? 1.0f * 19.0f : 0.0f;
    INFO("Q5_K value " << i);
    REQUIRE(y[i] == expected);
  }
}

TEST_CASE("Q4_1, Q5_0, Q5_1, Q2_K, Q3_K and Q5_K random blocks match the element formula", "[kernels]") {
  const int n = 16;
  auto check = [&](auto blocks, DType t, auto element, auto fix) {
    auto bytes = random_bytes(sizeof(blocks[0]) * n, 13 + static_cast<uint32_t>(t));
    std::memcpy(blocks.data(), bytes.data(), bytes.size());
    for (int i = 0; i < n; ++i) fix(blocks[static_cast<size_t>(i)], i);
    const int be = static_cast<int>(dtype_info(t).block_elems);
    const auto y = dequant(t, blocks.data(), n * be);
    for (int b = 0; b < n; ++b) {
      for (int i = 0; i < be; ++i) {
        INFO(dtype_name(t) << " block " << b << " value " << i);
        REQUIRE(y[static_cast<size_t>(b * be + i)] == Approx(element(blocks[static_cast<size_t>(b)], i)).margin(1e-6));
      }
    }
  };
  auto scale = [](int i) { return f32_to_fp16(0.01f * static_cast<float>(i + 1)); };
  check(std::vector<BlockQ4_1>(n), DType::q4_1, q5_element<BlockQ4_1>, [&](BlockQ4_1& b, int i) {
    b.d = scale(i);
    b.m = scale(i + 3);
  });
  check(std::vector<BlockQ5_0>(n), DType::q5_0, q5_element<BlockQ5_0>, [&](BlockQ5_0& b, int i) { b.d = scale(i); });
  check(std::vector<BlockQ5_1>(n), DType::q5_1, q5_element<BlockQ5_1>, [&](BlockQ5_1& b, int i) {
    b.d = scale(i);
    b.m = scale(i + 5);
  });
  check(std::vector<BlockQ2_K>(n), DType::q2_k, q2k_element, [&](BlockQ2_K& b, int i) {
    b.d = scale(i);
    b.dmin = scale(i + 1);
  });
  check(std::vector<BlockQ3_K>(n), DType::q3_k, q3k_element, [&](BlockQ3_K& b, int i) { b.d = scale(i); });
  check(std::vector<BlockQ5_K>(n), DType::q5_k, q5k_element, [&](BlockQ5_K& b, int i) {
    b.d = scale(i);
    b.dmin = scale(i + 2);
  });
}

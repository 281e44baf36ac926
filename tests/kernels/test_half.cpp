// Half and bfloat16 conversions: exact on every half, round-to-nearest-even from float.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "kernels/cpu/quant.h"

using namespace kvc::kernels;

TEST_CASE("fp16 round-trips every finite half exactly", "[kernels]") {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    const float f = fp16_to_f32(hh);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(fp16_to_f32(f32_to_fp16(f))));
      continue;
    }
    REQUIRE(f32_to_fp16(f) == hh);
  }
}

TEST_CASE("fp16 conversion rounds to nearest even", "[kernels]") {
  REQUIRE(fp16_to_f32(0x3c00) == 1.0f);
  REQUIRE(fp16_to_f32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  REQUIRE(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  REQUIRE(f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  REQUIRE(f32_to_fp16(70000.0f) == 0x7c00);  // overflow to inf
  REQUIRE(f32_to_fp16(-0.0f) == 0x8000);
}

TEST_CASE("bf16 conversion rounds to nearest even", "[kernels]") {
  REQUIRE(bf16_to_f32(f32_to_bf16(1.5f)) == 1.5f);
  uint32_t bits = 0x3f808000u;  // exactly halfway between two bf16 values, lower is even
  float f;
  std::memcpy(&f, &bits, 4);
  REQUIRE(f32_to_bf16(f) == 0x3f80);
  REQUIRE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

// Helpers shared by the block-format tests: half-precision constants, dequantizing a row, and
// Q4_K's packed scales read from the format's description (quant.h), not from our code.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/quant.h"

namespace kvc::kernels::test {

constexpr uint16_t k_half_one = 0x3c00;  // 1.0
constexpr uint16_t k_half_two = 0x4000;  // 2.0
constexpr uint16_t k_half_0_5 = 0x3800;  // 0.5

inline std::vector<float> dequant(DType t, const void* src, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, src, y.data(), n);
  return y;
}

// Q4_K (and Q5_K) sub-block j's 6-bit scale and min, read bit by bit from the 12 packed bytes.
inline void q4k_scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] % 64;
    m = s[j + 4] % 64;
    return;
  }
  sc = (s[j + 4] % 16) + 16 * (s[j - 4] / 64);
  m = (s[j + 4] / 16) + 16 * (s[j] / 64);
}

}  // namespace kvc::kernels::test

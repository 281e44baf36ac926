// Internal to the scalar (de)quantizers: shared rounding and input clean-up, and the per-type
// routines that quant.cpp's dispatch calls (32-value types there, k-quants in quant_k.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/quant.h"

namespace kvc::kernels::detail {

constexpr int k_qk = 32;     // values per Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL block
constexpr int k_qk_k = 256;  // values per k-quant super-block

// Rounds v to the nearest integer (halves away from zero) and clamps it to [lo, hi];
// v is finite here (inputs are sanitized first), but the float clamp keeps the cast defined.
inline int round_clamp(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (!(v < static_cast<float>(hi))) return hi;
  const int t = static_cast<int>(v);  // toward zero; v - t is exact
  const float frac = v - static_cast<float>(t);
  return t + (frac >= 0.5f) - (frac <= -0.5f);
}

// Copies n values into out, replacing NaN by 0 and +-Inf by +-(largest finite magnitude),
// so that a stray non-finite value neither crashes the quantizer nor poisons its block.
void sanitize(const float* x, int n, float* out);

void dequantize_q2_k(const BlockQ2_K* b, float* y, int64_t n_blocks);
void dequantize_q3_k(const BlockQ3_K* b, float* y, int64_t n_blocks);
void dequantize_q4_k(const BlockQ4_K* b, float* y, int64_t n_blocks);
void dequantize_q5_k(const BlockQ5_K* b, float* y, int64_t n_blocks);
void dequantize_q6_k(const BlockQ6_K* b, float* y, int64_t n_blocks);
void dequantize_q8_k(const BlockQ8_K* b, float* y, int64_t n_blocks);
void quantize_q2_k(const float* x, BlockQ2_K* b, int64_t n_blocks);
void quantize_q3_k(const float* x, BlockQ3_K* b, int64_t n_blocks);
void quantize_q4_k(const float* x, BlockQ4_K* b, int64_t n_blocks);
void quantize_q5_k(const float* x, BlockQ5_K* b, int64_t n_blocks);
void quantize_q6_k(const float* x, BlockQ6_K* b, int64_t n_blocks);
void quantize_q8_k(const float* x, BlockQ8_K* b, int64_t n_blocks);

}  // namespace kvc::kernels::detail

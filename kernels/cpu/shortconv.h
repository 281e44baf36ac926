// lfm2's gated short convolution, one token at a time over a per-sequence state (a depthwise causal conv).
#pragma once

#include <cstdint>

namespace kvc::kernels {

// One token of a short-convolution layer of width n with L = l_cache taps (L >= 2):
//   bcx = | B (n) | C (n) | x (n) |     (the in_proj row)
//   u = B * x;  conv_c = sum_k taps[c L + k] * w_k[c], w = the L - 1 earlier u rows, oldest
//   first, then u;  y = C * conv.
// state: (L - 1, n) floats, row 0 the oldest earlier u; shifted by one row, u appended.
void shortconv_step(const float* bcx, int64_t n, const float* taps, int l_cache, float* state, float* y);

}  // namespace kvc::kernels

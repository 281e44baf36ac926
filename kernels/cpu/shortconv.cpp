// lfm2's gated short convolution over a per-sequence state, one token at a time.
#include "kernels/cpu/shortconv.h"

namespace kvc::kernels {

void shortconv_step(const float* bcx, int64_t n, const float* taps, int l_cache, float* state, float* y) {
  const float* b = bcx;
  const float* cg = bcx + n;
  const float* x = bcx + 2 * n;
  const int64_t d = l_cache - 1;
  for (int64_t c = 0; c < n; ++c) {
    const float u = b[c] * x[c];
    const float* w = taps + c * l_cache;
    float acc = 0.0f;
    for (int64_t k = 0; k < d; ++k) acc += w[k] * state[k * n + c];
    acc += w[d] * u;
    for (int64_t k = 0; k + 1 < d; ++k) state[k * n + c] = state[(k + 1) * n + c];
    state[(d - 1) * n + c] = u;
    y[c] = cg[c] * acc;
  }
}

}  // namespace kvc::kernels

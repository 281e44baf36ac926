// Scalar reference implementations of the ops kernels: plain loops; the long reductions of
// rmsnorm and softmax accumulate in double, so the reference is the accurate side of every
// SIMD comparison.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/ops_impl.h"
#include "kernels/cpu/quant.h"

namespace kvc::kernels {
namespace {

void rmsnorm_scalar(const float* x, const float* w, int64_t n, float eps, float* out) {
  // out = x / sqrt(mean(x^2) + eps) * w
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + static_cast<double>(eps)));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv_rms * w[i];
}

void silu_mul_scalar(const float* gate, const float* up, int64_t n, float* out) {
  // out = gate / (1 + exp(-gate)) * up; exp overflowing to inf gives -0, not NaN.
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add_inplace_scalar(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void softmax_inplace_scalar(float* x, int64_t n) {
  // x = exp(x - max) / sum(exp(x - max))
  if (n <= 0) return;
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  const auto inv_sum = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv_sum;
}

void rope_apply_scalar(float* x, int n_heads, int head_dim, int n_rot, bool interleaved, const float* cos_full,
                       const float* sin_signed) {
  // Each pair (a, b) becomes (a cos - b sin, a sin + b cos).
  const int half = n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int k = 0; k < half; ++k) {
      const int ia = interleaved ? 2 * k : k;
      const int ib = interleaved ? 2 * k + 1 : k + half;
      const float c = cos_full[ia];
      const float s = sin_signed[ib];
      const float a = xh[ia];
      const float b = xh[ib];
      xh[ia] = a * c - b * s;
      xh[ib] = a * s + b * c;
    }
  }
}

void f32_to_f16_row_scalar(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_fp16(x[i]);
}

void exp_row_scalar(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i]);
}

void score_range_f16_scalar(const float* q, int n_q, int head_dim, const uint16_t* k, int64_t k_stride, int64_t n_pos,
                            float scale, float* scores, int64_t score_stride) {
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint16_t* kt = k + t * k_stride;
    for (int j = 0; j < n_q; ++j) {
      const float* qj = q + static_cast<int64_t>(j) * head_dim;
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += qj[d] * fp16_to_f32(kt[d]);
      scores[j * score_stride + t] = dot * scale;
    }
  }
}

void accumulate_range_f16_scalar(const float* w, int64_t w_stride, int n_q, const uint16_t* v, int64_t v_stride,
                                 int64_t n_pos, int head_dim, float* acc) {
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint16_t* vt = v + t * v_stride;
    for (int j = 0; j < n_q; ++j) {
      const float wj = w[j * w_stride + t];
      float* aj = acc + static_cast<int64_t>(j) * head_dim;
      for (int d = 0; d < head_dim; ++d) aj[d] += wj * fp16_to_f32(vt[d]);
    }
  }
}

constexpr OpsTable k_scalar_table = {
    Isa::scalar,       rmsnorm_scalar,        silu_mul_scalar, add_inplace_scalar,     softmax_inplace_scalar,
    rope_apply_scalar, f32_to_f16_row_scalar, exp_row_scalar,  score_range_f16_scalar, accumulate_range_f16_scalar,
};

}  // namespace

const OpsTable& ops_scalar() { return k_scalar_table; }

}  // namespace kvc::kernels

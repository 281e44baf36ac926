// Scalar (de)quantization of every GGUF weight type kvchat reads: the reference the SIMD kernels
// match. The 32-value block types live here, the k-quants in quant_k.cpp.
#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "kernels/cpu/quant_impl.h"

namespace kvc::kernels {

void detail::sanitize(const float* x, int n, float* out) {
  float finite_amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) finite_amax = std::fmax(finite_amax, std::fabs(x[i]));
  }
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    if (std::isnan(v)) {
      out[i] = 0.0f;
    } else if (std::isinf(v)) {
      out[i] = v > 0 ? finite_amax : -finite_amax;
    } else {
      out[i] = v;
    }
  }
}

namespace {

using namespace detail;

// A violated precondition is a caller bug (shapes come validated from the GGUF loader);
// kernels may not include core/, so this is the kernels' own always-on check.
[[noreturn]] void precondition_failed(const char* what, DType type, int64_t n) {
  std::fprintf(stderr, "kvchat: kernels: %s (type %u, n %lld)\n", what, static_cast<unsigned>(type),
               static_cast<long long>(n));
  std::abort();
}

void check_row(DType type, int64_t n) {
  const DTypeInfo* info = dtype_info(static_cast<uint32_t>(type));
  if (info == nullptr) precondition_failed("unknown element type", type, n);
  if (n < 0 || n % info->block_elems != 0) precondition_failed("row length is not a whole number of blocks", type, n);
}

// ---------------------------------------------------------------- Q8_0, Q4_0

void dequantize_q8_0(const BlockQ8_0* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < k_qk; ++j) y[i * k_qk + j] = d * static_cast<float>(b[i].qs[j]);
  }
}

// As llama.cpp: d = amax / 127 (fp16), q = round(x / d) with 1/d taken from the unrounded d.
void quantize_q8_0(const float* x, BlockQ8_0* b, int64_t n_blocks) {
  float v[k_qk];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk, k_qk, v);
    float amax = 0.0f;
    for (float e : v) amax = std::fmax(amax, std::fabs(e));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < k_qk; ++j) b[i].qs[j] = static_cast<int8_t>(round_clamp(v[j] * id, -127, 127));
  }
}

void dequantize_q4_0(const BlockQ4_0* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    float* out = y + i * k_qk;
    for (int j = 0; j < k_qk / 2; ++j) {
      out[j] = d * static_cast<float>((b[i].qs[j] & 0x0F) - 8);
      out[j + k_qk / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
    }
  }
}

// As llama.cpp: m = the value of largest magnitude (first one on ties), d = m / -8, so m
// maps to level 0 exactly; level = min(15, floor(x / d + 8.5)).
void quantize_q4_0(const float* x, BlockQ4_0* b, int64_t n_blocks) {
  float v[k_qk];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk, k_qk, v);
    float amax = 0.0f;
    float m = 0.0f;
    for (float e : v) {
      if (amax < std::fabs(e)) {
        amax = std::fabs(e);
        m = e;
      }
    }
    const float d = m / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    auto level = [id](float e) {
      const float t = e * id + 8.5f;  // in [0.5, 16.5] up to rounding
      return static_cast<uint8_t>(t < 1.0f ? 0 : (t >= 15.0f ? 15 : static_cast<int>(t)));
    };
    for (int j = 0; j < k_qk / 2; ++j) {
      b[i].qs[j] = static_cast<uint8_t>(level(v[j]) | (level(v[j + k_qk / 2]) << 4));
    }
  }
}

// ---------------------------------------------------------------- Q4_1, Q5_0, Q5_1

void dequantize_q4_1(const BlockQ4_1* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    float* out = y + i * k_qk;
    for (int j = 0; j < k_qk / 2; ++j) {
      out[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
      out[j + k_qk / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

uint32_t load_qh(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;
}

void dequantize_q5_0(const BlockQ5_0* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const uint32_t qh = load_qh(b[i].qh);
    float* out = y + i * k_qk;
    for (int j = 0; j < k_qk / 2; ++j) {
      const int q0 = (b[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      out[j] = static_cast<float>(q0 - 16) * d;
      out[j + k_qk / 2] = static_cast<float>(q1 - 16) * d;
    }
  }
}

void dequantize_q5_1(const BlockQ5_1* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d), m = fp16_to_f32(b[i].m);
    const uint32_t qh = load_qh(b[i].qh);
    float* out = y + i * k_qk;
    for (int j = 0; j < k_qk / 2; ++j) {
      const int q0 = (b[i].qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (b[i].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      out[j] = static_cast<float>(q0) * d + m;
      out[j + k_qk / 2] = static_cast<float>(q1) * d + m;
    }
  }
}

// The block's minimum and maximum; the grid runs from the minimum in steps of
// (max - min) / top, and a value's level is floor((x - min) / step + 1/2), at most top.
struct MinMaxGrid {
  float min, d, id;
};
MinMaxGrid min_max_grid(const float* v, int top) {
  float lo = v[0], hi = v[0];
  for (int j = 1; j < k_qk; ++j) {  // strict comparisons: the first of equal values (0 or -0) wins
    if (v[j] < lo) lo = v[j];
    if (v[j] > hi) hi = v[j];
  }
  const float d = (hi - lo) / static_cast<float>(top);
  return {lo, d, d != 0.0f ? 1.0f / d : 0.0f};
}
int min_max_level(const MinMaxGrid& g, float x, int top) {
  const float t = (x - g.min) * g.id + 0.5f;  // in [0.5, top + 0.5] up to rounding
  return t >= static_cast<float>(top) ? top : static_cast<int>(t);
}

// As llama.cpp's reference quantizer: the min/max grid above with 16 levels; m = the minimum.
void quantize_q4_1(const float* x, BlockQ4_1* b, int64_t n_blocks) {
  float v[k_qk];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk, k_qk, v);
    const MinMaxGrid g = min_max_grid(v, 15);
    b[i].d = f32_to_fp16(g.d);
    b[i].m = f32_to_fp16(g.min);
    for (int j = 0; j < k_qk / 2; ++j) {
      b[i].qs[j] = static_cast<uint8_t>(min_max_level(g, v[j], 15) | (min_max_level(g, v[j + k_qk / 2], 15) << 4));
    }
  }
}

// As Q4_0 with 32 levels: m = the value of largest magnitude (first on ties), d = m / -16,
// level = min(31, floor(x / d + 16.5)).
void quantize_q5_0(const float* x, BlockQ5_0* b, int64_t n_blocks) {
  float v[k_qk];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk, k_qk, v);
    float amax = 0.0f, m = 0.0f;
    for (float e : v) {
      if (amax < std::fabs(e)) {
        amax = std::fabs(e);
        m = e;
      }
    }
    const float d = m / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = f32_to_fp16(d);
    auto level = [id](float e) {
      const float t = e * id + 16.5f;  // in [0.5, 32.5] up to rounding
      return t < 1.0f ? 0 : (t >= 31.0f ? 31 : static_cast<int>(t));
    };
    uint32_t qh = 0;
    for (int j = 0; j < k_qk / 2; ++j) {
      const int q0 = level(v[j]), q1 = level(v[j + k_qk / 2]);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

// As llama.cpp's reference quantizer: the min/max grid with 32 levels.
void quantize_q5_1(const float* x, BlockQ5_1* b, int64_t n_blocks) {
  float v[k_qk];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk, k_qk, v);
    const MinMaxGrid g = min_max_grid(v, 31);
    b[i].d = f32_to_fp16(g.d);
    b[i].m = f32_to_fp16(g.min);
    uint32_t qh = 0;
    for (int j = 0; j < k_qk / 2; ++j) {
      const int q0 = min_max_level(g, v[j], 31), q1 = min_max_level(g, v[j + k_qk / 2], 31);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

// ---------------------------------------------------------------- IQ4_NL

void dequantize_iq4_nl(const BlockIQ4_NL* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    float* out = y + i * k_qk;
    for (int j = 0; j < k_qk / 2; ++j) {
      out[j] = d * static_cast<float>(k_iq4nl_values[b[i].qs[j] & 0x0F]);
      out[j + k_qk / 2] = d * static_cast<float>(k_iq4nl_values[b[i].qs[j] >> 4]);
    }
  }
}

// Index of the IQ4_NL level nearest to t (the lower one on ties).
int nearest_iq4nl(float t) {
  int lo = 0, hi = 15;
  if (!(t > static_cast<float>(k_iq4nl_values[0]))) return 0;
  if (!(t < static_cast<float>(k_iq4nl_values[15]))) return 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (t < static_cast<float>(k_iq4nl_values[mid]) ? hi : lo) = mid;
  }
  return t - static_cast<float>(k_iq4nl_values[lo]) <= static_cast<float>(k_iq4nl_values[hi]) - t ? lo : hi;
}

// The scale: grids that put the value of largest magnitude m at either end of the levels
// (-127 or 113) or somewhat past it, each refined twice by least squares on its levels;
// the fit of least squared error wins. Levels are then chosen against the stored scale.
void quantize_iq4_nl(const float* x, BlockIQ4_NL* b, int64_t n_blocks) {
  float v[k_qk];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk, k_qk, v);
    float amax = 0.0f, m = 0.0f;
    for (float e : v) {
      if (amax < std::fabs(e)) {
        amax = std::fabs(e);
        m = e;
      }
    }
    float best_d = 0.0f;
    double best_err = 0;
    for (float e : v) best_err += static_cast<double>(e) * static_cast<double>(e);  // d = 0
    for (const float end : {-127.0f, 113.0f}) {
      for (int k = 0; k <= 8 && amax > 0.0f; ++k) {
        float d = m / (end * (1.0f + 0.05f * static_cast<float>(k)));
        for (int pass = 0; pass < 2; ++pass) {
          double s_vv = 0, s_xv = 0;
          int idx[k_qk];
          for (int j = 0; j < k_qk; ++j) {
            idx[j] = nearest_iq4nl(v[j] / d);
            const double lv = k_iq4nl_values[idx[j]];
            s_vv += lv * lv;
            s_xv += static_cast<double>(v[j]) * lv;
          }
          const auto a = static_cast<float>(s_xv / s_vv);  // s_vv > 0: no level is 0
          if (!(a != 0.0f)) break;
          double err = 0;
          for (int j = 0; j < k_qk; ++j) {
            const double e = static_cast<double>(a) * k_iq4nl_values[idx[j]] - static_cast<double>(v[j]);
            err += e * e;
          }
          if (err < best_err) {
            best_err = err;
            best_d = a;
          }
          d = a;
        }
      }
    }
    b[i].d = f32_to_fp16(best_d);
    const float d = fp16_to_f32(b[i].d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    auto level = [&](float e) { return d != 0.0f ? nearest_iq4nl(e * id) : 8; };
    for (int j = 0; j < k_qk / 2; ++j) {
      b[i].qs[j] = static_cast<uint8_t>(level(v[j]) | (level(v[j + k_qk / 2]) << 4));
    }
  }
}

// ---------------------------------------------------------------- MXFP4

void dequantize_mxfp4(const BlockMXFP4* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = e8m0_to_f32_half(b[i].e);
    float* out = y + i * k_qk;
    for (int j = 0; j < k_qk / 2; ++j) {
      out[j] = static_cast<float>(k_mxfp4_values[b[i].qs[j] & 0x0F]) * d;
      out[j + k_qk / 2] = static_cast<float>(k_mxfp4_values[b[i].qs[j] >> 4]) * d;
    }
  }
}

// The level of least |level * d - x|, the first of equal ones (so 0 beats -0).
int nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(k_mxfp4_values[0]) * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(k_mxfp4_values[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

// As llama.cpp's reference quantizer: the scale puts the largest magnitude a in [4, 8) steps of
// 2^(e - 127), e = floor(log2 a) - 2 + 127 (log2f, as there, so the edge cases round alike); the
// levels then reach 1.5 * 2^floor(log2 a), and larger values take the end level. The exponent
// is clamped to the byte (llama.cpp's cast is undefined outside it: |x| below 2^-125 or above 2^128).
void quantize_mxfp4(const float* x, BlockMXFP4* b, int64_t n_blocks) {
  float v[k_qk];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk, k_qk, v);
    float amax = 0.0f;
    for (float e : v) amax = std::fmax(amax, std::fabs(e));
    int e = 0;
    if (amax > 0.0f) e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 255);
    b[i].e = static_cast<uint8_t>(e);
    const float d = e8m0_to_f32_half(b[i].e);
    for (int j = 0; j < k_qk / 2; ++j) {
      b[i].qs[j] = static_cast<uint8_t>(nearest_mxfp4(v[j], d) | (nearest_mxfp4(v[j + k_qk / 2], d) << 4));
    }
  }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  check_row(type, n);
  switch (type) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::f16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
      return;
    }
    case DType::bf16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::q8_0: return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / k_qk);
    case DType::q4_0: return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / k_qk);
    case DType::q4_1: return dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / k_qk);
    case DType::q5_0: return dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, n / k_qk);
    case DType::q5_1: return dequantize_q5_1(static_cast<const BlockQ5_1*>(src), dst, n / k_qk);
    case DType::iq4_nl: return dequantize_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n / k_qk);
    case DType::q2_k: return dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n / k_qk_k);
    case DType::q3_k: return dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, n / k_qk_k);
    case DType::q5_k: return dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, n / k_qk_k);
    case DType::q4_k: return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / k_qk_k);
    case DType::q6_k: return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / k_qk_k);
    case DType::q8_k: return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, n / k_qk_k);
    case DType::mxfp4: return dequantize_mxfp4(static_cast<const BlockMXFP4*>(src), dst, n / k_qk);
  }
  precondition_failed("dequantize_row: unsupported type", type, n);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  check_row(type, n);
  switch (type) {
    case DType::f32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::f16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(src[i]);
      return;
    }
    case DType::bf16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::q8_0: return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n / k_qk);
    case DType::q4_0: return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n / k_qk);
    case DType::q4_1: return quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), n / k_qk);
    case DType::q5_0: return quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), n / k_qk);
    case DType::q5_1: return quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), n / k_qk);
    case DType::iq4_nl: return quantize_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), n / k_qk);
    case DType::q2_k: return quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), n / k_qk_k);
    case DType::q3_k: return quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), n / k_qk_k);
    case DType::q5_k: return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n / k_qk_k);
    case DType::q4_k: return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n / k_qk_k);
    case DType::q6_k: return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n / k_qk_k);
    case DType::q8_k: return quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), n / k_qk_k);
    case DType::mxfp4: return quantize_mxfp4(src, static_cast<BlockMXFP4*>(dst), n / k_qk);
  }
  precondition_failed("quantize_row: unsupported type", type, n);
}

bool can_quantize_to(DType type) {
  switch (type) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::iq4_nl:
    case DType::q2_k:
    case DType::q3_k:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k:
    case DType::q8_k:
    case DType::mxfp4: return true;
  }
  return false;
}

}  // namespace kvc::kernels

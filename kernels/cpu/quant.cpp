// Scalar (de)quantization of every GGUF weight type kvchat reads: the reference the SIMD kernels match.
#include "kernels/cpu/quant.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace kvc::kernels {
namespace {

constexpr int k_qk = 32;     // values per Q8_0 / Q4_0 block
constexpr int k_qk_k = 256;  // values per k-quant super-block

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
  if (n < 0 || n % info->block_elems != 0)
    precondition_failed("row length is not a whole number of blocks", type, n);
}

// Rounds v to the nearest integer (halves away from zero) and clamps it to [lo, hi];
// v is finite here (inputs are sanitized first), but the float clamp keeps the cast defined.
int round_clamp(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (!(v < static_cast<float>(hi))) return hi;
  const int t = static_cast<int>(v);  // toward zero; v - t is exact
  const float frac = v - static_cast<float>(t);
  return t + (frac >= 0.5f) - (frac <= -0.5f);
}

// Copies n values into out, replacing NaN by 0 and +-Inf by +-(largest finite magnitude),
// so that a stray non-finite value neither crashes the quantizer nor poisons its block.
void sanitize(const float* x, int n, float* out) {
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

// ---------------------------------------------------------------- Q8_0, Q4_0, Q8_K

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

void dequantize_q8_k(const BlockQ8_K* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    for (int j = 0; j < k_qk_k; ++j) y[i * k_qk_k + j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

// d = amax / 127 kept as float, q = round(x / d), bsums[g] = sum of q[16g .. 16g+15].
void quantize_q8_k(const float* x, BlockQ8_K* b, int64_t n_blocks) {
  float v[k_qk_k];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk_k, k_qk_k, v);
    float amax = 0.0f;
    for (float e : v) amax = std::fmax(amax, std::fabs(e));
    const float d = amax / 127.0f;
    b[i].d = d;
    for (int j = 0; j < k_qk_k; ++j) {
      b[i].qs[j] = static_cast<int8_t>(d != 0.0f ? round_clamp(v[j] / d, -127, 127) : 0);
    }
    for (int g = 0; g < k_qk_k / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b[i].qs[g * 16 + j];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

// ---------------------------------------------------------------- Q4_K

// Sub-block j's 6-bit scale and min from the 12 packed bytes (see the diagram in quant.h).
void unpack_scale_min_k4(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void pack_scale_min_k4(const int* sc, const int* m, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = static_cast<uint8_t>(s[j] | sc[j]);
      s[j + 4] = static_cast<uint8_t>(s[j + 4] | m[j]);
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0x0F) | ((m[j] & 0x0F) << 4));
      s[j - 4] = static_cast<uint8_t>(s[j - 4] | ((sc[j] >> 4) << 6));
      s[j] = static_cast<uint8_t>(s[j] | ((m[j] >> 4) << 6));
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    float* out = y + i * k_qk_k;
    for (int pair = 0; pair < 4; ++pair) {  // 32 bytes of qs hold sub-blocks 2*pair, 2*pair+1
      const uint8_t* q = b[i].qs + 32 * pair;
      int sc0, m0, sc1, m1;
      unpack_scale_min_k4(2 * pair, b[i].scales, &sc0, &m0);
      unpack_scale_min_k4(2 * pair + 1, b[i].scales, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
      for (int l = 0; l < 32; ++l) {
        out[64 * pair + l] = d0 * static_cast<float>(q[l] & 0x0F) - min0;
        out[64 * pair + 32 + l] = d1 * static_cast<float>(q[l] >> 4) - min1;
      }
    }
  }
}

// x ~ scale * level - min with level in [0, n_levels - 1], scale >= 0, min >= 0.
struct AffineFit {
  float scale = 0.0f;
  float min = 0.0f;
};

// Fits one sub-block: starts from the min/max grid (the range always includes 0, as the
// format's non-negative min requires), tries a few slightly narrower and wider grids, and
// refines each by least squares on its levels; keeps the fit of least squared error.
AffineFit fit_affine(const float* x, int n, int n_levels) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::fmin(lo, x[i]);
    hi = std::fmax(hi, x[i]);
  }
  const int top = n_levels - 1;
  if (!(hi > lo)) return AffineFit{0.0f, -lo};
  AffineFit best{(hi - lo) / static_cast<float>(top), -lo};
  double best_err = std::numeric_limits<double>::infinity();
  int level[k_qk_k];
  for (int k = -4; k <= 4; ++k) {
    AffineFit f{(hi - lo) / (static_cast<float>(top) + 0.25f * static_cast<float>(k)), -lo};
    for (int pass = 0; pass < 2; ++pass) {
      double s_l = 0, s_ll = 0, s_x = 0, s_xl = 0;
      for (int i = 0; i < n; ++i) {
        level[i] = round_clamp((x[i] + f.min) / f.scale, 0, top);
        s_l += level[i];
        s_ll += static_cast<double>(level[i]) * level[i];
        s_x += static_cast<double>(x[i]);
        s_xl += static_cast<double>(x[i]) * level[i];
      }
      const double det = n * s_ll - s_l * s_l;
      if (det <= 0) break;
      double a = (n * s_xl - s_l * s_x) / det;
      double c = (s_x - a * s_l) / n;  // x ~ a * level + c
      if (c > 0) {                     // the format needs c <= 0: refit through the origin
        c = 0;
        a = s_xl / s_ll;
      }
      if (!(a > 0)) break;
      double err = 0;
      for (int i = 0; i < n; ++i) {
        const double e = a * level[i] + c - static_cast<double>(x[i]);
        err += e * e;
      }
      if (err < best_err) {
        best_err = err;
        best = AffineFit{static_cast<float>(a), static_cast<float>(-c)};
      }
      f = AffineFit{static_cast<float>(a), static_cast<float>(-c)};
    }
  }
  return best;
}

void quantize_q4_k(const float* x, BlockQ4_K* b, int64_t n_blocks) {
  float v[k_qk_k];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk_k, k_qk_k, v);
    AffineFit fit[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fit[j] = fit_affine(v + 32 * j, 32, 16);
      max_scale = std::fmax(max_scale, fit[j].scale);
      max_min = std::fmax(max_min, fit[j].min);
    }
    b[i].d = f32_to_fp16(max_scale / 63.0f);
    b[i].dmin = f32_to_fp16(max_min / 63.0f);
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    int sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = d > 0.0f ? round_clamp(fit[j].scale / d, 0, 63) : 0;
      m[j] = dmin > 0.0f ? round_clamp(fit[j].min / dmin, 0, 63) : 0;
    }
    pack_scale_min_k4(sc, m, b[i].scales);
    // Levels against the scales as stored, so that 6-bit rounding is partly absorbed.
    uint8_t level[k_qk_k];
    for (int j = 0; j < 8; ++j) {
      const float step = d * static_cast<float>(sc[j]);
      const float offset = dmin * static_cast<float>(m[j]);
      for (int l = 0; l < 32; ++l) {
        const int q = step > 0.0f ? round_clamp((v[32 * j + l] + offset) / step, 0, 15) : 0;
        level[32 * j + l] = static_cast<uint8_t>(q);
      }
    }
    for (int pair = 0; pair < 4; ++pair) {
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * pair + l] =
            static_cast<uint8_t>(level[64 * pair + l] | (level[64 * pair + 32 + l] << 4));
      }
    }
  }
}

// ---------------------------------------------------------------- Q6_K

void dequantize_q6_k(const BlockQ6_K* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    float* out = y + i * k_qk_k;
    for (int half = 0; half < 2; ++half) {  // each 128 values: 64 bytes of ql, 32 of qh, 8 scales
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      float* o = out + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        o[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q0);
        o[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q1);
        o[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q2);
        o[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q3);
      }
    }
  }
}

// x ~ scale * level, level in [-32, 31], scale of either sign: the value of largest
// magnitude starts at level -32 exactly; a few narrower grids and a least-squares refit
// of each compete on squared error.
float fit_symmetric(const float* x, int n) {
  float amax = 0.0f, m = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      m = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best = m / -32.0f;
  double best_err = std::numeric_limits<double>::infinity();
  for (int k = 0; k <= 8; ++k) {
    float s = m / -(32.0f - 0.5f * static_cast<float>(k));
    for (int pass = 0; pass < 2; ++pass) {
      double s_ll = 0, s_xl = 0;
      for (int i = 0; i < n; ++i) {
        const int q = round_clamp(x[i] / s, -32, 31);
        s_ll += static_cast<double>(q) * q;
        s_xl += static_cast<double>(x[i]) * q;
      }
      if (s_ll == 0) break;
      const auto a = static_cast<float>(s_xl / s_ll);
      if (a == 0.0f) break;
      double err = 0;
      for (int i = 0; i < n; ++i) {
        const double e = static_cast<double>(a) * round_clamp(x[i] / s, -32, 31) - static_cast<double>(x[i]);
        err += e * e;
      }
      if (err < best_err) {
        best_err = err;
        best = a;
      }
      s = a;
    }
  }
  return best;
}

void quantize_q6_k(const float* x, BlockQ6_K* b, int64_t n_blocks) {
  float v[k_qk_k];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk_k, k_qk_k, v);
    float scale[16];
    float max_abs = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scale[j] = fit_symmetric(v + 16 * j, 16);
      max_abs = std::fmax(max_abs, std::fabs(scale[j]));
    }
    b[i].d = f32_to_fp16(max_abs / 127.0f);
    const float d = fp16_to_f32(b[i].d);
    uint8_t level[k_qk_k];  // q + 32, in [0, 63]
    for (int j = 0; j < 16; ++j) {
      const int sc = d > 0.0f ? round_clamp(scale[j] / d, -127, 127) : 0;
      b[i].scales[j] = static_cast<int8_t>(sc);
      const float step = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        const int q = step != 0.0f ? round_clamp(v[16 * j + l] / step, -32, 31) : 0;
        level[16 * j + l] = static_cast<uint8_t>(q + 32);
      }
    }
    for (int half = 0; half < 2; ++half) {
      uint8_t* ql = b[i].ql + 64 * half;
      uint8_t* qh = b[i].qh + 32 * half;
      const uint8_t* L = level + 128 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((L[l] & 0x0F) | ((L[l + 64] & 0x0F) << 4));
        ql[l + 32] = static_cast<uint8_t>((L[l + 32] & 0x0F) | ((L[l + 96] & 0x0F) << 4));
        qh[l] = static_cast<uint8_t>((L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) |
                                     ((L[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  check_row(type, n);
  switch (type) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
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
    case DType::q8_0:
      return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / k_qk);
    case DType::q4_0:
      return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / k_qk);
    case DType::q4_k:
      return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / k_qk_k);
    case DType::q6_k:
      return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / k_qk_k);
    case DType::q8_k:
      return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, n / k_qk_k);
  }
  precondition_failed("dequantize_row: unsupported type", type, n);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  check_row(type, n);
  switch (type) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
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
    case DType::q8_0:
      return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n / k_qk);
    case DType::q4_0:
      return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n / k_qk);
    case DType::q4_k:
      return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n / k_qk_k);
    case DType::q6_k:
      return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n / k_qk_k);
    case DType::q8_k:
      return quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), n / k_qk_k);
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
    case DType::q4_k:
    case DType::q6_k:
    case DType::q8_k:
      return true;
  }
  return false;
}

}  // namespace kvc::kernels

// Scalar (de)quantization of the k-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; Q8_K for activations).
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "kernels/cpu/quant_impl.h"

namespace kvc::kernels::detail {
namespace {

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

// x ~ scale * level, level in [-nmax, nmax - 1], scale of either sign: the value of largest
// magnitude starts at level -nmax exactly; narrower grids (nmax - shrink * k, k = 1..8) and
// a least-squares refit of each compete on squared error.
float fit_symmetric(const float* x, int n, int nmax, float shrink) {
  float amax = 0.0f, m = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      m = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best = m / -static_cast<float>(nmax);
  double best_err = std::numeric_limits<double>::infinity();
  for (int k = 0; k <= 8; ++k) {
    float s = m / -(static_cast<float>(nmax) - shrink * static_cast<float>(k));
    for (int pass = 0; pass < 2; ++pass) {
      double s_ll = 0, s_xl = 0;
      for (int i = 0; i < n; ++i) {
        const int q = round_clamp(x[i] / s, -nmax, nmax - 1);
        s_ll += static_cast<double>(q) * q;
        s_xl += static_cast<double>(x[i]) * q;
      }
      if (s_ll == 0) break;
      const auto a = static_cast<float>(s_xl / s_ll);
      if (a == 0.0f) break;
      double err = 0;
      for (int i = 0; i < n; ++i) {
        const double e = static_cast<double>(a) * round_clamp(x[i] / s, -nmax, nmax - 1) - static_cast<double>(x[i]);
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

// Squared error of x ~ step * q - offset, q = the nearest level in [0, top] (0 when step is 0).
double affine_error(const float* x, int n, float step, float offset, int top) {
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const int q = step > 0.0f ? round_clamp((x[i] + offset) / step, 0, top) : 0;
    const double e = static_cast<double>(step * static_cast<float>(q) - offset) - static_cast<double>(x[i]);
    err += e * e;
  }
  return err;
}

// Squared error of x ~ step * q, q = the nearest level in [-nmax, nmax - 1] (0 when step is 0).
double symmetric_error(const float* x, int n, float step, int nmax) {
  double err = 0;
  for (int i = 0; i < n; ++i) {
    const int q = step != 0.0f ? round_clamp(x[i] / step, -nmax, nmax - 1) : 0;
    const double e = static_cast<double>(step * static_cast<float>(q)) - static_cast<double>(x[i]);
    err += e * e;
  }
  return err;
}

// Packs 16 6-bit values (Q3_K's scales + 32) into 12 bytes, as quant.h describes.
void pack_scales_q3_k(const int* v, uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int lo = v[j] & 15, hi = v[j] >> 4;
    if (j < 8) {
      s[j] = static_cast<uint8_t>(s[j] | lo);
    } else {
      s[j - 8] = static_cast<uint8_t>(s[j - 8] | (lo << 4));
    }
    s[8 + j % 4] = static_cast<uint8_t>(s[8 + j % 4] | (hi << (2 * (j / 4))));
  }
}

// Scale j of a Q3_K block as stored (12 bytes s, see quant.h), in [-32, 31].
int q3_k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace

// ---------------------------------------------------------------- Q8_K

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
        b[i].qs[32 * pair + l] = static_cast<uint8_t>(level[64 * pair + l] | (level[64 * pair + 32 + l] << 4));
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

void quantize_q6_k(const float* x, BlockQ6_K* b, int64_t n_blocks) {
  float v[k_qk_k];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk_k, k_qk_k, v);
    float scale[16];
    float max_abs = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scale[j] = fit_symmetric(v + 16 * j, 16, 32, 0.5f);
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

// ---------------------------------------------------------------- Q5_K

void dequantize_q5_k(const BlockQ5_K* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    float* out = y + i * k_qk_k;
    for (int pair = 0; pair < 4; ++pair) {  // as Q4_K, the fifth bits from qh
      const uint8_t* q = b[i].qs + 32 * pair;
      int sc0, m0, sc1, m1;
      unpack_scale_min_k4(2 * pair, b[i].scales, &sc0, &m0);
      unpack_scale_min_k4(2 * pair + 1, b[i].scales, &sc1, &m1);
      const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
      const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
      for (int l = 0; l < 32; ++l) {
        const int h0 = (b[i].qh[l] >> (2 * pair)) & 1, h1 = (b[i].qh[l] >> (2 * pair + 1)) & 1;
        out[64 * pair + l] = d0 * static_cast<float>((q[l] & 0x0F) | (h0 << 4)) - min0;
        out[64 * pair + 32 + l] = d1 * static_cast<float>((q[l] >> 4) | (h1 << 4)) - min1;
      }
    }
  }
}

// As Q4_K, with 32 levels per sub-block.
void quantize_q5_k(const float* x, BlockQ5_K* b, int64_t n_blocks) {
  float v[k_qk_k];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk_k, k_qk_k, v);
    AffineFit fit[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fit[j] = fit_affine(v + 32 * j, 32, 32);
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
    uint8_t level[k_qk_k];
    for (int j = 0; j < 8; ++j) {
      const float step = d * static_cast<float>(sc[j]);
      const float offset = dmin * static_cast<float>(m[j]);
      for (int l = 0; l < 32; ++l) {
        const int q = step > 0.0f ? round_clamp((v[32 * j + l] + offset) / step, 0, 31) : 0;
        level[32 * j + l] = static_cast<uint8_t>(q);
      }
    }
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int pair = 0; pair < 4; ++pair) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo = level[64 * pair + l], hi = level[64 * pair + 32 + l];
        b[i].qs[32 * pair + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
        b[i].qh[l] = static_cast<uint8_t>(b[i].qh[l] | ((lo >> 4) << (2 * pair)) | ((hi >> 4) << (2 * pair + 1)));
      }
    }
  }
}

// ---------------------------------------------------------------- Q2_K

void dequantize_q2_k(const BlockQ2_K* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    float* out = y + i * k_qk_k;
    for (int s = 0; s < 16; ++s) {  // sub-blocks of 16 in value order
      const float dl = d * static_cast<float>(b[i].scales[s] & 0x0F);
      const float ml = dmin * static_cast<float>(b[i].scales[s] >> 4);
      for (int e = 0; e < 16; ++e) {
        const int p = 16 * s + e, n = p / 128, j = (p % 128) / 32, l = p % 32;
        const int q = (b[i].qs[32 * n + l] >> (2 * j)) & 3;
        out[p] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}

// Per sub-block of 16 an affine fit on 4 levels, scales and mins rounded to 4 bits against
// the super-block's largest; the rounded pair is then moved by one step where that lowers
// the sub-block's error (4-bit scales are coarse).
void quantize_q2_k(const float* x, BlockQ2_K* b, int64_t n_blocks) {
  float v[k_qk_k];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk_k, k_qk_k, v);
    AffineFit fit[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      fit[j] = fit_affine(v + 16 * j, 16, 4);
      max_scale = std::fmax(max_scale, fit[j].scale);
      max_min = std::fmax(max_min, fit[j].min);
    }
    b[i].d = f32_to_fp16(max_scale / 15.0f);
    b[i].dmin = f32_to_fp16(max_min / 15.0f);
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    uint8_t level[k_qk_k];
    for (int j = 0; j < 16; ++j) {
      const float* xs = v + 16 * j;
      const int sc0 = d > 0.0f ? round_clamp(fit[j].scale / d, 0, 15) : 0;
      const int m0 = dmin > 0.0f ? round_clamp(fit[j].min / dmin, 0, 15) : 0;
      int sc = sc0, m = m0;
      double best = affine_error(xs, 16, d * static_cast<float>(sc0), dmin * static_cast<float>(m0), 3);
      for (int ds = -1; ds <= 1; ++ds) {
        for (int dm = -1; dm <= 1; ++dm) {
          const int s1 = sc0 + ds, m1 = m0 + dm;
          if (s1 < 0 || s1 > 15 || m1 < 0 || m1 > 15) continue;
          const double e = affine_error(xs, 16, d * static_cast<float>(s1), dmin * static_cast<float>(m1), 3);
          if (e < best) {
            best = e;
            sc = s1;
            m = m1;
          }
        }
      }
      b[i].scales[j] = static_cast<uint8_t>(sc | (m << 4));
      const float step = d * static_cast<float>(sc);
      const float offset = dmin * static_cast<float>(m);
      for (int l = 0; l < 16; ++l) {
        level[16 * j + l] = static_cast<uint8_t>(step > 0.0f ? round_clamp((xs[l] + offset) / step, 0, 3) : 0);
      }
    }
    std::memset(b[i].qs, 0, sizeof b[i].qs);
    for (int p = 0; p < k_qk_k; ++p) {
      const int n = p / 128, j = (p % 128) / 32, l = p % 32;
      b[i].qs[32 * n + l] = static_cast<uint8_t>(b[i].qs[32 * n + l] | (level[p] << (2 * j)));
    }
  }
}

// ---------------------------------------------------------------- Q3_K

void dequantize_q3_k(const BlockQ3_K* b, float* y, int64_t n_blocks) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    const float d = fp16_to_f32(b[i].d);
    float* out = y + i * k_qk_k;
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(q3_k_scale(b[i].scales, s));
      for (int e = 0; e < 16; ++e) {
        const int p = 16 * s + e, n = p / 128, j = (p % 128) / 32, l = p % 32;
        const int low = (b[i].qs[32 * n + l] >> (2 * j)) & 3;
        const int high = (b[i].hmask[l] >> (4 * n + j)) & 1;
        out[p] = dl * static_cast<float>(low - (high ? 0 : 4));
      }
    }
  }
}

// Per sub-block of 16 a symmetric fit on levels [-4, 3]; the scales as 6-bit multiples of
// d = (the largest-magnitude scale) / -32, each moved by one step where that lowers its error.
void quantize_q3_k(const float* x, BlockQ3_K* b, int64_t n_blocks) {
  float v[k_qk_k];
  for (int64_t i = 0; i < n_blocks; ++i) {
    sanitize(x + i * k_qk_k, k_qk_k, v);
    float scale[16];
    float amax = 0.0f, smax = 0.0f;
    for (int j = 0; j < 16; ++j) {
      scale[j] = fit_symmetric(v + 16 * j, 16, 4, 0.125f);
      if (std::fabs(scale[j]) > amax) {
        amax = std::fabs(scale[j]);
        smax = scale[j];
      }
    }
    b[i].d = f32_to_fp16(smax / -32.0f);
    const float d = fp16_to_f32(b[i].d);
    int code[16];           // stored scale + 32, in [0, 63]
    uint8_t level[k_qk_k];  // q + 4, in [0, 7]
    for (int j = 0; j < 16; ++j) {
      const float* xs = v + 16 * j;
      const int c0 = d != 0.0f ? round_clamp(scale[j] / d, -32, 31) : 0;
      int c = c0;
      double best = symmetric_error(xs, 16, d * static_cast<float>(c0), 4);
      for (int c1 : {c0 - 1, c0 + 1}) {
        if (c1 < -32 || c1 > 31) continue;
        const double e = symmetric_error(xs, 16, d * static_cast<float>(c1), 4);
        if (e < best) {
          best = e;
          c = c1;
        }
      }
      code[j] = c + 32;
      const float step = d * static_cast<float>(c);
      for (int l = 0; l < 16; ++l) {
        level[16 * j + l] = static_cast<uint8_t>((step != 0.0f ? round_clamp(xs[l] / step, -4, 3) : 0) + 4);
      }
    }
    pack_scales_q3_k(code, b[i].scales);
    std::memset(b[i].qs, 0, sizeof b[i].qs);
    std::memset(b[i].hmask, 0, sizeof b[i].hmask);
    for (int p = 0; p < k_qk_k; ++p) {
      const int n = p / 128, j = (p % 128) / 32, l = p % 32;
      b[i].qs[32 * n + l] = static_cast<uint8_t>(b[i].qs[32 * n + l] | ((level[p] & 3) << (2 * j)));
      b[i].hmask[l] = static_cast<uint8_t>(b[i].hmask[l] | ((level[p] >> 2) << (4 * n + j)));
    }
  }
}

}  // namespace kvc::kernels::detail

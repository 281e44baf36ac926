// Scalar reference of the KV row kernels (kv_ops.h): plain loops over groups of any size,
// elements dequantized one at a time; the accurate, simple side of every SIMD comparison, and
// the loops every ISA uses for groups smaller than 32.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/kv_ops.h"
#include "kernels/cpu/quant.h"

namespace kvc::kernels {

namespace {

// NaN goes to lo, as the SIMD max(x, lo) does, so no float-to-int conversion is undefined.
float clamp(float x, float lo, float hi) { return x > lo ? (x < hi ? x : hi) : lo; }

// Round to nearest even for |x| <= 2^22 in the default rounding mode, without a libm call
// (baseline x86-64 has no roundss): adding 1.5 * 2^23 leaves no fraction bits.
float round_even_small(float x) {
  constexpr float k_magic = 12582912.0f;
  return (x + k_magic) - k_magic;  // not folded to x: no -ffast-math in this project
}

}  // namespace

namespace detail {
float kv_group_scale(float d, uint16_t* d_bits) {
  *d_bits = f32_to_fp16(d);
  const float d16 = fp16_to_f32(*d_bits);
  // A group holding an infinity (or a scale past F16's range) would decode to inf * 0 = NaN:
  // it is stored as zeros instead, so every group decodes to finite values.
  if (!std::isfinite(d16)) {
    *d_bits = 0;
    return 0.0f;
  }
  return d16 != 0.0f ? 1.0f / d16 : 0.0f;
}
void quantize_q_heads(const float* q, int n_q, int head_dim, int8_t* q8, float* q_scale, int32_t* q_sums) {
  for (int j = 0; j < n_q; ++j) {
    const float* qj = q + static_cast<int64_t>(j) * head_dim;
    int8_t* oj = q8 + static_cast<int64_t>(j) * head_dim;
    float amax = 0.0f;
    for (int i = 0; i < head_dim; ++i) {
      const float a = std::fabs(qj[i]);
      amax = a > amax ? a : amax;  // maxss; std::fmax is a libm call on baseline x86-64
    }
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < head_dim; ++i) {
      const float v = qj[i] * id;
      oj[i] = static_cast<int8_t>(round_even_small(clamp(v, -127.0f, 127.0f)));
    }
    q_scale[j] = d;
    for (int l = 0; l < head_dim / 4; ++l) {
      q_sums[static_cast<int64_t>(j) * (head_dim / 4) + l] = oj[4 * l] + oj[4 * l + 1] + oj[4 * l + 2] + oj[4 * l + 3];
    }
  }
}

}  // namespace detail

namespace {

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void encode_q8(const float* x, int64_t n, int group, uint8_t* out) {
  const int64_t group_bytes = kv_group_bytes(KvType::q8, group);
  for (int64_t g = 0; g < n / group; ++g, x += group, out += group_bytes) {
    float amax = 0.0f;
    for (int i = 0; i < group; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    uint16_t d_bits = 0;
    const float id = detail::kv_group_scale(amax / 127.0f, &d_bits);
    store_u16(out, d_bits);
    for (int i = 0; i < group; ++i) {
      const float q = std::nearbyint(clamp(x[i] * id, -127.0f, 127.0f));
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

void encode_q4(const float* x, int64_t n, int group, uint8_t* out) {
  const int64_t group_bytes = kv_group_bytes(KvType::q4, group);
  const int half = group / 2;
  for (int64_t g = 0; g < n / group; ++g, x += group, out += group_bytes) {
    float mx = x[0];
    float mn = x[0];
    for (int i = 1; i < group; ++i) {
      mx = std::fmax(mx, x[i]);
      mn = std::fmin(mn, x[i]);
    }
    const float m = mx >= -mn ? mx : mn;
    uint16_t d_bits = 0;
    const float id = detail::kv_group_scale(m / -8.0f, &d_bits);
    store_u16(out, d_bits);
    uint8_t nib[k_kv_group_max];
    for (int i = 0; i < group; ++i) {
      nib[i] = static_cast<uint8_t>(std::nearbyint(clamp(x[i] * id, -8.0f, 7.0f)) + 8.0f);
    }
    for (int j = 0; j < half; ++j) out[2 + j] = static_cast<uint8_t>(nib[j] | nib[j + half] << 4);
  }
}

// The Q4 bytes of a group with the scale that minimises the group's squared error: candidate
// scales d = m / s (m the value of largest magnitude, s in +-[6.5, 9] in steps of 1/4) each
// pick levels, the least-squares scale for those levels is rounded to F16, and the levels are
// chosen again for it; the F16 scale with the smallest error wins (the first on a tie). The
// plain rule d = -m / 8 is among the candidates, so the error never exceeds its error.
void encode_q4_fitted(const float* x, int64_t n, int group, uint8_t* out) {
  const int64_t group_bytes = kv_group_bytes(KvType::q4, group);
  const int half = group / 2;
  for (int64_t g = 0; g < n / group; ++g, x += group, out += group_bytes) {
    float mx = x[0];
    float mn = x[0];
    for (int i = 1; i < group; ++i) {
      mx = std::fmax(mx, x[i]);
      mn = std::fmin(mn, x[i]);
    }
    const float m = mx >= -mn ? mx : mn;
    uint16_t best_bits = 0;
    float best_id = detail::kv_group_scale(m / -8.0f, &best_bits);
    auto error_of = [&](float id, float d) {
      float e = 0.0f;
      for (int i = 0; i < group; ++i) {
        const float r = x[i] - d * std::nearbyint(clamp(x[i] * id, -8.0f, 7.0f));
        e += r * r;
      }
      return e;
    };
    float best_err = error_of(best_id, fp16_to_f32(best_bits));
    for (int c = 0; c < 22; ++c) {
      const float sdiv = c < 11 ? -(6.5f + 0.25f * static_cast<float>(c)) : 6.5f + 0.25f * static_cast<float>(c - 11);
      const float id0 = m != 0.0f ? sdiv / m : 0.0f;
      float sxq = 0.0f;
      float sqq = 0.0f;
      for (int i = 0; i < group; ++i) {
        const float q = std::nearbyint(clamp(x[i] * id0, -8.0f, 7.0f));
        sxq += x[i] * q;
        sqq += q * q;
      }
      if (sqq == 0.0f) continue;
      uint16_t bits = 0;
      const float id = detail::kv_group_scale(sxq / sqq, &bits);
      const float e = error_of(id, fp16_to_f32(bits));
      if (e < best_err) {
        best_err = e;
        best_bits = bits;
        best_id = id;
      }
    }
    store_u16(out, best_bits);
    uint8_t nib[k_kv_group_max];
    for (int i = 0; i < group; ++i) {
      nib[i] = static_cast<uint8_t>(std::nearbyint(clamp(x[i] * best_id, -8.0f, 7.0f)) + 8.0f);
    }
    for (int j = 0; j < half; ++j) out[2 + j] = static_cast<uint8_t>(nib[j] | nib[j + half] << 4);
  }
}

// Element i of the group at p (of `group` elements), dequantized.
float q8_at(const uint8_t* p, float d, int i) { return d * static_cast<float>(static_cast<int8_t>(p[2 + i])); }
float q4_at(const uint8_t* p, float d, int i, int group) {
  const int half = group / 2;
  const uint8_t b = p[2 + (i % half)];
  const int nib = i < half ? (b & 0x0f) : (b >> 4);
  return d * static_cast<float>(nib - 8);
}

// q4c K: the nibble itself (no scale header, no offset; the block's scale is in q).
float q4c_at(const uint8_t* p, int i, int group) {
  const int half = group / 2;
  const uint8_t b = p[i % half];
  return static_cast<float>(i < half ? (b & 0x0f) : (b >> 4));
}

template <KvType T>
float dequant_at(const uint8_t* p, float d, int i, int group) {
  if constexpr (T == KvType::q4c) return q4c_at(p, i, group);
  return T == KvType::q8 ? q8_at(p, d, i) : q4_at(p, d, i, group);
}

// Bytes of one group of K rows scored by the loops below (q4c: nibbles only).
template <KvType T>
int64_t score_group_bytes(int group) {
  return T == KvType::q4c ? group / 2 : kv_group_bytes(T, group);
}

template <KvType T>
void decode_scalar(const uint8_t* in, int64_t n, int group, float* out) {
  const int64_t group_bytes = kv_group_bytes(T, group);
  for (int64_t g = 0; g < n / group; ++g, in += group_bytes, out += group) {
    const float d = fp16_to_f32(load_u16(in));
    for (int i = 0; i < group; ++i) out[i] = dequant_at<T>(in, d, i, group);
  }
}

template <KvType T>
void score_range_scalar(const float* q, int n_q, int head_dim, int group, const uint8_t* k, int64_t k_stride_bytes,
                        int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  const int n_groups = head_dim / group;
  const int64_t group_bytes = score_group_bytes<T>(group);
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* kt = k + t * k_stride_bytes;
    for (int j = 0; j < n_q; ++j) {
      const float* qj = q + static_cast<int64_t>(j) * head_dim;
      float dot = 0.0f;
      for (int g = 0; g < n_groups; ++g) {
        const uint8_t* kg = kt + g * group_bytes;
        const float d = T == KvType::q4c ? 1.0f : fp16_to_f32(load_u16(kg));
        for (int i = 0; i < group; ++i) dot += qj[g * group + i] * dequant_at<T>(kg, d, i, group);
      }
      scores[j * score_stride + t] = dot * scale;
    }
  }
}

template <KvType T>
void accumulate_range_scalar(const float* w, int64_t w_stride, int n_q, const uint8_t* v, int64_t v_stride_bytes,
                             int64_t n_pos, int head_dim, int group, float* acc) {
  const int n_groups = head_dim / group;
  const int64_t group_bytes = kv_group_bytes(T, group);
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* vt = v + t * v_stride_bytes;
    for (int j = 0; j < n_q; ++j) {
      const float wj = w[j * w_stride + t];
      float* aj = acc + static_cast<int64_t>(j) * head_dim;
      for (int g = 0; g < n_groups; ++g) {
        const uint8_t* vg = vt + g * group_bytes;
        const float d = fp16_to_f32(load_u16(vg));
        for (int i = 0; i < group; ++i) aj[g * group + i] += wj * dequant_at<T>(vg, d, i, group);
      }
    }
  }
}

// The table's entries: the loops above at group 32.
void encode_q8_32(const float* x, int64_t n, uint8_t* out) { encode_q8(x, n, k_kv_group_max, out); }
void encode_q4_32(const float* x, int64_t n, uint8_t* out) { encode_q4(x, n, k_kv_group_max, out); }
template <KvType T>
void decode_32(const uint8_t* in, int64_t n, float* out) {
  decode_scalar<T>(in, n, k_kv_group_max, out);
}
template <KvType T>
void score_range_32(const float* q, int n_q, int head_dim, const uint8_t* k, int64_t k_stride_bytes, int64_t n_pos,
                    float scale, float* scores, int64_t score_stride) {
  score_range_scalar<T>(q, n_q, head_dim, k_kv_group_max, k, k_stride_bytes, n_pos, scale, scores, score_stride);
}
template <KvType T>
void accumulate_range_32(const float* w, int64_t w_stride, int n_q, const uint8_t* v, int64_t v_stride_bytes,
                         int64_t n_pos, int head_dim, float* acc) {
  accumulate_range_scalar<T>(w, w_stride, n_q, v, v_stride_bytes, n_pos, head_dim, k_kv_group_max, acc);
}

constexpr KvOpsTable k_scalar_table = {
    Isa::scalar,
    encode_q8_32,
    encode_q4_32,
    decode_32<KvType::q8>,
    decode_32<KvType::q4>,
    score_range_32<KvType::q8>,
    score_range_32<KvType::q4>,
    accumulate_range_32<KvType::q8>,
    accumulate_range_32<KvType::q4>,
    nullptr,  // K scores stay float: no integer dot product on this ISA
    nullptr,
    detail::score_range_any_group,
    detail::accumulate_range_any_group,
    detail::scale_q_f16_scalar,
    score_range_32<KvType::q4c>,
    nullptr,
};

}  // namespace

const KvOpsTable& kv_ops_scalar() { return k_scalar_table; }

namespace detail {

void encode_row_q4_fitted(int group, const float* x, int64_t n, uint8_t* out) { encode_q4_fitted(x, n, group, out); }

void scale_q_f16_scalar(const float* q, int n_q, int head_dim, const uint16_t* d, const uint16_t* m, float scale,
                        float* out, float* qm) {
  for (int j = 0; j < n_q; ++j) {
    float dot = 0.0f;
    for (int c = 0; c < head_dim; ++c) {
      out[j * head_dim + c] = q[j * head_dim + c] * fp16_to_f32(d[c]);
      dot += q[j * head_dim + c] * fp16_to_f32(m[c]);
    }
    qm[j] = dot * scale;
  }
}

void encode_row_any_group(KvType type, int group, const float* x, int64_t n, uint8_t* out) {
  if (type == KvType::q8) {
    encode_q8(x, n, group, out);
  } else {
    encode_q4(x, n, group, out);
  }
}

void decode_row_any_group(KvType type, int group, const uint8_t* in, int64_t n, float* out) {
  if (type == KvType::q8) {
    decode_scalar<KvType::q8>(in, n, group, out);
  } else {
    decode_scalar<KvType::q4>(in, n, group, out);
  }
}

void score_range_any_group(KvType type, int group, const float* q, int n_q, int head_dim, const uint8_t* k,
                           int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores, int64_t score_stride) {
  if (type == KvType::q8) {
    score_range_scalar<KvType::q8>(q, n_q, head_dim, group, k, k_stride_bytes, n_pos, scale, scores, score_stride);
  } else if (type == KvType::q4c) {
    score_range_scalar<KvType::q4c>(q, n_q, head_dim, group, k, k_stride_bytes, n_pos, scale, scores, score_stride);
  } else {
    score_range_scalar<KvType::q4>(q, n_q, head_dim, group, k, k_stride_bytes, n_pos, scale, scores, score_stride);
  }
}

void accumulate_range_any_group(KvType type, int group, const float* w, int64_t w_stride, int n_q, const uint8_t* v,
                                int64_t v_stride_bytes, int64_t n_pos, int head_dim, float* acc) {
  if (type == KvType::q8) {
    accumulate_range_scalar<KvType::q8>(w, w_stride, n_q, v, v_stride_bytes, n_pos, head_dim, group, acc);
  } else {
    accumulate_range_scalar<KvType::q4>(w, w_stride, n_q, v, v_stride_bytes, n_pos, head_dim, group, acc);
  }
}

}  // namespace detail

}  // namespace kvc::kernels

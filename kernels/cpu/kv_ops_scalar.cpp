// Scalar reference of the KV row kernels (kv_ops.h): plain loops over groups, elements
// dequantized one at a time; the accurate, simple side of every SIMD comparison.
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
  return d16 != 0.0f ? 1.0f / d16 : 0.0f;
}
void quantize_q_heads(const float* q, int n_q, int head_dim, int8_t* q8, float* q_scale,
                      int32_t* q_sums) {
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

constexpr int64_t k_q8_bytes = kv_group_bytes(KvType::q8);
constexpr int64_t k_q4_bytes = kv_group_bytes(KvType::q4);

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void encode_q8_scalar(const float* x, int64_t n, uint8_t* out) {
  for (int64_t g = 0; g < n / k_kv_group; ++g, x += k_kv_group, out += k_q8_bytes) {
    float amax = 0.0f;
    for (int i = 0; i < k_kv_group; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    uint16_t d_bits = 0;
    const float id = detail::kv_group_scale(amax / 127.0f, &d_bits);
    store_u16(out, d_bits);
    for (int i = 0; i < k_kv_group; ++i) {
      const float q = std::nearbyint(clamp(x[i] * id, -127.0f, 127.0f));
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

void encode_q4_scalar(const float* x, int64_t n, uint8_t* out) {
  for (int64_t g = 0; g < n / k_kv_group; ++g, x += k_kv_group, out += k_q4_bytes) {
    float mx = x[0];
    float mn = x[0];
    for (int i = 1; i < k_kv_group; ++i) {
      mx = std::fmax(mx, x[i]);
      mn = std::fmin(mn, x[i]);
    }
    const float m = mx >= -mn ? mx : mn;
    uint16_t d_bits = 0;
    const float id = detail::kv_group_scale(m / -8.0f, &d_bits);
    store_u16(out, d_bits);
    uint8_t nib[k_kv_group];
    for (int i = 0; i < k_kv_group; ++i) {
      nib[i] = static_cast<uint8_t>(std::nearbyint(clamp(x[i] * id, -8.0f, 7.0f)) + 8.0f);
    }
    for (int j = 0; j < k_kv_group / 2; ++j) {
      out[2 + j] = static_cast<uint8_t>(nib[j] | nib[j + k_kv_group / 2] << 4);
    }
  }
}

// Element i of the group at p, dequantized.
float q8_at(const uint8_t* p, float d, int i) { return d * static_cast<float>(static_cast<int8_t>(p[2 + i])); }
float q4_at(const uint8_t* p, float d, int i) {
  const uint8_t b = p[2 + (i % (k_kv_group / 2))];
  const int nib = i < k_kv_group / 2 ? (b & 0x0f) : (b >> 4);
  return d * static_cast<float>(nib - 8);
}

template <KvType T>
float dequant_at(const uint8_t* p, float d, int i) {
  return T == KvType::q8 ? q8_at(p, d, i) : q4_at(p, d, i);
}

template <KvType T>
void decode_scalar(const uint8_t* in, int64_t n, float* out) {
  for (int64_t g = 0; g < n / k_kv_group; ++g, in += kv_group_bytes(T), out += k_kv_group) {
    const float d = fp16_to_f32(load_u16(in));
    for (int i = 0; i < k_kv_group; ++i) out[i] = dequant_at<T>(in, d, i);
  }
}

template <KvType T>
void score_range_scalar(const float* q, int n_q, int head_dim, const uint8_t* k,
                        int64_t k_stride_bytes, int64_t n_pos, float scale, float* scores,
                        int64_t score_stride) {
  const int n_groups = head_dim / k_kv_group;
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* kt = k + t * k_stride_bytes;
    for (int j = 0; j < n_q; ++j) {
      const float* qj = q + static_cast<int64_t>(j) * head_dim;
      float dot = 0.0f;
      for (int g = 0; g < n_groups; ++g) {
        const uint8_t* kg = kt + g * kv_group_bytes(T);
        const float d = fp16_to_f32(load_u16(kg));
        for (int i = 0; i < k_kv_group; ++i) dot += qj[g * k_kv_group + i] * dequant_at<T>(kg, d, i);
      }
      scores[j * score_stride + t] = dot * scale;
    }
  }
}

template <KvType T>
void accumulate_range_scalar(const float* w, int64_t w_stride, int n_q, const uint8_t* v,
                             int64_t v_stride_bytes, int64_t n_pos, int head_dim, float* acc) {
  const int n_groups = head_dim / k_kv_group;
  for (int64_t t = 0; t < n_pos; ++t) {
    const uint8_t* vt = v + t * v_stride_bytes;
    for (int j = 0; j < n_q; ++j) {
      const float wj = w[j * w_stride + t];
      float* aj = acc + static_cast<int64_t>(j) * head_dim;
      for (int g = 0; g < n_groups; ++g) {
        const uint8_t* vg = vt + g * kv_group_bytes(T);
        const float d = fp16_to_f32(load_u16(vg));
        for (int i = 0; i < k_kv_group; ++i) aj[g * k_kv_group + i] += wj * dequant_at<T>(vg, d, i);
      }
    }
  }
}

constexpr KvOpsTable k_scalar_table = {
    Isa::scalar,
    encode_q8_scalar,
    encode_q4_scalar,
    decode_scalar<KvType::q8>,
    decode_scalar<KvType::q4>,
    score_range_scalar<KvType::q8>,
    score_range_scalar<KvType::q4>,
    accumulate_range_scalar<KvType::q8>,
    accumulate_range_scalar<KvType::q4>,
    nullptr,  // K scores stay float: no integer dot product on this ISA
    nullptr,
};

}  // namespace

const KvOpsTable& kv_ops_scalar() { return k_scalar_table; }

}  // namespace kvc::kernels

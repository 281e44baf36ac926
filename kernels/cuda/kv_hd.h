// Decode and encode of KV cache rows (F16, INT8, INT4 groups of 32; kernels/cpu/kv_format.h)
// for host and device, producing the same values and bytes as the CPU scalar reference.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/kv_format.h"
#include "kernels/cuda/hd.h"

namespace kvc::kernels::cuda {

constexpr int k_kv_q8_group_bytes = 2 + k_kv_group;
constexpr int k_kv_q4_group_bytes = 2 + k_kv_group / 2;

KVC_HD float hd_fmax(float a, float b) { return fmaxf(a, b); }
KVC_HD float hd_fmin(float a, float b) { return fminf(a, b); }
KVC_HD float hd_fabs(float a) { return fabsf(a); }
KVC_HD float hd_nearbyint(float a) { return nearbyintf(a); }
// NaN goes to lo, as in the CPU reference.
KVC_HD float hd_clamp(float x, float lo, float hi) { return x > lo ? (x < hi ? x : hi) : lo; }

// Bytes of one row of n elements (n a multiple of 32 for q8 / q4).
KVC_HD int64_t kv_row_bytes(KvType t, int64_t n) {
  switch (t) {
    case KvType::f16: return 2 * n;
    case KvType::q8: return n / k_kv_group * k_kv_q8_group_bytes;
    case KvType::q4: return n / k_kv_group * k_kv_q4_group_bytes;
  }
  return 0;
}

// Element i of a stored row.
KVC_HD float kv_value(KvType t, const uint8_t* row, int64_t i) {
  switch (t) {
    case KvType::f16: return hd_fp16_to_f32(hd_load_u16(row + 2 * i));
    case KvType::q8: {
      const uint8_t* g = row + (i / k_kv_group) * k_kv_q8_group_bytes;
      return hd_fp16_to_f32(hd_load_u16(g)) * static_cast<float>(static_cast<int8_t>(g[2 + i % k_kv_group]));
    }
    case KvType::q4: {
      const uint8_t* g = row + (i / k_kv_group) * k_kv_q4_group_bytes;
      const int j = static_cast<int>(i % k_kv_group);
      const uint8_t b = g[2 + j % (k_kv_group / 2)];
      const int nib = j < k_kv_group / 2 ? (b & 0x0f) : (b >> 4);
      return hd_fp16_to_f32(hd_load_u16(g)) * static_cast<float>(nib - 8);
    }
  }
  return 0.0f;
}

// 1 / (d rounded to F16), or 0; *d_bits = d as F16.
KVC_HD float kv_group_inv_scale(float d, uint16_t* d_bits) {
  *d_bits = hd_f32_to_fp16(d);
  const float d16 = hd_fp16_to_f32(*d_bits);
  return d16 != 0.0f ? 1.0f / d16 : 0.0f;
}

// Encodes one group of 32 floats x into kv_group_bytes(t) bytes at out (t = q8 or q4).
KVC_HD void kv_encode_group(KvType t, const float* x, uint8_t* out) {
  uint16_t d_bits = 0;
  if (t == KvType::q8) {
    float amax = 0.0f;
    for (int i = 0; i < k_kv_group; ++i) amax = hd_fmax(amax, hd_fabs(x[i]));
    const float id = kv_group_inv_scale(amax / 127.0f, &d_bits);
    for (int i = 0; i < k_kv_group; ++i) {
      const float q = hd_nearbyint(hd_clamp(x[i] * id, -127.0f, 127.0f));
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  } else {
    float mx = x[0], mn = x[0];
    for (int i = 1; i < k_kv_group; ++i) {
      mx = hd_fmax(mx, x[i]);
      mn = hd_fmin(mn, x[i]);
    }
    const float m = mx >= -mn ? mx : mn;
    const float id = kv_group_inv_scale(m / -8.0f, &d_bits);
    for (int j = 0; j < k_kv_group / 2; ++j) {
      const auto lo = static_cast<uint8_t>(hd_nearbyint(hd_clamp(x[j] * id, -8.0f, 7.0f)) + 8.0f);
      const auto hi = static_cast<uint8_t>(hd_nearbyint(hd_clamp(x[j + 16] * id, -8.0f, 7.0f)) + 8.0f);
      out[2 + j] = static_cast<uint8_t>(lo | hi << 4);
    }
  }
  out[0] = static_cast<uint8_t>(d_bits & 0xff);
  out[1] = static_cast<uint8_t>(d_bits >> 8);
}

// Encodes a row of n floats (n a multiple of 32 for q8 / q4) into kv_row_bytes(t, n) bytes.
KVC_HD void kv_encode_row(KvType t, const float* x, int64_t n, uint8_t* out) {
  if (t == KvType::f16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = hd_f32_to_fp16(x[i]);
      out[2 * i] = static_cast<uint8_t>(h & 0xff);
      out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return;
  }
  const int64_t gb = t == KvType::q8 ? k_kv_q8_group_bytes : k_kv_q4_group_bytes;
  for (int64_t g = 0; g < n / k_kv_group; ++g) kv_encode_group(t, x + g * k_kv_group, out + g * gb);
}

}  // namespace kvc::kernels::cuda

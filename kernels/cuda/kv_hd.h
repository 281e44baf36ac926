// Decode and encode of KV cache rows (F16, INT8, INT4 with groups of 32, 16 or 8;
// kernels/cpu/kv_format.h) for host and device, producing the same values and bytes as the
// CPU scalar reference.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/kv_format.h"
#include "kernels/cuda/hd.h"

namespace kvc::kernels::cuda {

KVC_HD float hd_fmax(float a, float b) { return fmaxf(a, b); }
KVC_HD float hd_fmin(float a, float b) { return fminf(a, b); }
KVC_HD float hd_fabs(float a) { return fabsf(a); }
KVC_HD float hd_nearbyint(float a) { return nearbyintf(a); }
// NaN goes to lo, as in the CPU reference.
KVC_HD float hd_clamp(float x, float lo, float hi) { return x > lo ? (x < hi ? x : hi) : lo; }

// Bytes of one group of `group` elements of a quantized type (t = q8 or q4).
KVC_HD int64_t kv_group_bytes_hd(KvType t, int group) { return t == KvType::q8 ? 2 + group : 2 + group / 2; }

// Bytes of one row of n elements; for q8 / q4 group is 32, 16 or 8 and divides n (F16
// ignores it). Equals kernels::row_bytes(t, group, n).
KVC_HD int64_t kv_row_bytes(KvType t, int group, int64_t n) {
  return t == KvType::f16 ? 2 * n : n / group * kv_group_bytes_hd(t, group);
}

// Element i of a stored row whose groups have `group` elements.
KVC_HD float kv_value(KvType t, int group, const uint8_t* row, int64_t i) {
  if (t == KvType::f16) return hd_fp16_to_f32(hd_load_u16(row + 2 * i));
  const uint8_t* g = row + (i / group) * kv_group_bytes_hd(t, group);
  const int j = static_cast<int>(i % group);
  const float d = hd_fp16_to_f32(hd_load_u16(g));
  if (t == KvType::q8) return d * static_cast<float>(static_cast<int8_t>(g[2 + j]));
  const int half = group / 2;
  const uint8_t b = g[2 + j % half];
  const int nib = j < half ? (b & 0x0f) : (b >> 4);
  return d * static_cast<float>(nib - 8);
}

// 1 / (d rounded to F16), or 0; *d_bits = d as F16.
KVC_HD float kv_group_inv_scale(float d, uint16_t* d_bits) {
  *d_bits = hd_f32_to_fp16(d);
  const float d16 = hd_fp16_to_f32(*d_bits);
  return d16 != 0.0f ? 1.0f / d16 : 0.0f;
}

// Encodes one group of `group` floats x (32, 16 or 8) into kv_group_bytes_hd(t, group) bytes
// at out (t = q8 or q4).
KVC_HD void kv_encode_group(KvType t, int group, const float* x, uint8_t* out) {
  uint16_t d_bits = 0;
  if (t == KvType::q8) {
    float amax = 0.0f;
    for (int i = 0; i < group; ++i) amax = hd_fmax(amax, hd_fabs(x[i]));
    const float id = kv_group_inv_scale(amax / 127.0f, &d_bits);
    for (int i = 0; i < group; ++i) {
      const float q = hd_nearbyint(hd_clamp(x[i] * id, -127.0f, 127.0f));
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  } else {
    float mx = x[0], mn = x[0];
    for (int i = 1; i < group; ++i) {
      mx = hd_fmax(mx, x[i]);
      mn = hd_fmin(mn, x[i]);
    }
    const float m = mx >= -mn ? mx : mn;
    const float id = kv_group_inv_scale(m / -8.0f, &d_bits);
    const int half = group / 2;
    for (int j = 0; j < half; ++j) {
      const auto lo = static_cast<uint8_t>(hd_nearbyint(hd_clamp(x[j] * id, -8.0f, 7.0f)) + 8.0f);
      const auto hi = static_cast<uint8_t>(hd_nearbyint(hd_clamp(x[j + half] * id, -8.0f, 7.0f)) + 8.0f);
      out[2 + j] = static_cast<uint8_t>(lo | hi << 4);
    }
  }
  out[0] = static_cast<uint8_t>(d_bits & 0xff);
  out[1] = static_cast<uint8_t>(d_bits >> 8);
}

// Encodes a row of n floats into kv_row_bytes(t, group, n) bytes (for q8 / q4, group divides n).
KVC_HD void kv_encode_row(KvType t, int group, const float* x, int64_t n, uint8_t* out) {
  if (t == KvType::f16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = hd_f32_to_fp16(x[i]);
      out[2 * i] = static_cast<uint8_t>(h & 0xff);
      out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return;
  }
  const int64_t gb = kv_group_bytes_hd(t, group);
  for (int64_t g = 0; g < n / group; ++g) kv_encode_group(t, group, x + g * group, out + g * gb);
}

}  // namespace kvc::kernels::cuda

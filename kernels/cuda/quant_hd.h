// Element access, block dequantization and block dot products of the GGUF weight formats
// (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, F32, F16, BF16) as they
// lie in the file, for host and device.
//
// Layouts are kernels/cpu/quant.h's; every function reads a block through a byte pointer
// (no alignment needed) and uses the same operation order as kernels/cpu dequantize_row, so
// on the host (no FMA contraction) the values are bit-identical to it.
#pragma once

#include <cstdint>

#include "kernels/cpu/dtype.h"
#include "kernels/cuda/hd.h"

namespace kvc::kernels::cuda {

constexpr int k_qk0 = 32;   // elements per Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL block
constexpr int k_qkk = 256;  // elements per k-quant block
constexpr int k_q8_0_bytes = 34;
constexpr int k_q4_0_bytes = 18;
constexpr int k_q4_1_bytes = 20;
constexpr int k_q5_0_bytes = 22;
constexpr int k_q5_1_bytes = 24;
constexpr int k_iq4_nl_bytes = 18;
constexpr int k_q2_k_bytes = 84;
constexpr int k_q3_k_bytes = 110;
constexpr int k_q4_k_bytes = 144;
constexpr int k_q5_k_bytes = 176;
constexpr int k_q6_k_bytes = 210;

// Elements and bytes of one block of `t` (1 element for plain floats); 0 for unknown types.
KVC_HD int block_elems(DType t) {
  switch (t) {
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::iq4_nl: return k_qk0;
    case DType::q2_k:
    case DType::q3_k:
    case DType::q4_k:
    case DType::q5_k:
    case DType::q6_k: return k_qkk;
    case DType::f32:
    case DType::f16:
    case DType::bf16: return 1;
    default: return 0;
  }
}
KVC_HD int block_bytes(DType t) {
  switch (t) {
    case DType::q8_0: return k_q8_0_bytes;
    case DType::q4_0: return k_q4_0_bytes;
    case DType::q4_1: return k_q4_1_bytes;
    case DType::q5_0: return k_q5_0_bytes;
    case DType::q5_1: return k_q5_1_bytes;
    case DType::iq4_nl: return k_iq4_nl_bytes;
    case DType::q2_k: return k_q2_k_bytes;
    case DType::q3_k: return k_q3_k_bytes;
    case DType::q4_k: return k_q4_k_bytes;
    case DType::q5_k: return k_q5_k_bytes;
    case DType::q6_k: return k_q6_k_bytes;
    case DType::f32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    default: return 0;
  }
}

// Q4_K sub-block j's 6-bit scale and min from the 12 packed scale bytes s.
KVC_HD void q4_k_scale_min(int j, const uint8_t* s, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Element i of one block, dequantized; i in [0, block_elems).
KVC_HD float q8_0_value(const uint8_t* b, int i) {
  return hd_fp16_to_f32(hd_load_u16(b)) * static_cast<float>(static_cast<int8_t>(b[2 + i]));
}
KVC_HD float q4_0_value(const uint8_t* b, int i) {
  const uint8_t q = b[2 + (i & 15)];
  const int nib = i < 16 ? (q & 0x0F) : (q >> 4);
  return hd_fp16_to_f32(hd_load_u16(b)) * static_cast<float>(nib - 8);
}
// Nibble i of 16 packed bytes: byte i low for i < 16, byte i - 16 high.
KVC_HD int nibble32(const uint8_t* qs, int i) { return i < 16 ? (qs[i] & 0x0F) : (qs[i - 16] >> 4); }
KVC_HD int fifth_bit(const uint8_t* qh, int i) { return (qh[i / 8] >> (i % 8)) & 1; }  // bit i of a LE uint32
KVC_HD float q4_1_value(const uint8_t* b, int i) {
  return static_cast<float>(nibble32(b + 4, i)) * hd_fp16_to_f32(hd_load_u16(b)) + hd_fp16_to_f32(hd_load_u16(b + 2));
}
KVC_HD float q5_0_value(const uint8_t* b, int i) {
  const int q = nibble32(b + 6, i) | (fifth_bit(b + 2, i) << 4);
  return static_cast<float>(q - 16) * hd_fp16_to_f32(hd_load_u16(b));
}
KVC_HD float q5_1_value(const uint8_t* b, int i) {
  const int q = nibble32(b + 8, i) | (fifth_bit(b + 4, i) << 4);
  return static_cast<float>(q) * hd_fp16_to_f32(hd_load_u16(b)) + hd_fp16_to_f32(hd_load_u16(b + 2));
}
KVC_HD float iq4_nl_value(const uint8_t* b, int i) {
  constexpr int8_t levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return hd_fp16_to_f32(hd_load_u16(b)) * static_cast<float>(levels[nibble32(b + 2, i)]);
}
// Q2_K / Q3_K: value i = 128 n + 32 j + l is bits 2j+1..2j of qs[32 n + l]; Q3_K's third bit
// is bit 4 n + j of hmask[l]; sub-block i / 16.
KVC_HD int low2(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }
KVC_HD float q2_k_value(const uint8_t* b, int i) {
  const uint8_t sc = b[i / 16];
  const float dl = hd_fp16_to_f32(hd_load_u16(b + 80)) * static_cast<float>(sc & 0x0F);
  const float ml = hd_fp16_to_f32(hd_load_u16(b + 82)) * static_cast<float>(sc >> 4);
  return dl * static_cast<float>(low2(b + 16, i)) - ml;
}
KVC_HD float q3_k_value(const uint8_t* b, int i) {
  const uint8_t* s = b + 96;
  const int j = i / 16;
  const int sc = ((j < 8 ? s[j] & 15 : s[j - 8] >> 4) | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
  const int high = (b[i % 32] >> (4 * (i / 128) + (i % 128) / 32)) & 1;
  const float dl = hd_fp16_to_f32(hd_load_u16(b + 108)) * static_cast<float>(sc);
  return dl * static_cast<float>(low2(b + 32, i) - (high ? 0 : 4));
}
KVC_HD float q5_k_value(const uint8_t* b, int i) {
  const int pair = i / 64, within = i % 64, l = within % 32;
  const int sub = 2 * pair + (within >= 32 ? 1 : 0);
  int sc, m;
  q4_k_scale_min(sub, b + 4, &sc, &m);
  const uint8_t q = b[48 + 32 * pair + l];
  const int v = (within >= 32 ? (q >> 4) : (q & 0x0F)) | (((b[16 + l] >> sub) & 1) << 4);
  const float d = hd_fp16_to_f32(hd_load_u16(b)) * static_cast<float>(sc);
  const float mn = hd_fp16_to_f32(hd_load_u16(b + 2)) * static_cast<float>(m);
  return d * static_cast<float>(v) - mn;
}
KVC_HD float q4_k_value(const uint8_t* b, int i) {
  const int pair = i / 64, within = i % 64, l = within % 32;
  const int sub = 2 * pair + (within >= 32 ? 1 : 0);
  int sc, m;
  q4_k_scale_min(sub, b + 4, &sc, &m);
  const uint8_t q = b[16 + 32 * pair + l];
  const int nib = within >= 32 ? (q >> 4) : (q & 0x0F);
  const float d = hd_fp16_to_f32(hd_load_u16(b)) * static_cast<float>(sc);
  const float mn = hd_fp16_to_f32(hd_load_u16(b + 2)) * static_cast<float>(m);
  return d * static_cast<float>(nib) - mn;
}
KVC_HD float q6_k_value(const uint8_t* b, int i) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
  const uint8_t lo_byte = ql[64 * half + l + (quarter & 1) * 32];
  const int lo = quarter < 2 ? (lo_byte & 0x0F) : (lo_byte >> 4);
  const int hi = (qh[32 * half + l] >> (2 * quarter)) & 3;
  const int q = (lo | (hi << 4)) - 32;
  const float d = hd_fp16_to_f32(hd_load_u16(b + 208));
  return d * static_cast<float>(scales[8 * half + l / 16 + 2 * quarter]) * static_cast<float>(q);
}

// Element i of a row of `t` (any supported weight type); row = the row's first byte.
KVC_HD float weight_value(DType t, const uint8_t* row, int64_t i) {
  switch (t) {
    case DType::f32:
      return hd_bits_float(static_cast<uint32_t>(row[4 * i]) | static_cast<uint32_t>(row[4 * i + 1]) << 8 |
                           static_cast<uint32_t>(row[4 * i + 2]) << 16 | static_cast<uint32_t>(row[4 * i + 3]) << 24);
    case DType::f16: return hd_fp16_to_f32(hd_load_u16(row + 2 * i));
    case DType::bf16: return hd_bf16_to_f32(hd_load_u16(row + 2 * i));
    case DType::q8_0: return q8_0_value(row + (i / k_qk0) * k_q8_0_bytes, static_cast<int>(i % k_qk0));
    case DType::q4_0: return q4_0_value(row + (i / k_qk0) * k_q4_0_bytes, static_cast<int>(i % k_qk0));
    case DType::q4_1: return q4_1_value(row + (i / k_qk0) * k_q4_1_bytes, static_cast<int>(i % k_qk0));
    case DType::q5_0: return q5_0_value(row + (i / k_qk0) * k_q5_0_bytes, static_cast<int>(i % k_qk0));
    case DType::q5_1: return q5_1_value(row + (i / k_qk0) * k_q5_1_bytes, static_cast<int>(i % k_qk0));
    case DType::iq4_nl: return iq4_nl_value(row + (i / k_qk0) * k_iq4_nl_bytes, static_cast<int>(i % k_qk0));
    case DType::q2_k: return q2_k_value(row + (i / k_qkk) * k_q2_k_bytes, static_cast<int>(i % k_qkk));
    case DType::q3_k: return q3_k_value(row + (i / k_qkk) * k_q3_k_bytes, static_cast<int>(i % k_qkk));
    case DType::q4_k: return q4_k_value(row + (i / k_qkk) * k_q4_k_bytes, static_cast<int>(i % k_qkk));
    case DType::q5_k: return q5_k_value(row + (i / k_qkk) * k_q5_k_bytes, static_cast<int>(i % k_qkk));
    case DType::q6_k: return q6_k_value(row + (i / k_qkk) * k_q6_k_bytes, static_cast<int>(i % k_qkk));
    default: return 0.0f;
  }
}

// out[i] = element i of block b of quantized type t, i in [0, block_elems(t)).
KVC_HD void dequantize_block(DType t, const uint8_t* b, float* out) {
  const int n = block_elems(t);
  for (int i = 0; i < n; ++i) out[i] = weight_value(t, b, i);
}

// sum_i w_i * x_i over one block of a quantized type: the block's 32 or 256 elements
// against x (that many floats). Scales are applied per sub-block, after the integer-valued
// sums, so the result differs from dequantize-then-dot by float rounding only.
KVC_HD float dot_block(DType t, const uint8_t* b, const float* x) {
  switch (t) {
    case DType::q8_0: {
      float s = 0.0f;
      for (int i = 0; i < k_qk0; ++i) s += static_cast<float>(static_cast<int8_t>(b[2 + i])) * x[i];
      return hd_fp16_to_f32(hd_load_u16(b)) * s;
    }
    case DType::q4_0: {
      float s = 0.0f;
      for (int j = 0; j < 16; ++j) {
        s += static_cast<float>((b[2 + j] & 0x0F) - 8) * x[j];
        s += static_cast<float>((b[2 + j] >> 4) - 8) * x[j + 16];
      }
      return hd_fp16_to_f32(hd_load_u16(b)) * s;
    }
    case DType::q4_k: {
      const float d = hd_fp16_to_f32(hd_load_u16(b));
      const float dmin = hd_fp16_to_f32(hd_load_u16(b + 2));
      float total = 0.0f;
      for (int sub = 0; sub < 8; ++sub) {
        int sc, m;
        q4_k_scale_min(sub, b + 4, &sc, &m);
        const uint8_t* q = b + 16 + 32 * (sub / 2);
        const float* xs = x + 32 * sub;
        float sq = 0.0f, sx = 0.0f;
        for (int l = 0; l < 32; ++l) {
          const int nib = (sub & 1) ? (q[l] >> 4) : (q[l] & 0x0F);
          sq += static_cast<float>(nib) * xs[l];
          sx += xs[l];
        }
        total += d * static_cast<float>(sc) * sq - dmin * static_cast<float>(m) * sx;
      }
      return total;
    }
    case DType::q6_k: {
      const float d = hd_fp16_to_f32(hd_load_u16(b + 208));
      const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
      float total = 0.0f;
      for (int g = 0; g < 16; ++g) {  // sub-blocks of 16 in element order
        float s = 0.0f;
        for (int e = 0; e < 16; ++e) {
          const int i = 16 * g + e;
          const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
          const uint8_t lo_byte = b[64 * half + l + (quarter & 1) * 32];
          const int lo = quarter < 2 ? (lo_byte & 0x0F) : (lo_byte >> 4);
          const int hi = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
          s += static_cast<float>((lo | (hi << 4)) - 32) * x[i];
        }
        const int half = g / 8, quarter = (g % 8) / 2;
        total += d * static_cast<float>(scales[8 * half + (g % 2) + 2 * quarter]) * s;
      }
      return total;
    }
    default: {
      float s = 0.0f;
      for (int i = 0; i < block_elems(t); ++i) s += weight_value(t, b, i) * x[i];
      return s;
    }
  }
}

// out[0, 32) = elements [32 c, 32 c + 32) of a row of quantized type t (row = its first
// byte): the unit a matmul lane dequantizes once and reuses for a tile of tokens.
// Same values as weight_value, with each block's scales read once.
KVC_HD void dequantize_chunk32(DType t, const uint8_t* row, int64_t c, float* out) {
  switch (t) {
    case DType::q8_0: {
      const uint8_t* b = row + c * k_q8_0_bytes;
      const float d = hd_fp16_to_f32(hd_load_u16(b));
      for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(static_cast<int8_t>(b[2 + i]));
      return;
    }
    case DType::q4_0: {
      const uint8_t* b = row + c * k_q4_0_bytes;
      const float d = hd_fp16_to_f32(hd_load_u16(b));
      for (int j = 0; j < 16; ++j) {
        out[j] = d * static_cast<float>((b[2 + j] & 0x0F) - 8);
        out[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
      }
      return;
    }
    case DType::q4_k: {
      const uint8_t* b = row + (c / 8) * k_q4_k_bytes;
      const int sub = static_cast<int>(c % 8);
      int sc, m;
      q4_k_scale_min(sub, b + 4, &sc, &m);
      const float d = hd_fp16_to_f32(hd_load_u16(b)) * static_cast<float>(sc);
      const float mn = hd_fp16_to_f32(hd_load_u16(b + 2)) * static_cast<float>(m);
      const uint8_t* q = b + 16 + 32 * (sub / 2);
      for (int l = 0; l < 32; ++l) {
        const int nib = (sub & 1) ? (q[l] >> 4) : (q[l] & 0x0F);
        out[l] = d * static_cast<float>(nib) - mn;
      }
      return;
    }
    case DType::q6_k: {
      const uint8_t* b = row + (c / 8) * k_q6_k_bytes;
      const int half = static_cast<int>(c % 8) / 4, quarter = static_cast<int>(c % 4);
      const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
      const float d = hd_fp16_to_f32(hd_load_u16(b + 208));
      for (int l = 0; l < 32; ++l) {
        const uint8_t lo_byte = b[64 * half + l + (quarter & 1) * 32];
        const int lo = quarter < 2 ? (lo_byte & 0x0F) : (lo_byte >> 4);
        const int hi = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
        out[l] =
            d * static_cast<float>(scales[8 * half + l / 16 + 2 * quarter]) * static_cast<float>((lo | (hi << 4)) - 32);
      }
      return;
    }
    default:
      for (int i = 0; i < 32; ++i) out[i] = weight_value(t, row, 32 * c + i);
      return;
  }
}

}  // namespace kvc::kernels::cuda

// GGUF block formats (bit-exact with the GGUF/ggml definitions) and scalar (de)quantization.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/dtype.h"

namespace kvc::kernels {

// Half and bfloat16 conversions; host/device-agnostic plain arithmetic (no intrinsics).
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);  // round to nearest even
inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_bf16(float f);  // round to nearest even, NaN stays NaN

// Block layouts. d = scale, stored as fp16 unless noted.
//
//   Q8_0 (32 values):  [d:f16][qs: 32 x int8]                 x = d * q
//   Q4_0 (32 values):  [d:f16][qs: 16 bytes]                  x = d * (nibble - 8)
//                      byte j holds value j (low nibble) and value j+16 (high nibble)
//   Q4_K (256 values): [d:f16][dmin:f16][scales: 12 bytes][qs: 128 bytes]
//                      8 sub-blocks of 32 with 6-bit scale and min each:
//                      x = d * sc * nibble - dmin * m
//   Q6_K (256 values): [ql: 128][qh: 64][scales: 16 x int8][d:f16]
//                      16 sub-blocks of 16: x = d * scale * (q6 - 32)
//   Q8_K (256 values): [d:f32][qs: 256 x int8][bsums: 16 x int16 sums of 16 qs]
//
// Q4_K scales (12 bytes s) pack 8 6-bit scales sc_j and mins m_j:
//   j < 4:   sc_j = s[j] & 63                     m_j = s[j + 4] & 63
//   j >= 4:  sc_j = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4
//            m_j  = (s[j + 4] >> 4) | (s[j] >> 6) << 4
//
// Q4_K qs: 4 groups of 32 bytes; group g holds sub-block 2g in the low nibbles and
// sub-block 2g+1 in the high nibbles (value 64g + l = low of byte 32g + l,
// value 64g + 32 + l = high of the same byte).
//
// Q6_K: two halves of 128 values; half h uses ql[64h, 64h+64), qh[32h, 32h+32) and
// scales[8h, 8h+8). Within a half, for l in [0, 32):
//
//   value      low 4 bits          high 2 bits        scale
//   l          ql[l]      & 0xF    qh[l] bits 1..0    scales[l/16]
//   l + 32     ql[l + 32] & 0xF    qh[l] bits 3..2    scales[l/16 + 2]
//   l + 64     ql[l]      >> 4     qh[l] bits 5..4    scales[l/16 + 4]
//   l + 96     ql[l + 32] >> 4     qh[l] bits 7..6    scales[l/16 + 6]
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// Dequantizes n elements (a multiple of the type's block size) of any supported type.
// Bit-exact with llama.cpp's scalar dequantization (same operation order).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Quantizes n elements into `type` (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q8_k).
// Q8_0 and Q4_0 produce the same bytes as llama.cpp's reference quantizer on finite input.
// Q4_K and Q6_K use a plain per-sub-block search, not llama.cpp's importance weighting:
// good enough for benchmark and demo models, whose values are random anyway.
// In quantized targets NaN becomes 0 and +-Inf the block's largest finite magnitude.
// A length that is not a whole number of blocks, or an unknown type, is a bug (abort).
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// True when quantize_row supports `type` as a target.
bool can_quantize_to(DType type);

}  // namespace kvc::kernels

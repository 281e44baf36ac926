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
//   Q4_1 (32 values):  [d:f16][m:f16][qs: 16 bytes]           x = d * nibble + m
//   Q5_0 (32 values):  [d:f16][qh: 4 bytes][qs: 16 bytes]     x = d * (q5 - 16)
//   Q5_1 (32 values):  [d:f16][m:f16][qh: 4 bytes][qs: 16]    x = d * q5 + m
//   IQ4_NL (32 values): [d:f16][qs: 16 bytes]                 x = d * k_iq4nl_values[nibble]
//                      nibbles as Q4_0 (byte j: value j low, value j+16 high); Q5's fifth
//                      bit of value j is bit j of qh read as a little-endian uint32
//
//   MXFP4 (32 values): [e: E8M0][qs: 16 bytes]               x = 2^(e - 128) * k_mxfp4_values[nibble]
//                      nibbles as Q4_0; the levels are the e2m1 values doubled, so the scale
//                      is half of the E8M0 one (2^(e - 127)); e 0 and 1 are subnormal floats
//
//   Q2_K (256 values): [scales: 16][qs: 64][d:f16][dmin:f16]
//                      16 sub-blocks of 16, scales[s] = 4-bit scale | 4-bit min << 4:
//                      x = d * (scales[s] & 15) * q2 - dmin * (scales[s] >> 4)
//   Q3_K (256 values): [hmask: 32][qs: 64][scales: 12][d:f16]
//                      16 sub-blocks of 16 with 6-bit scales sc (stored + 32):
//                      x = d * (sc - 32) * (q2 + 4 * hbit - 4)
//   Q5_K (256 values): [d:f16][dmin:f16][scales: 12][qh: 32][qs: 128]
//                      Q4_K's scales, mins and nibbles, plus a fifth bit:
//                      x = d * sc * (nibble + 16 * hbit) - dmin * m
//
// Q2_K and Q3_K 2-bit values: two halves of 128; value p = 128 n + 32 j + l (j < 4, l < 32)
// is bits 2j+1..2j of qs[32 n + l]. Q3_K's high bit of that value is bit 4 n + j of
// hmask[l]; sub-block s = p / 16 in both.
//
// Q3_K scales (12 bytes s), 16 6-bit values:
//   low 4 bits:  s[j] & 15 for j < 8, s[j - 8] >> 4 for j >= 8
//   high 2 bits: bits 2 (j / 4) + 1 .. 2 (j / 4) of s[8 + j % 4]
//
// Q5_K's fifth bit of sub-block j (the nibble layout of Q4_K) is bit j of qh[l], l = p % 32.
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
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};

struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[16];
};

// IQ4_NL's 16 levels (a fixed non-uniform grid, denser near 0), as the GGUF format defines them.
inline constexpr int8_t k_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// MXFP4's 16 levels: the FP4 (e2m1) values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, doubled.
inline constexpr int8_t k_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half the value of an E8M0 scale byte, 2^(e - 128), exactly (a subnormal float for e < 2).
inline float e8m0_to_f32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 &&
              sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// Dequantizes n elements (a multiple of the type's block size) of any supported type.
// Bit-exact with llama.cpp's scalar dequantization (same operation order).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Quantizes n elements into `type` (every type above).
// Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 follow the closed-form rule of llama.cpp's reference
// quantizer (the block's extreme values fix the grid) and produce its bytes on finite input.
// MXFP4 follows llama.cpp's reference quantizer too: e = floor(log2 max|x|) - 2 + 127, each value
// the nearest level (the first of equal ones).
// The k-quants and IQ4_NL use our own per-sub-block least-squares search, not llama.cpp's
// weighted one: other bytes, an error of the same size (tests/kernels/test_quant_models.cpp).
// In quantized targets NaN becomes 0 and +-Inf the block's largest finite magnitude.
// A length that is not a whole number of blocks, or an unknown type, is a bug (abort).
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// True when quantize_row supports `type` as a target.
bool can_quantize_to(DType type);

}  // namespace kvc::kernels

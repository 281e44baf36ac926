// Scalar reference kernels: activation quantization and per-format dot products.
#include "kernels/cpu/vec_dot.h"

#include <cmath>
#include <cstring>

namespace kvc::kernels {

namespace {

// Quantizes one block of n values with a shared scale; returns the scale d.
float quantize_block(const float* x, int n, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
  return amax / 127.0f;
}

void quantize_q8_0_scalar(const float* x, int64_t n, int8_t* qs, float* d) {
  for (int64_t b = 0; b < n / 32; ++b) d[b] = quantize_block(x + 32 * b, 32, qs + 32 * b);
}

void quantize_q8_k_scalar(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / 256; ++b) d[b] = quantize_block(x + 256 * b, 256, qs + 256 * b);
  for (int64_t g = 0; g < n / 16; ++g) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += qs[16 * g + i];
    bsums[g] = static_cast<int16_t>(s);
  }
}

template <typename Block, float (*dot)(const Block*, const int8_t*, const float*, int64_t)>
void tile_q8_0_form(const uint8_t* w, size_t w_row_bytes, int64_t n_rows, const QuantizedActs& a, int64_t n_tokens,
                    float* y, int64_t y_stride) {
  const int64_t n_blocks = a.n_cols / 32;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      y[t * y_stride + r] =
          dot(reinterpret_cast<const Block*>(w + r * w_row_bytes), a.qs + t * a.n_cols, a.d + t * n_blocks, n_blocks);
    }
  }
}

template <typename Block, float (*dot)(const Block*, const int8_t*, const float*, const int16_t*, int64_t)>
void tile_q8_k_form(const uint8_t* w, size_t w_row_bytes, int64_t n_rows, const QuantizedActs& a, int64_t n_tokens,
                    float* y, int64_t y_stride) {
  const int64_t n_blocks = a.n_cols / 256;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      y[t * y_stride + r] = dot(reinterpret_cast<const Block*>(w + r * w_row_bytes), a.qs + t * a.n_cols,
                                a.d + t * n_blocks, a.bsums + t * (a.n_cols / 16), n_blocks);
    }
  }
}

template <typename Elem, float (*dot)(const Elem*, const float*, int64_t)>
void tile_float(const uint8_t* w, size_t w_row_bytes, int64_t n_rows, const float* x, int64_t n_cols, int64_t n_tokens,
                float* y, int64_t y_stride) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      y[t * y_stride + r] = dot(reinterpret_cast<const Elem*>(w + r * w_row_bytes), x + t * n_cols, n_cols);
    }
  }
}

}  // namespace

void unpack_q4_k_scales(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

void unpack_q3_k_scales(const uint8_t* s, int8_t* sc) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    sc[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

float vec_dot_q4_0_q8_0(const BlockQ4_0* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 32 * b;
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += ((w[b].qs[j] & 0xF) - 8) * a[j];
      isum += ((w[b].qs[j] >> 4) - 8) * a[j + 16];
    }
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q8_0_q8_0(const BlockQ8_0* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 32 * b;
    int isum = 0;
    for (int j = 0; j < 32; ++j) isum += w[b].qs[j] * a[j];
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum);
  }
  return sum;
}

namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Sum of a block's 32 activation qs (for the formats with an offset m: sum (d q + m) a).
int sum32(const int8_t* a) {
  int s = 0;
  for (int j = 0; j < 32; ++j) s += a[j];
  return s;
}

}  // namespace

float vec_dot_q4_1_q8_0(const BlockQ4_1* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 32 * b;
    int isum = 0;
    for (int j = 0; j < 16; ++j) isum += (w[b].qs[j] & 0xF) * a[j] + (w[b].qs[j] >> 4) * a[j + 16];
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum) +
           fp16_to_f32(w[b].m) * a_d[b] * static_cast<float>(sum32(a));
  }
  return sum;
}

float vec_dot_q5_0_q8_0(const BlockQ5_0* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 32 * b;
    const uint32_t qh = load_u32(w[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = (w[b].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (w[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      isum += (q0 - 16) * a[j] + (q1 - 16) * a[j + 16];
    }
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q5_1_q8_0(const BlockQ5_1* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 32 * b;
    const uint32_t qh = load_u32(w[b].qh);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = (w[b].qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
      const int q1 = (w[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
      isum += q0 * a[j] + q1 * a[j + 16];
    }
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum) +
           fp16_to_f32(w[b].m) * a_d[b] * static_cast<float>(sum32(a));
  }
  return sum;
}

float vec_dot_iq4_nl_q8_0(const BlockIQ4_NL* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 32 * b;
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += k_iq4nl_values[w[b].qs[j] & 0xF] * a[j] + k_iq4nl_values[w[b].qs[j] >> 4] * a[j + 16];
    }
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_mxfp4_q8_0(const BlockMXFP4* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 32 * b;
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += k_mxfp4_values[w[b].qs[j] & 0xF] * a[j] + k_mxfp4_values[w[b].qs[j] >> 4] * a[j + 16];
    }
    sum += e8m0_to_f32_half(w[b].e) * a_d[b] * static_cast<float>(isum);
  }
  return sum;
}

// Q2_K and Q3_K value at position p of a block: 2 low bits at bits 2j..2j+1 of qs[32n + l]
// (p = 128n + 32j + l); Q3_K's high bit at bit 4n + j of hmask[l].
float vec_dot_q2_k_q8_k(const BlockQ2_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 256 * b;
    const int16_t* bs = a_bsums + 16 * b;
    int isum = 0;  // sum_s sc_s * sum_i q_i a_i over sub-blocks s of 16
    int msum = 0;  // sum_s m_s * sum_i a_i
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int e = 0; e < 16; ++e) {
        const int p = 16 * s + e, n = p / 128, j = (p % 128) / 32, l = p % 32;
        dot += ((w[b].qs[32 * n + l] >> (2 * j)) & 3) * a[p];
      }
      isum += (w[b].scales[s] & 0xF) * dot;
      msum += (w[b].scales[s] >> 4) * bs[s];
    }
    sum +=
        a_d[b] * (fp16_to_f32(w[b].d) * static_cast<float>(isum) - fp16_to_f32(w[b].dmin) * static_cast<float>(msum));
  }
  return sum;
}

float vec_dot_q3_k_q8_k(const BlockQ3_K* w, const int8_t* a_qs, const float* a_d, const int16_t* /*a_bsums*/,
                        int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 256 * b;
    int8_t sc[16];
    unpack_q3_k_scales(w[b].scales, sc);
    int isum = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int e = 0; e < 16; ++e) {
        const int p = 16 * s + e, n = p / 128, j = (p % 128) / 32, l = p % 32;
        const int low = (w[b].qs[32 * n + l] >> (2 * j)) & 3;
        const int high = (w[b].hmask[l] >> (4 * n + j)) & 1;
        dot += (low + 4 * high - 4) * a[p];
      }
      isum += sc[s] * dot;
    }
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_q5_k_q8_k(const BlockQ5_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 256 * b;
    const int16_t* bs = a_bsums + 16 * b;
    uint8_t sc[8], m[8];
    unpack_q4_k_scales(w[b].scales, sc, m);
    int isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      const uint8_t* q = w[b].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      int dot = 0;
      for (int i = 0; i < 32; ++i) {
        const int v = ((q[i] >> shift) & 0xF) | (((w[b].qh[i] >> j) & 1) << 4);
        dot += v * a[32 * j + i];
      }
      isum += sc[j] * dot;
      msum += m[j] * (bs[2 * j] + bs[2 * j + 1]);
    }
    sum +=
        a_d[b] * (fp16_to_f32(w[b].d) * static_cast<float>(isum) - fp16_to_f32(w[b].dmin) * static_cast<float>(msum));
  }
  return sum;
}

float vec_dot_q4_k_q8_k(const BlockQ4_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 256 * b;
    const int16_t* bs = a_bsums + 16 * b;
    uint8_t sc[8], m[8];
    unpack_q4_k_scales(w[b].scales, sc, m);
    int isum = 0;  // sum_j sc_j * sum_i q_i a_i over sub-blocks j of 32
    int msum = 0;  // sum_j m_j * sum_i a_i
    for (int j = 0; j < 8; ++j) {
      const uint8_t* q = w[b].qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      int dot = 0;
      for (int i = 0; i < 32; ++i) dot += ((q[i] >> shift) & 0xF) * a[32 * j + i];
      isum += sc[j] * dot;
      msum += m[j] * (bs[2 * j] + bs[2 * j + 1]);
    }
    sum +=
        a_d[b] * (fp16_to_f32(w[b].d) * static_cast<float>(isum) - fp16_to_f32(w[b].dmin) * static_cast<float>(msum));
  }
  return sum;
}

// Q6_K value at position p of a block (0..255), as the unsigned 6-bit q (x = d*scale*(q-32)):
//   half h = p / 128, l = p % 32, quarter k = (p % 128) / 32
//   low 4 bits:  ql[64h + l + 32*(k % 2)], low nibble for k < 2, high nibble for k >= 2
//   high 2 bits: bits 2k, 2k+1 of qh[32h + l]
//   scale:       scales[p / 16]
float vec_dot_q6_k_q8_k(const BlockQ6_K* w, const int8_t* a_qs, const float* a_d, const int16_t* /*a_bsums*/,
                        int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int8_t* a = a_qs + 256 * b;
    int isum = 0;
    for (int g = 0; g < 16; ++g) {  // sub-blocks of 16
      int dot = 0;
      for (int i = 0; i < 16; ++i) {
        const int p = 16 * g + i;
        const int h = p / 128, l = p % 32, k = (p % 128) / 32;
        const int lo = (w[b].ql[64 * h + l + 32 * (k % 2)] >> (k < 2 ? 0 : 4)) & 0xF;
        const int hi = (w[b].qh[32 * h + l] >> (2 * k)) & 3;
        dot += ((lo | (hi << 4)) - 32) * a[p];
      }
      isum += w[b].scales[g] * dot;
    }
    sum += fp16_to_f32(w[b].d) * a_d[b] * static_cast<float>(isum);
  }
  return sum;
}

float vec_dot_f32(const float* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float vec_dot_f16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += fp16_to_f32(w[i]) * x[i];
  return sum;
}

float vec_dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += bf16_to_f32(w[i]) * x[i];
  return sum;
}

const KernelSet& kernels_scalar() {
  static const KernelSet k{
      "scalar",
      quantize_q8_0_scalar,
      quantize_q8_k_scalar,
      tile_q8_0_form<BlockQ4_0, vec_dot_q4_0_q8_0>,
      tile_q8_0_form<BlockQ4_1, vec_dot_q4_1_q8_0>,
      tile_q8_0_form<BlockQ5_0, vec_dot_q5_0_q8_0>,
      tile_q8_0_form<BlockQ5_1, vec_dot_q5_1_q8_0>,
      tile_q8_0_form<BlockIQ4_NL, vec_dot_iq4_nl_q8_0>,
      tile_q8_0_form<BlockQ8_0, vec_dot_q8_0_q8_0>,
      tile_q8_k_form<BlockQ2_K, vec_dot_q2_k_q8_k>,
      tile_q8_k_form<BlockQ3_K, vec_dot_q3_k_q8_k>,
      tile_q8_k_form<BlockQ4_K, vec_dot_q4_k_q8_k>,
      tile_q8_k_form<BlockQ5_K, vec_dot_q5_k_q8_k>,
      tile_q8_k_form<BlockQ6_K, vec_dot_q6_k_q8_k>,
      tile_float<float, vec_dot_f32>,
      tile_float<uint16_t, vec_dot_f16>,
      tile_float<uint16_t, vec_dot_bf16>,
      tile_q8_0_form<BlockMXFP4, vec_dot_mxfp4_q8_0>,
  };
  return k;
}

QuantTileFn quant_tile(const KernelSet& ks, DType type) {
  switch (type) {
    case DType::q4_0: return ks.q4_0;
    case DType::q4_1: return ks.q4_1;
    case DType::q5_0: return ks.q5_0;
    case DType::q5_1: return ks.q5_1;
    case DType::iq4_nl: return ks.iq4_nl;
    case DType::q8_0: return ks.q8_0;
    case DType::q2_k: return ks.q2_k;
    case DType::q3_k: return ks.q3_k;
    case DType::q4_k: return ks.q4_k;
    case DType::q5_k: return ks.q5_k;
    case DType::q6_k: return ks.q6_k;
    case DType::mxfp4: return ks.mxfp4;
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::q8_k: break;
  }
  return nullptr;
}

bool takes_q8_k(DType type) {
  return quant_tile(kernels_scalar(), type) != nullptr && dtype_info(type).block_elems == 256;
}

}  // namespace kvc::kernels

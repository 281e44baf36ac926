// Dot products of weight rows with activations, one kernel set per ISA, behind matmul().
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/quant.h"

namespace kvc::kernels {

// Activations of a run of tokens, quantized to 8 bits for integer dot products.
//   qs:    (n_tokens, n_cols) int8, row stride n_cols
//   d:     (n_tokens, n_cols / block) float scales, block = 32 (Q8_0 form) or 256 (Q8_K form);
//          value = d * q. The scale is kept in f32 (GGUF's Q8_0 stores it as f16).
//   bsums: (n_tokens, n_cols / 16) int16 sums of each 16 qs; Q8_K form only, else null.
// Invariant: every q lies in [-127, 127] (so q, -q and 128 + q fit the SIMD tricks).
struct QuantizedActs {
  const int8_t* qs = nullptr;
  const float* d = nullptr;
  const int16_t* bsums = nullptr;
  int64_t n_cols = 0;
  // Nonzero: the same serial means the same activations, values and token count (the pieces of
  // one chunk of one matrix product), so a kernel may keep what it derived from them.
  uint64_t serial = 0;
};

// Quantizes n values (a multiple of 32 / 256): d = max|x| / 127, q = nearest(x * 127 / max|x|),
// ties to even. Every ISA's version gives bit-identical output, so integer block sums
// agree across ISAs.
//   Q8_0 form: qs (n), d (n / 32).   Q8_K form: qs (n), d (n / 256), bsums (n / 16).
using QuantizeQ8_0Fn = void (*)(const float* x, int64_t n, int8_t* qs, float* d);
using QuantizeQ8_KFn = void (*)(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);

// y[t * y_stride + r] = row r of w . token t, for r in [0, n_rows), t in [0, n_tokens).
//   w: n_rows rows of w_row_bytes each (GGUF layout); a: tokens [0, n_tokens) of the run.
using QuantTileFn = void (*)(const uint8_t* w, size_t w_row_bytes, int64_t n_rows, const QuantizedActs& a,
                             int64_t n_tokens, float* y, int64_t y_stride);
//   x: (n_tokens, n_cols) float, row stride n_cols.
using FloatTileFn = void (*)(const uint8_t* w, size_t w_row_bytes, int64_t n_rows, const float* x, int64_t n_cols,
                             int64_t n_tokens, float* y, int64_t y_stride);

struct KernelSet {
  const char* name;
  QuantizeQ8_0Fn quantize_q8_0;
  QuantizeQ8_KFn quantize_q8_k;
  QuantTileFn q4_0;    // x Q8_0 form
  QuantTileFn q4_1;    // x Q8_0 form
  QuantTileFn q5_0;    // x Q8_0 form
  QuantTileFn q5_1;    // x Q8_0 form
  QuantTileFn iq4_nl;  // x Q8_0 form
  QuantTileFn q8_0;    // x Q8_0 form
  QuantTileFn q2_k;    // x Q8_K form
  QuantTileFn q3_k;    // x Q8_K form
  QuantTileFn q4_k;    // x Q8_K form
  QuantTileFn q5_k;    // x Q8_K form
  QuantTileFn q6_k;    // x Q8_K form
  FloatTileFn f32;
  FloatTileFn f16;
  FloatTileFn bf16;
  QuantTileFn mxfp4;  // x Q8_0 form
};

const KernelSet& kernels_scalar();
const KernelSet& kernels_avx2();         // call only when cpu_features().avx2
const KernelSet& kernels_avx512_vnni();  // call only when cpu_features().avx512_vnni
// avx512_vnni's kernels with AMX tiles for Q4_K prefill; call only when cpu_features().amx_int8.
const KernelSet& kernels_avx512_amx();

// Scalar reference dot products: one weight row of n_blocks blocks with one token's
// activations. Integer sums inside each (sub-)block, then scaled as the format defines.
float vec_dot_q4_0_q8_0(const BlockQ4_0* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
float vec_dot_q8_0_q8_0(const BlockQ8_0* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
float vec_dot_q4_1_q8_0(const BlockQ4_1* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
float vec_dot_q5_0_q8_0(const BlockQ5_0* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
float vec_dot_q5_1_q8_0(const BlockQ5_1* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
float vec_dot_iq4_nl_q8_0(const BlockIQ4_NL* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
float vec_dot_mxfp4_q8_0(const BlockMXFP4* w, const int8_t* a_qs, const float* a_d, int64_t n_blocks);
float vec_dot_q2_k_q8_k(const BlockQ2_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks);
float vec_dot_q3_k_q8_k(const BlockQ3_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks);
float vec_dot_q5_k_q8_k(const BlockQ5_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks);
float vec_dot_q4_k_q8_k(const BlockQ4_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks);
float vec_dot_q6_k_q8_k(const BlockQ6_K* w, const int8_t* a_qs, const float* a_d, const int16_t* a_bsums,
                        int64_t n_blocks);
float vec_dot_f32(const float* w, const float* x, int64_t n);
float vec_dot_f16(const uint16_t* w, const float* x, int64_t n);
float vec_dot_bf16(const uint16_t* w, const float* x, int64_t n);

// The 8 6-bit scales and 8 6-bit mins of a Q4_K (or Q5_K) block, unpacked from its 12 bytes.
void unpack_q4_k_scales(const uint8_t* packed, uint8_t* sc, uint8_t* m);

// The 16 scales of a Q3_K block, unpacked from its 12 bytes, in [-32, 31].
void unpack_q3_k_scales(const uint8_t* packed, int8_t* sc);

// Which kernel of `ks` multiplies weights of `type` (a quantized type), and whether its
// activations take the Q8_K form (256-value blocks with bsums) rather than the Q8_0 form.
QuantTileFn quant_tile(const KernelSet& ks, DType type);
bool takes_q8_k(DType type);

}  // namespace kvc::kernels

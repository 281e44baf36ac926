// Matrix products of quantized weights with float activations: y = x * W^T.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/thread_pool.h"

namespace kvc::kernels {

// A weight matrix as stored in GGUF: n_rows rows of n_cols elements, each row
// row_bytes(type, n_cols) long, rows contiguous. GGUF's ne[0] is n_cols.
struct MatrixView {
  DType type = DType::f32;
  const void* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
};

// y[t][r] = sum_c x[t][c] * W[r][c] for t in [0, n_tokens), r in [0, n_rows).
//   x: (n_tokens, n_cols) float, row-major;  y: (n_tokens, n_rows) float, row-major.
// Quantized weights are consumed by integer dot products: x is quantized per token to
// Q8_0 (for the 32-value block types: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) or Q8_K (for
// the k-quants Q2_K .. Q6_K), as llama.cpp does.
// F32/F16/BF16 weights use float dot products. Work is split across `pool` by rows;
// with n_tokens > 1 several tokens share each loaded weight block (prefill).
void matmul(const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// One product of matmul_many: y[t * y_stride + r] = sum_c x[t][c] * W[r][c].
//   x: (n_tokens, w.n_cols) float, row-major;  y: (n_tokens, y_stride), y_stride >= w.n_rows
//   (0: w.n_rows), so two jobs can fill the two halves of one buffer's rows.
struct MatmulJob {
  MatrixView w;
  const float* x = nullptr;
  int64_t n_tokens = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// Several independent products in one pass over the pool (the experts of a mixture-of-experts
// layer): the activations of each distinct (x, n_tokens) are quantized once, even when several
// jobs read them, then every job's rows are cut into one list of pieces that the threads share,
// so they split the work across the jobs, not only across one matrix's rows. Each job's result
// is what matmul() gives for it, bit for bit. No two jobs may write the same output element.
void matmul_many(std::span<const MatmulJob> jobs, ThreadPool& pool);

// The same product through the scalar reference kernels only (single-threaded), for tests.
void matmul_reference(const MatrixView& w, const float* x, int64_t n_tokens, float* y);

// The same product on a chosen ISA (falls back to scalar when the CPU lacks it), for tests
// and benchmarks comparing variants. The 512-bit kernels need VNNI: Isa::avx512 runs AVX2's.
void matmul_isa(Isa isa, const MatrixView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace kvc::kernels

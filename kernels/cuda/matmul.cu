// Matrix products y = x W^T on GGUF-layout weights (every type of quant_hd.h):
// one warp per output row, each lane dequantizes 32-element chunks of the row once and
// multiplies them with a tile of up to k_token_tile tokens (decode is a tile of one).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/quant_hd.h"

namespace kvc::kernels::cuda {

namespace {

constexpr int k_warps_per_block = 4;  // output rows per thread block
constexpr int k_token_tile = 8;

__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// grid: (ceil(n_rows / k_warps_per_block), ceil(n_tokens / k_token_tile)).
//   w: n_rows rows of row_bytes;  x: (n_tokens, n_cols);  y: (n_tokens, n_rows).
// Quantized rows are whole 32- or 256-element blocks; float rows (F32, F16, BF16) may end in a
// tail of fewer than 32 columns (stories260K's FFN is 172 wide), which the lanes take one each.
__global__ void matmul_kernel(DType t, const uint8_t* w, int64_t n_rows, int64_t n_cols, size_t row_bytes,
                              const float* x, int64_t n_tokens, float* y, const float* bias) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * k_warps_per_block + threadIdx.x / 32;
  if (r >= n_rows) return;  // whole warps leave together; no block-wide sync below
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * k_token_tile;
  const int nt = static_cast<int>(n_tokens - t0 < k_token_tile ? n_tokens - t0 : k_token_tile);
  const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
  float acc[k_token_tile];
  for (float& a : acc) a = 0.0f;
  float chunk[32];
  for (int64_t c = lane; c < n_cols / 32; c += 32) {
    dequantize_chunk32(t, row, c, chunk);
    for (int j = 0; j < k_token_tile; ++j) {
      if (j >= nt) break;
      const float* xs = x + (t0 + j) * n_cols + 32 * c;
      float s = 0.0f;
      for (int i = 0; i < 32; ++i) s += chunk[i] * xs[i];
      acc[j] += s;
    }
  }
  for (int64_t i = 32 * (n_cols / 32) + lane; i < n_cols; i += 32) {
    const float wv = weight_value(t, row, i);
    for (int j = 0; j < k_token_tile; ++j) {
      if (j >= nt) break;
      acc[j] += wv * x[(t0 + j) * n_cols + i];
    }
  }
  for (int j = 0; j < k_token_tile; ++j) {
    if (j >= nt) break;
    const float v = warp_sum(acc[j]);
    if (lane == 0) y[(t0 + j) * n_rows + r] = v + (bias ? bias[r] : 0.0f);
  }
}

}  // namespace

void launch_matmul(DType t, const void* w, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens, float* y,
                   const float* bias, Stream s) {
  if (n_tokens <= 0 || n_rows <= 0) return;
  const size_t row_bytes = static_cast<size_t>(n_cols / block_elems(t)) * static_cast<size_t>(block_bytes(t));
  const dim3 grid(static_cast<unsigned>((n_rows + k_warps_per_block - 1) / k_warps_per_block),
                  static_cast<unsigned>((n_tokens + k_token_tile - 1) / k_token_tile));
  matmul_kernel<<<grid, 32 * k_warps_per_block, 0, static_cast<cudaStream_t>(s)>>>(
      t, static_cast<const uint8_t*>(w), n_rows, n_cols, row_bytes, x, n_tokens, y, bias);
}

}  // namespace kvc::kernels::cuda

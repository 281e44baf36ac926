// Element-wise CUDA kernels of the forward pass: embedding lookup, rmsnorm, rope, silu*mul, add.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/quant_hd.h"

namespace kvc::kernels::cuda {

namespace {

constexpr int k_threads = 256;

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

unsigned grid_for(int64_t n) { return static_cast<unsigned>((n + k_threads - 1) / k_threads); }

// One thread block per token: x[t] = dequantized row tokens[t] of the table.
__global__ void embed_kernel(DType t, const uint8_t* table, int64_t n_rows, int64_t n_cols, size_t row_bytes,
                             const int32_t* tokens, float* x) {
  const int64_t tok = blockIdx.x;
  const int32_t id = tokens[tok];
  float* out = x + tok * n_cols;
  const bool valid = id >= 0 && id < n_rows;
  const uint8_t* row = table + static_cast<size_t>(valid ? id : 0) * row_bytes;
  for (int64_t i = threadIdx.x; i < n_cols; i += blockDim.x) out[i] = valid ? weight_value(t, row, i) : 0.0f;
}

// One thread block per row; the sum of squares in double, as the CPU reference: each warp
// sums its lanes' parts with shuffles, then every thread adds the warps' sums.
__global__ void rmsnorm_kernel(const float* x, const float* w, int64_t n, float eps, float* out) {
  __shared__ double warp_sums[k_threads / 32];
  const float* xr = x + blockIdx.x * n;
  float* o = out + blockIdx.x * n;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(xr[i]) * static_cast<double>(xr[i]);
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  double total = 0.0;
  for (int wi = 0; wi < k_threads / 32; ++wi) total += warp_sums[wi];
  const auto inv_rms = static_cast<float>(1.0 / sqrt(total / static_cast<double>(n) + static_cast<double>(eps)));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = xr[i] * inv_rms * w[i];
}

// One thread block per token; angles in double as on the CPU. A pair's angle depends on its
// index k only, not on the head: the block works out each k's cosine and sine once (shared
// memory, 2 * n_rot / 2 floats) and every head's pairs use them.
__global__ void rope_kernel(float* x, const int64_t* positions, int n_heads, int head_dim, RopeArgs a) {
  extern __shared__ float rope_cs[];  // [half] cosines, then [half] sines
  const int half = a.n_rot / 2;
  float* xt = x + static_cast<int64_t>(blockIdx.x) * n_heads * head_dim;
  const double pos = static_cast<double>(positions[blockIdx.x]);
  for (int k = threadIdx.x; k < half; k += blockDim.x) {
    const double inv_freq =
        static_cast<double>(a.freq_scale) * pow(static_cast<double>(a.freq_base), -2.0 * k / a.n_rot);
    const double theta = pos * inv_freq;
    rope_cs[k] = static_cast<float>(cos(theta));
    rope_cs[half + k] = static_cast<float>(sin(theta));
  }
  __syncthreads();
  for (int it = threadIdx.x; it < n_heads * half; it += blockDim.x) {
    const int h = it / half, k = it % half;
    const float c = rope_cs[k];
    const float sn = rope_cs[half + k];
    float* xh = xt + static_cast<int64_t>(h) * head_dim;
    const int ia = a.interleaved ? 2 * k : k;
    const int ib = a.interleaved ? 2 * k + 1 : k + half;
    const float va = xh[ia], vb = xh[ib];
    xh[ia] = va * c - vb * sn;
    xh[ib] = va * sn + vb * c;
  }
}

__global__ void silu_mul_kernel(float* gate, const float* up, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const float g = gate[i];
    gate[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}

}  // namespace

bool supports_weight_type(DType t) { return block_elems(t) > 0 && t != DType::q8_k; }

void launch_embed(DType t, const void* table, int64_t n_rows, int64_t n_cols, const int32_t* tokens, int64_t n_tokens,
                  float* x, Stream s) {
  if (n_tokens <= 0) return;
  const size_t row_bytes = static_cast<size_t>(n_cols / block_elems(t)) * static_cast<size_t>(block_bytes(t));
  embed_kernel<<<static_cast<unsigned>(n_tokens), k_threads, 0, as_stream(s)>>>(t, static_cast<const uint8_t*>(table),
                                                                                n_rows, n_cols, row_bytes, tokens, x);
}

void launch_rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out, Stream s) {
  if (n_tokens <= 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(n_tokens), k_threads, 0, as_stream(s)>>>(x, w, n, eps, out);
}

void launch_rope(float* x, int64_t n_tokens, const int64_t* positions, int n_heads, int head_dim, const RopeArgs& a,
                 Stream s) {
  if (n_tokens <= 0 || a.n_rot <= 0 || n_heads <= 0) return;
  const size_t shared = 2 * static_cast<size_t>(a.n_rot / 2) * sizeof(float);
  rope_kernel<<<static_cast<unsigned>(n_tokens), 128, shared, as_stream(s)>>>(x, positions, n_heads, head_dim, a);
}

void launch_silu_mul(float* gate, const float* up, int64_t n, Stream s) {
  if (n > 0) silu_mul_kernel<<<grid_for(n), k_threads, 0, as_stream(s)>>>(gate, up, n);
}

void launch_add(float* x, const float* y, int64_t n, Stream s) {
  if (n > 0) add_kernel<<<grid_for(n), k_threads, 0, as_stream(s)>>>(x, y, n);
}

}  // namespace kvc::kernels::cuda

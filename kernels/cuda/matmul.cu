// Matrix products y = x W^T on GGUF-layout weights (every type of quant_hd.h).
//
// One warp per output row, k_warps_per_block rows per thread block, and a tile of up to
// k_token_tile tokens per block (decode is a tile of one): each lane turns 32-element chunks
// of the row into floats in registers once and multiplies them with every token of the tile.
// The kernel is instantiated per weight type, so a chunk's decoding has no run-time switch and
// its 32 values stay in registers; Q8_0, Q4_0, Q4_K and Q6_K read their quants 16 or 32 bits
// at a time, the other types element by element (weight_value). Quantized rows are whole
// blocks, so their chunks are whole and their activations are read four floats at a time
// (when x is 16-byte aligned);
// float rows (F32, F16, BF16) may end in a tail of fewer than 32 columns (stories260K's FFN is
// 172 wide), which the lanes take one column each.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/quant_hd.h"

namespace kvc::kernels::cuda {

namespace {

constexpr int k_warps_per_block = 8;  // output rows per thread block
constexpr int k_token_tile = 8;

__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

constexpr bool is_float_type(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// w[0, 32) = elements [32 c, 32 c + 32) of a row of type T.
template <DType T>
__device__ __forceinline__ void chunk_values(const uint8_t* row, int64_t c, float* w) {
  if constexpr (T == DType::q8_0) {
    const uint8_t* b = row + c * k_q8_0_bytes;  // 34-byte blocks: 2-byte aligned
    const auto* h = reinterpret_cast<const uint16_t*>(b);
    const float d = hd_fp16_to_f32(h[0]);
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const uint16_t v = h[1 + k];
      w[2 * k] = d * static_cast<float>(static_cast<int8_t>(v & 0xff));
      w[2 * k + 1] = d * static_cast<float>(static_cast<int8_t>(v >> 8));
    }
  } else if constexpr (T == DType::q4_0) {
    const uint8_t* b = row + c * k_q4_0_bytes;  // 18-byte blocks: 2-byte aligned
    const auto* h = reinterpret_cast<const uint16_t*>(b);
    const float d = hd_fp16_to_f32(h[0]);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint16_t v = h[1 + k];
      const int q0 = v & 0xff, q1 = v >> 8;
      w[2 * k] = d * static_cast<float>((q0 & 0x0F) - 8);
      w[2 * k + 16] = d * static_cast<float>((q0 >> 4) - 8);
      w[2 * k + 1] = d * static_cast<float>((q1 & 0x0F) - 8);
      w[2 * k + 17] = d * static_cast<float>((q1 >> 4) - 8);
    }
  } else if constexpr (T == DType::q4_k) {
    const uint8_t* b = row + (c / 8) * k_q4_k_bytes;  // 144-byte blocks: 16-byte aligned
    const int sub = static_cast<int>(c % 8);
    int sc, m;
    q4_k_scale_min(sub, b + 4, &sc, &m);
    const auto* h = reinterpret_cast<const uint16_t*>(b);
    const float d = hd_fp16_to_f32(h[0]) * static_cast<float>(sc);
    const float mn = hd_fp16_to_f32(h[1]) * static_cast<float>(m);
    const auto* q = reinterpret_cast<const uint32_t*>(b + 16 + 32 * (sub / 2));
    const int shift = (sub & 1) * 4;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t v = q[k] >> shift;
#pragma unroll
      for (int e = 0; e < 4; ++e) w[4 * k + e] = d * static_cast<float>((v >> (8 * e)) & 0x0F) - mn;
    }
  } else if constexpr (T == DType::q6_k) {
    const uint8_t* b = row + (c / 8) * k_q6_k_bytes;  // 210-byte blocks: 2-byte aligned
    const int half = static_cast<int>(c % 8) / 4, quarter = static_cast<int>(c % 4);
    const auto* ql = reinterpret_cast<const uint16_t*>(b + 64 * half + (quarter & 1) * 32);
    const auto* qh = reinterpret_cast<const uint16_t*>(b + 128 + 32 * half);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = hd_fp16_to_f32(*reinterpret_cast<const uint16_t*>(b + 208));
    const float d0 = d * static_cast<float>(scales[8 * half + 2 * quarter]);
    const float d1 = d * static_cast<float>(scales[8 * half + 1 + 2 * quarter]);
    const int lo_shift = quarter < 2 ? 0 : 4, hi_shift = 2 * quarter;
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const uint16_t lo = ql[k], hi = qh[k];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int l = 2 * k + e;
        const int q = (((lo >> (8 * e)) >> lo_shift) & 0x0F) | ((((hi >> (8 * e)) >> hi_shift) & 3) << 4);
        w[l] = (l < 16 ? d0 : d1) * static_cast<float>(q - 32);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) w[i] = weight_value(T, row, 32 * c + i);
  }
}

// grid: (ceil(n_rows / k_warps_per_block), ceil(n_tokens / k_token_tile)).
//   w: n_rows rows of row_bytes;  x: (n_tokens, n_cols);  y: (n_tokens, n_rows).
template <DType T>
__global__ void __launch_bounds__(32 * k_warps_per_block)
    matmul_kernel(const uint8_t* w, int64_t n_rows, int64_t n_cols, size_t row_bytes, const float* x, int64_t n_tokens,
                  float* y, const float* bias, bool x_vec4) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * k_warps_per_block + threadIdx.x / 32;
  if (r >= n_rows) return;  // whole warps leave together; no block-wide sync below
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * k_token_tile;
  const int nt = static_cast<int>(n_tokens - t0 < k_token_tile ? n_tokens - t0 : k_token_tile);
  const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
  const float* xt = x + t0 * n_cols;
  float acc[k_token_tile];
#pragma unroll
  for (int j = 0; j < k_token_tile; ++j) acc[j] = 0.0f;
  for (int64_t c = lane; c < n_cols / 32; c += 32) {
    float wv[32];
    chunk_values<T>(row, c, wv);
#pragma unroll
    for (int j = 0; j < k_token_tile; ++j) {
      if (j >= nt) break;
      float s = 0.0f;
      if (is_float_type(T) || !x_vec4) {  // a row of any width, or activations not 16-byte aligned
        const float* xs = xt + j * n_cols + 32 * c;
#pragma unroll
        for (int i = 0; i < 32; ++i) s += wv[i] * xs[i];
      } else {  // whole blocks: n_cols is a multiple of 32, so every chunk keeps x's alignment
        const auto* xs = reinterpret_cast<const float4*>(xt + j * n_cols + 32 * c);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float4 v = xs[i];
          s += wv[4 * i] * v.x + wv[4 * i + 1] * v.y + wv[4 * i + 2] * v.z + wv[4 * i + 3] * v.w;
        }
      }
      acc[j] += s;
    }
  }
  if constexpr (is_float_type(T)) {
    for (int64_t i = 32 * (n_cols / 32) + lane; i < n_cols; i += 32) {
      const float wv = weight_value(T, row, i);
#pragma unroll
      for (int j = 0; j < k_token_tile; ++j) {
        if (j >= nt) break;
        acc[j] += wv * xt[j * n_cols + i];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < k_token_tile; ++j) {
    if (j >= nt) break;
    const float v = warp_sum(acc[j]);
    if (lane == 0) y[(t0 + j) * n_rows + r] = v + (bias ? bias[r] : 0.0f);
  }
}

template <DType T>
void launch_typed(const void* w, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens, float* y,
                  const float* bias, cudaStream_t s) {
  const size_t row_bytes = static_cast<size_t>(n_cols / block_elems(T)) * static_cast<size_t>(block_bytes(T));
  const dim3 grid(static_cast<unsigned>((n_rows + k_warps_per_block - 1) / k_warps_per_block),
                  static_cast<unsigned>((n_tokens + k_token_tile - 1) / k_token_tile));
  const bool x_vec4 = reinterpret_cast<uintptr_t>(x) % alignof(float4) == 0;
  matmul_kernel<T><<<grid, 32 * k_warps_per_block, 0, s>>>(static_cast<const uint8_t*>(w), n_rows, n_cols, row_bytes, x,
                                                           n_tokens, y, bias, x_vec4);
}

}  // namespace

void launch_matmul(DType t, const void* w, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens, float* y,
                   const float* bias, Stream s) {
  if (n_tokens <= 0 || n_rows <= 0) return;
  const auto st = static_cast<cudaStream_t>(s);
  switch (t) {
    case DType::f32: return launch_typed<DType::f32>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::f16: return launch_typed<DType::f16>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::bf16: return launch_typed<DType::bf16>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q8_0: return launch_typed<DType::q8_0>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q4_0: return launch_typed<DType::q4_0>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q4_1: return launch_typed<DType::q4_1>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q5_0: return launch_typed<DType::q5_0>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q5_1: return launch_typed<DType::q5_1>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::iq4_nl: return launch_typed<DType::iq4_nl>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q2_k: return launch_typed<DType::q2_k>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q3_k: return launch_typed<DType::q3_k>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q4_k: return launch_typed<DType::q4_k>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q5_k: return launch_typed<DType::q5_k>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    case DType::q6_k: return launch_typed<DType::q6_k>(w, n_rows, n_cols, x, n_tokens, y, bias, st);
    default: return;  // supports_weight_type() is false: the backend refuses such weights at upload
  }
}

}  // namespace kvc::kernels::cuda

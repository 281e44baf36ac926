// Device memory bandwidth: a grid-stride float4 copy of a large buffer, timed with CUDA events.
// Built and run by tests/cuda/device_check.sh; prints "copy_gb_s <GB/s counting read + write>".
#include <cuda_runtime.h>

#include <cstdio>

namespace {

__global__ void copy_kernel(const float4* src, float4* dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "bandwidth: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  const size_t n_bytes = size_t{1} << 30;  // 1 GiB each way: far past any L2
  const size_t n = n_bytes / sizeof(float4);
  float4 *src = nullptr, *dst = nullptr;
  if (!ok(cudaMalloc(&src, n_bytes), "cudaMalloc") || !ok(cudaMalloc(&dst, n_bytes), "cudaMalloc")) return 1;
  cudaMemset(src, 0, n_bytes);
  int n_sm = 0;
  cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0);
  const unsigned grid = static_cast<unsigned>(n_sm * 8);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  copy_kernel<<<grid, 256>>>(src, dst, n);  // warm-up
  const int reps = 20;
  cudaEventRecord(start);
  for (int r = 0; r < reps; ++r) copy_kernel<<<grid, 256>>>(src, dst, n);
  cudaEventRecord(stop);
  if (!ok(cudaEventSynchronize(stop), "copy kernel")) return 1;
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  const double gb_s = 2.0 * static_cast<double>(n_bytes) * reps / (static_cast<double>(ms) * 1e-3) / 1e9;
  std::printf("copy_gb_s %.1f\n", gb_s);
  cudaFree(src);
  cudaFree(dst);
  return 0;
}

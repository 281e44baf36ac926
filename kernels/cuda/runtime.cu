// Device discovery, memory, copies and streams of cuda_ops.h over the CUDA runtime.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_ops.h"

namespace kvc::kernels::cuda {

namespace {

CudaStatus check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return {false, std::string(what) + ": " + cudaGetErrorString(e)};
}

cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    cudaGetLastError();  // clear it: not being able to count devices is not sticky
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA driver reports no device";
  return n;
}

CudaStatus open_device(int index, DeviceInfo* info) {
  if (auto st = check(cudaSetDevice(index), "cudaSetDevice"); !st.ok) return st;
  cudaDeviceProp p{};
  if (auto st = check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties"); !st.ok) return st;
  info->index = index;
  info->name = p.name;
  info->cc_major = p.major;
  info->cc_minor = p.minor;
  info->n_sm = p.multiProcessorCount;
  return check(cudaMemGetInfo(&info->free_bytes, &info->total_bytes), "cudaMemGetInfo");
}

CudaStatus memory_info(size_t* free_bytes, size_t* total_bytes) {
  return check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}

CudaStatus stream_create(Stream* out) {
  cudaStream_t s = nullptr;
  auto st = check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  *out = s;
  return st;
}

void stream_destroy(Stream s) {
  if (s) cudaStreamDestroy(as_stream(s));
}

CudaStatus stream_sync(Stream s) {
  if (auto st = check(cudaGetLastError(), "kernel launch"); !st.ok) return st;
  return check(cudaStreamSynchronize(as_stream(s)), "kernel execution");
}

void* device_alloc(size_t n_bytes, CudaStatus* st) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, n_bytes == 0 ? 1 : n_bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure must not poison later launches
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    *st = {false, "cannot allocate " + std::to_string(n_bytes >> 20) + " MiB of GPU memory (" +
                      std::to_string(free_bytes >> 20) + " MiB free of " + std::to_string(total >> 20) +
                      " MiB): " + cudaGetErrorString(e)};
    return nullptr;
  }
  // The zeroing runs on the legacy default stream, which the backend's non-blocking stream does
  // not wait for: finish it here (allocations happen at setup, not per token).
  CudaStatus z = check(cudaMemset(p, 0, n_bytes), "cudaMemset");
  if (z.ok) z = check(cudaStreamSynchronize(nullptr), "cudaMemset");
  if (!z.ok) {
    cudaFree(p);
    *st = z;
    return nullptr;
  }
  *st = {};
  return p;
}

void device_free(void* p) {
  if (p) cudaFree(p);
}

CudaStatus copy_h2d(const void* host_src, void* dst, size_t n_bytes, Stream s) {
  return check(cudaMemcpyAsync(dst, host_src, n_bytes, cudaMemcpyHostToDevice, as_stream(s)), "copy to GPU");
}

CudaStatus copy_d2h(const void* src, void* host_dst, size_t n_bytes, Stream s) {
  if (auto st = check(cudaMemcpyAsync(host_dst, src, n_bytes, cudaMemcpyDeviceToHost, as_stream(s)), "copy from GPU");
      !st.ok) {
    return st;
  }
  return stream_sync(s);
}

CudaStatus copy_d2d(const void* src, void* dst, size_t n_bytes, Stream s) {
  return check(cudaMemcpyAsync(dst, src, n_bytes, cudaMemcpyDeviceToDevice, as_stream(s)), "copy on GPU");
}

}  // namespace kvc::kernels::cuda

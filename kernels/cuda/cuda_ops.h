// The host-side interface of kvc_kernels_cuda: device discovery, memory, copies, a stream,
// and one launcher per backend op. Plain C++ (no CUDA headers), so core compiles with g++.
//
// Every pointer a launcher takes is device memory unless its comment says host. Launchers
// enqueue work on the stream and return at once; their failures (a bad launch, a fault in a
// kernel) surface at the next synchronising call as a CudaStatus.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/kv_format.h"

namespace kvc::kernels::cuda {

// The outcome of CUDA runtime calls: ok, or the runtime's own words.
struct CudaStatus {
  bool ok = true;
  std::string message;
};

struct DeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA GeForce RTX 4090"
  int cc_major = 0;
  int cc_minor = 0;
  int n_sm = 0;
  size_t total_bytes = 0;
  size_t free_bytes = 0;
};

// The current device's free and total memory now (cudaMemGetInfo).
CudaStatus memory_info(size_t* free_bytes, size_t* total_bytes);

// Number of usable CUDA devices; 0 with *why saying why (no driver, no device, ...).
int device_count(std::string* why);
// Makes device `index` current for this thread and describes it.
CudaStatus open_device(int index, DeviceInfo* info);

using Stream = void*;  // a cudaStream_t
CudaStatus stream_create(Stream* out);
void stream_destroy(Stream s);
// Waits for everything enqueued on s; reports the first error of the work it waited for.
CudaStatus stream_sync(Stream s);

// n_bytes of zeroed device memory, or null with *st saying why (out of memory).
void* device_alloc(size_t n_bytes, CudaStatus* st);
void device_free(void* p);
// host -> device; the host buffer may be reused as soon as the call returns.
CudaStatus copy_h2d(const void* host_src, void* dst, size_t n_bytes, Stream s);
// device -> host; waits for the stream, so host_dst is filled when it returns.
CudaStatus copy_d2h(const void* src, void* host_dst, size_t n_bytes, Stream s);
CudaStatus copy_d2d(const void* src, void* dst, size_t n_bytes, Stream s);

// True when launch_matmul / launch_embed handle weights of type t.
bool supports_weight_type(DType t);

// x: (n_tokens, n_cols) <- rows tokens[i] of table (n_rows rows of type t, dequantized).
// A token outside [0, n_rows) gives a zero row.
void launch_embed(DType t, const void* table, int64_t n_rows, int64_t n_cols, const int32_t* tokens, int64_t n_tokens,
                  float* x, Stream s);
// out = x / sqrt(mean(x^2) + eps) * w per row; x, out: (n_tokens, n); out may alias x.
void launch_rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out, Stream s);
// y: (n_tokens, n_rows) = x: (n_tokens, n_cols) * W^T (+ bias: n_rows, may be null), W in
// GGUF layout. Activations stay float. One warp per output row, tiles of up to 8 tokens.
void launch_matmul(DType t, const void* w, int64_t n_rows, int64_t n_cols, const float* x, int64_t n_tokens, float* y,
                   const float* bias, Stream s);

struct RopeArgs {
  int n_rot = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  bool interleaved = true;
};
// x: (n_tokens, n_heads * head_dim) rotated in place; positions: n_tokens (device).
void launch_rope(float* x, int64_t n_tokens, const int64_t* positions, int n_heads, int head_dim, const RopeArgs& a,
                 Stream s);
// gate = silu(gate) * up; n floats.
void launch_silu_mul(float* gate, const float* up, int64_t n, Stream s);
// x += y; n floats.
void launch_add(float* x, const float* y, int64_t n, Stream s);

// One layer's view of the KV block layout (kernels/cpu/kv_block.h), resolved on the host.
// Invariant: group is the layout's (32, 16 or 8 dividing head_dim; 0 only when both types are
// F16), so a group never straddles two heads.
struct KvGeometry {
  KvType k_type = KvType::f16;
  KvType v_type = KvType::f16;
  int n_kv_head = 0;
  int head_dim = 0;
  int block_tokens = 0;
  int group = 0;  // elements per scale of quantized rows
  int64_t k_row_bytes = 0;
  int64_t v_row_bytes = 0;
  int64_t k_offset = 0;  // byte offset of this layer's K rows inside a block
  int64_t v_offset = 0;  // byte offset of this layer's V rows inside a block
};

// Where batch row i's K and V go: row `row` in [0, B) of `block`.
struct KvStoreTarget {
  uint8_t* block = nullptr;
  int64_t row = 0;
};
// Encodes k, v: (n_rows, n_kv_head * head_dim) floats into their targets (n_rows, device).
void launch_kv_store(const KvGeometry& g, const KvStoreTarget* targets, int64_t n_rows, const float* k, const float* v,
                     Stream s);

// Batch row i attends positions [max(0, n_kv - window), n_kv) (all when window <= 0) of the
// sequence whose block table starts at tables[table_begin].
struct AttentionRow {
  int64_t n_kv = 0;
  int64_t table_begin = 0;
};
// Largest head_dim launch_attention takes.
constexpr int k_max_attention_head_dim = 256;
// Causal attention with kernels/cpu/paged_attention.h's semantics (GQA/MQA: query head h
// reads kv head h / (n_head / n_kv_head)), reading the stored rows in place.
//   q, out: (n_rows, n_head * head_dim); tables: block pointers; rows: n_rows (device).
void launch_attention(const KvGeometry& g, const uint8_t* const* tables, const AttentionRow* rows, int64_t n_rows,
                      const float* q, int n_head, float scale, int64_t window, float* out, Stream s);

}  // namespace kvc::kernels::cuda

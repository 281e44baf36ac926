// The compute backend interface: the ops the llama forward pass is written against.
//
// The forward pass (core/model/forward.cpp) is written once against these ops; the CPU
// backend implements them with kernels/cpu, and a CUDA backend implements the same ops on
// device memory. Every pointer an op takes is backend memory, obtained from alloc():
// host memory for the CPU backend, device memory for CUDA. Host-visible results come back
// through copy_to_host(), which is also the synchronisation point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/machine_budget.h"
#include "core/util/result.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_ffn.h"
#include "kernels/cpu/ops.h"

namespace kvc::backend {

// A weight matrix in GGUF layout: n_rows rows of n_cols elements of `type`.
// `view.data` is backend memory (for the CPU backend: a pointer into the mmapped file).
struct Weight {
  kernels::MatrixView view;
};

// One sequence's part of a batch: rows [row_begin, row_begin + n_tokens) of the batch's
// activations are its tokens at positions [pos0, pos0 + n_tokens). Its KV lives in paged
// blocks: blocks[i] (backend memory) holds positions [iB, (i+1)B) of every layer, laid out
// as kernels::KvBlockLayout says. K per channel (int4c) also has the sequence's holding area
// for the K and V rows of its partly filled last block (kernels/cpu/kv_block.h), host memory.
struct SeqSlice {
  std::span<uint8_t* const> blocks;
  int64_t pos0 = 0;
  int64_t n_tokens = 0;
  int64_t row_begin = 0;
  uint16_t* kv_tail = nullptr;  // K per channel: (n_layer, tail_layer_elems()) F16, else null
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;  // "cpu (avx512_vnni, 2 threads)"

  // Backend memory for activations and caches; zero-initialised. Null when it cannot be had.
  virtual void* alloc(size_t n_bytes) = 0;
  virtual void free(void* p) = 0;
  virtual void copy_to_host(const void* src, void* host_dst, size_t n_bytes) = 0;
  virtual void copy_from_host(const void* host_src, void* dst, size_t n_bytes) = 0;
  virtual void copy(const void* src, void* dst, size_t n_bytes) = 0;  // within backend memory

  // Makes a GGUF tensor usable as a weight (the CPU backend uses the mapping in place; a
  // device backend uploads it). `host` stays valid for the model's lifetime.
  virtual Result<Weight> upload_weight(const kernels::MatrixView& host) = 0;
  // A float vector (norm weights, biases) in backend memory.
  virtual Result<float*> upload_floats(const float* host, int64_t n) = 0;

  // x: (n_tokens, n_embd) <- rows `tokens` of `table` (dequantized).
  virtual void embed(const Weight& table, const int32_t* tokens, int64_t n_tokens, float* x) = 0;
  // out = rmsnorm(x) * w, row by row; x, out: (n_tokens, n). out may be x (in place).
  virtual void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out) = 0;
  // y: (n_tokens, w.n_rows) = x: (n_tokens, w.n_cols) * W^T, plus bias (n_rows) when non-null.
  virtual void matmul(const Weight& w, const float* x, int64_t n_tokens, float* y, const float* bias) = 0;
  // Rotates each token's heads in place; x: (n_tokens, n_heads * head_dim), positions: n_tokens
  // (host memory, like the block tables of SeqSlice).
  virtual void rope(float* x, int64_t n_tokens, const int64_t* positions, int n_heads, int head_dim,
                    const kernels::RopeParams& p) = 0;
  // Stores layer `layer`'s K and V of every token of the batch into its sequence's blocks.
  //   k, v: (n_rows, n_kv_head * head_dim) float
  virtual void kv_store(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs, const float* k,
                        const float* v) = 0;
  // Causal attention for every token of the batch over its sequence's positions up to and
  // including its own (only the last `window` of them when window > 0).
  //   q, out: (n_rows, n_head * head_dim)
  virtual void attention(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs,
                         const float* q, const kernels::AttentionShape& s, int64_t window, float* out) = 0;
  // gate = silu(gate) * up; gate, up: n floats.
  virtual void silu_mul(float* gate, const float* up, int64_t n) = 0;
  // x += y; n floats.
  virtual void add(float* x, const float* y, int64_t n) = 0;

  // Gemma's ops (kernels/cpu/ops.h). Only the CPU backend has them: Model::load refuses the
  // architectures that need them on other backends, so the defaults are never reached.
  // gate = gelu_tanh(gate) * up; n floats.
  virtual void gelu_mul(float* gate, const float* up, int64_t n);
  // x = cap * tanh(x / cap); n floats, cap > 0.
  virtual void softcap(float* x, int64_t n, float cap);
  // x *= s; n floats.
  virtual void scale(float* x, int64_t n, float s);
  // Whether this backend has the three ops above (and AttentionShape::softcap).
  virtual bool has_gemma_ops() const { return false; }

  // The mixture-of-experts FFN (kernels/cpu/moe_ffn.h): route each token, run its chosen experts
  // (and the shared ones), sum them weighted. x, y: (n_tokens, n_embd), y not x; the weights'
  // views are backend memory. Only the CPU backend has it: Model::load refuses MoE models on
  // other backends, so the default is never reached.
  virtual void moe_ffn(const kernels::MoeFfnWeights& w, const float* x, int64_t n_tokens, float* y);
  virtual bool has_moe_ops() const { return false; }

  // lfm2's gated short convolution (kernels/cpu/shortconv.h) for every token of the batch:
  // bcx (n_rows, 3 n) holds each token's B, C and x rows (n = the model width), y (n_rows, n)
  // gets C * conv(B * x). Each sequence's state lives in layer `layer` of its recurrent group's
  // blocks (layout.state): it starts from the state after position pos0 - 1 (zeros at 0; the
  // previous block's snapshot at a block boundary; else the tail block's, written by the step
  // before), and the state after each block's last position, and after the batch's last
  // token, is written into that block. Only the CPU backend has it: Model::load refuses lfm2
  // on other backends, so the default is never reached.
  virtual void shortconv(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs,
                         const float* bcx, const float* taps, int l_cache, float* y);
  virtual bool has_recurrent_ops() const { return false; }

  // The device memory of a backend with its own (free now, net of what it holds: weights,
  // caches); nullopt when it computes in host RAM (the CPU backend), or the figure is unknown.
  struct DeviceMemory {
    uint64_t total_bytes = 0;
    uint64_t free_bytes = 0;
  };
  virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }

  // The first failure of the asynchronous work since the last call (a device backend's
  // kernel fault, a failed copy), cleared by reading it; ok when nothing failed. Callers
  // check it after copy_to_host. The CPU backend's ops cannot fail.
  virtual Status take_error() { return {}; }
};

// The CPU backend with n_threads compute threads (0: one per physical core).
std::unique_ptr<Backend> make_cpu_backend(int n_threads);

// The backend named `kind`: "cpu", "cuda" (device 0) or "auto" (cuda when a CUDA device is
// usable, else cpu). n_threads is the CPU backend's thread count (0: one per core).
// "cuda" without a usable device, or in a build without CUDA, is an error saying which.
Result<std::unique_ptr<Backend>> create_backend(std::string_view kind, int n_threads);

// `m` with the backend's device memory in its vram fields when it has its own (budgets then put
// T0 in GPU memory: core/util/machine_budget.h); unchanged for the CPU backend.
MachineResources with_device_memory(MachineResources m, const Backend& b);

// The backends usable on this machine, "cpu" first (tests run each op on each of them).
std::vector<std::string> available_backends();

}  // namespace kvc::backend

// The CUDA backend: device memory, one stream, weights uploaded once, ops through kernels/cuda.
#include "core/backend/cuda_backend.h"

#if defined(KVC_HAVE_CUDA)

#include <compare>
#include <map>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_ops.h"

namespace kvc::backend {

namespace {

namespace kc = kernels::cuda;

// A device buffer that grows to the largest request; holds per-call metadata (positions,
// block tables). Reuse is safe: uploads and the kernels reading them share one stream.
struct DeviceScratch {
  void* p = nullptr;
  size_t n_bytes = 0;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const kc::DeviceInfo& info, kc::Stream stream) : info_(info), stream_(stream) {
    name_ = "cuda (" + info.name + ", sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor) + ", " +
            std::to_string(info.total_bytes >> 30) + " GiB)";
  }
  ~CudaBackend() override {
    (void)kc::stream_sync(stream_);
    for (auto& [host, dev] : weights_) kc::device_free(dev);
    for (DeviceScratch* s : {&positions_, &targets_, &tables_, &rows_}) kc::device_free(s->p);
    kc::stream_destroy(stream_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return name_; }

  void* alloc(size_t n_bytes) override {
    kc::CudaStatus st;
    return kc::device_alloc(n_bytes, &st);  // null is the interface's "cannot be had"
  }
  void free(void* p) override { kc::device_free(p); }
  void copy_to_host(const void* src, void* host_dst, size_t n_bytes) override {
    note(kc::copy_d2h(src, host_dst, n_bytes, stream_));
  }
  void copy_from_host(const void* host_src, void* dst, size_t n_bytes) override {
    note(kc::copy_h2d(host_src, dst, n_bytes, stream_));
  }
  void copy(const void* src, void* dst, size_t n_bytes) override { note(kc::copy_d2d(src, dst, n_bytes, stream_)); }

  Result<Weight> upload_weight(const kernels::MatrixView& host) override {
    if (!kc::supports_weight_type(host.type)) {
      return make_error(ErrorCode::unsupported, std::string("the CUDA backend has no kernels for ") +
                                                    kernels::dtype_name(host.type) + " weights; use --backend cpu");
    }
    const int64_t block = kernels::dtype_info(host.type).block_elems;
    if (host.n_cols % block != 0) {  // a quantized row is whole blocks
      return make_error(ErrorCode::unsupported, std::string("the CUDA backend cannot use a ") +
                                                    kernels::dtype_name(host.type) + " weight with " +
                                                    std::to_string(host.n_cols) + " columns (not a whole number of " +
                                                    std::to_string(block) + "-element blocks); use --backend cpu");
    }
    Weight w{host};
    const WeightKey key{host.data, host.type, host.n_rows, host.n_cols};
    if (auto it = weights_.find(key); it != weights_.end()) {  // tied embeddings: one copy
      w.view.data = it->second;
      return w;
    }
    const size_t n_bytes = kernels::row_bytes(host.type, host.n_cols) * static_cast<size_t>(host.n_rows);
    kc::CudaStatus st;
    void* dev = kc::device_alloc(n_bytes, &st);
    if (!dev) return make_error(ErrorCode::out_of_memory, "the model's weights do not fit on the GPU: " + st.message);
    if (auto c = kc::copy_h2d(host.data, dev, n_bytes, stream_); !c.ok) {
      kc::device_free(dev);
      return make_error(ErrorCode::internal, "uploading a weight to the GPU failed: " + c.message);
    }
    weights_.emplace(key, dev);
    w.view.data = dev;
    return w;
  }

  Result<float*> upload_floats(const float* host, int64_t n) override {
    const size_t n_bytes = static_cast<size_t>(n) * sizeof(float);
    kc::CudaStatus st;
    auto* p = static_cast<float*>(kc::device_alloc(n_bytes, &st));
    if (!p) return make_error(ErrorCode::out_of_memory, st.message);
    if (auto c = kc::copy_h2d(host, p, n_bytes, stream_); !c.ok) {
      kc::device_free(p);
      return make_error(ErrorCode::internal, "uploading to the GPU failed: " + c.message);
    }
    return p;
  }

  void embed(const Weight& table, const int32_t* tokens, int64_t n_tokens, float* x) override {
    kc::launch_embed(table.view.type, table.view.data, table.view.n_rows, table.view.n_cols, tokens, n_tokens, x,
                     stream_);
  }

  void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out) override {
    kc::launch_rmsnorm(x, w, n_tokens, n, eps, out, stream_);
  }

  void matmul(const Weight& w, const float* x, int64_t n_tokens, float* y, const float* bias) override {
    kc::launch_matmul(w.view.type, w.view.data, w.view.n_rows, w.view.n_cols, x, n_tokens, y, bias, stream_);
  }

  void rope(float* x, int64_t n_tokens, const int64_t* positions, int n_heads, int head_dim,
            const kernels::RopeParams& p) override {
    if (p.freq_factors) {  // Llama 3's per-pair rope factors are not in the CUDA kernel yet
      if (error_.empty())
        error_ = "rope frequency factors (rope_freqs.weight, Llama 3) are not supported on CUDA yet; use --backend cpu";
      return;
    }
    auto* dev_pos =
        static_cast<int64_t*>(upload(positions_, positions, static_cast<size_t>(n_tokens) * sizeof(int64_t)));
    if (!dev_pos) return;
    kc::launch_rope(x, n_tokens, dev_pos, n_heads, head_dim,
                    kc::RopeArgs{p.n_rot, p.freq_base, p.freq_scale, p.interleaved}, stream_);
  }

  void kv_store(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs, const float* k,
                const float* v) override {
    if (!supported_kv(layout)) return;
    host_targets_.clear();
    for (const SeqSlice& sq : seqs) {
      if (static_cast<int64_t>(host_targets_.size()) < sq.row_begin)
        host_targets_.resize(static_cast<size_t>(sq.row_begin));
      for (int64_t i = 0; i < sq.n_tokens; ++i) {
        const kernels::KvSlot slot = kernels::kv_slot(layout, sq.pos0 + i);
        host_targets_.push_back(kc::KvStoreTarget{sq.blocks[static_cast<size_t>(slot.block)], slot.row});
      }
    }
    const auto n_rows = static_cast<int64_t>(host_targets_.size());
    auto* dev = static_cast<kc::KvStoreTarget*>(
        upload(targets_, host_targets_.data(), host_targets_.size() * sizeof(kc::KvStoreTarget)));
    if (!dev) return;
    kc::launch_kv_store(geometry(layout, layer), dev, n_rows, k, v, stream_);
  }

  void attention(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs, const float* q,
                 const kernels::AttentionShape& s, int64_t window, float* out) override {
    if (!supported_kv(layout)) return;
    if (s.head_dim > kc::k_max_attention_head_dim) {
      note({false, "head_dim " + std::to_string(s.head_dim) + " exceeds the CUDA attention kernel's limit of " +
                       std::to_string(kc::k_max_attention_head_dim)});
      return;
    }
    host_tables_.clear();
    host_rows_.clear();
    for (const SeqSlice& sq : seqs) {
      const auto table_begin = static_cast<int64_t>(host_tables_.size());
      host_tables_.insert(host_tables_.end(), sq.blocks.begin(), sq.blocks.end());
      if (static_cast<int64_t>(host_rows_.size()) < sq.row_begin) host_rows_.resize(static_cast<size_t>(sq.row_begin));
      for (int64_t i = 0; i < sq.n_tokens; ++i) host_rows_.push_back(kc::AttentionRow{sq.pos0 + i + 1, table_begin});
    }
    auto* dev_tables = static_cast<const uint8_t* const*>(
        upload(tables_, host_tables_.data(), host_tables_.size() * sizeof(uint8_t*)));
    auto* dev_rows =
        static_cast<kc::AttentionRow*>(upload(rows_, host_rows_.data(), host_rows_.size() * sizeof(kc::AttentionRow)));
    if (!dev_tables || !dev_rows) return;
    kc::launch_attention(geometry(layout, layer), dev_tables, dev_rows, static_cast<int64_t>(host_rows_.size()), q,
                         s.n_head, s.scale, window, out, stream_);
  }

  void silu_mul(float* gate, const float* up, int64_t n) override { kc::launch_silu_mul(gate, up, n, stream_); }
  void add(float* x, const float* y, int64_t n) override { kc::launch_add(x, y, n, stream_); }

  std::optional<DeviceMemory> device_memory() const override {
    size_t free_bytes = 0, total_bytes = 0;
    if (!kc::memory_info(&free_bytes, &total_bytes).ok) return std::nullopt;
    return DeviceMemory{total_bytes, free_bytes};
  }

  Status take_error() override {
    note(kc::stream_sync(stream_));
    if (error_.empty()) return {};
    std::string e = std::move(error_);
    error_.clear();
    return make_error(ErrorCode::internal, "GPU: " + e);
  }

 private:
  // The CUDA kernels read f16 / q8 / q4 rows; the rotated formats are CPU-only for now.
  bool supported_kv(const kernels::KvBlockLayout& l) {
    if (!kernels::kv_type_rotated(l.k_type) && !kernels::kv_type_rotated(l.v_type)) return true;
    if (error_.empty())
      error_ = "the Hadamard-rotated KV formats (int8h, int4h, int4c) are not supported on CUDA yet; use --backend cpu";
    return false;
  }

  static kc::KvGeometry geometry(const kernels::KvBlockLayout& l, int layer) {
    return kc::KvGeometry{l.k_type, l.v_type,      l.n_kv_head,   l.head_dim,        l.block_tokens,
                          l.group,  l.k_row_bytes, l.v_row_bytes, l.k_offset(layer), l.v_offset(layer)};
  }

  void note(const kc::CudaStatus& st) {
    if (!st.ok && error_.empty()) error_ = st.message;
  }

  // Copies n_bytes of host data into `s` (grown when needed); null after an error.
  void* upload(DeviceScratch& s, const void* host, size_t n_bytes) {
    if (n_bytes == 0) return s.p ? s.p : grow(s, 64);
    if (s.n_bytes < n_bytes && !grow(s, n_bytes)) return nullptr;
    const kc::CudaStatus st = kc::copy_h2d(host, s.p, n_bytes, stream_);
    note(st);
    return st.ok ? s.p : nullptr;
  }
  void* grow(DeviceScratch& s, size_t n_bytes) {
    kc::device_free(s.p);  // cudaFree waits for the kernels that may still read it
    const size_t want = n_bytes < 4096 ? 4096 : 2 * n_bytes;
    kc::CudaStatus st;
    s.p = kc::device_alloc(want, &st);
    s.n_bytes = s.p ? want : 0;
    note(st);
    return s.p;
  }

  kc::DeviceInfo info_;
  kc::Stream stream_ = nullptr;
  std::string name_;
  std::string error_;  // first failure since take_error()
  // A host tensor -> its device copy. The whole view is the key, not the pointer alone: host
  // memory freed after an upload can come back at the same address holding another tensor.
  struct WeightKey {
    const void* data;
    kernels::DType type;
    int64_t n_rows, n_cols;
    auto operator<=>(const WeightKey&) const = default;
  };
  std::map<WeightKey, void*> weights_;
  DeviceScratch positions_, targets_, tables_, rows_;
  std::vector<kc::KvStoreTarget> host_targets_;  // (n_rows)
  std::vector<uint8_t*> host_tables_;            // concatenated block tables of the batch
  std::vector<kc::AttentionRow> host_rows_;      // (n_rows)
};

}  // namespace

bool cuda_built() { return true; }

Result<std::unique_ptr<Backend>> make_cuda_backend(int device) {
  std::string why;
  const int n = kc::device_count(&why);
  if (n == 0) return make_error(ErrorCode::unsupported, "no CUDA device found (" + why + "); use --backend cpu");
  if (device < 0 || device >= n) {
    return make_error(ErrorCode::invalid_argument,
                      "CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " found)");
  }
  kc::DeviceInfo info;
  if (auto st = kc::open_device(device, &info); !st.ok) {
    return make_error(ErrorCode::unsupported, "cannot open CUDA device " + std::to_string(device) + ": " + st.message);
  }
  kc::Stream stream = nullptr;
  if (auto st = kc::stream_create(&stream); !st.ok) {
    return make_error(ErrorCode::internal, "cannot create a CUDA stream: " + st.message);
  }
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(info, stream));
}

}  // namespace kvc::backend

#else  // !KVC_HAVE_CUDA

namespace kvc::backend {

bool cuda_built() { return false; }

Result<std::unique_ptr<Backend>> make_cuda_backend(int) {
  return make_error(ErrorCode::unsupported,
                    "this build of kvchat has no CUDA backend (configure with the CUDA toolkit and -DKVC_CUDA=ON); "
                    "use --backend cpu");
}

}  // namespace kvc::backend

#endif

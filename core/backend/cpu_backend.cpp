// The CPU backend: backend ops on host memory through kernels/cpu and a thread pool.
#include <sys/mman.h>
#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/backend/backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace kvc::backend {

namespace {

constexpr size_t k_alignment = 64;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int n_threads)
      : pool_(n_threads > 0 ? n_threads : kernels::default_thread_count()),
        name_(std::string("cpu (") + kernels::isa_name(kernels::best_isa()) + ", " + std::to_string(pool_.n_threads()) +
              (pool_.n_threads() == 1 ? " thread)" : " threads)")),
        scratch_(static_cast<size_t>(pool_.n_threads())) {}

  std::string_view name() const override { return name_; }

  // Large buffers (KV pools) come from mmap: zero pages that cost nothing until touched.
  void* alloc(size_t n_bytes) override {
    if (n_bytes >= k_mmap_threshold) {
      void* p = ::mmap(nullptr, n_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return nullptr;
      std::lock_guard lock(mapped_mu_);
      mapped_[p] = n_bytes;
      return p;
    }
    const size_t rounded = (n_bytes + k_alignment - 1) / k_alignment * k_alignment;
    void* p = std::aligned_alloc(k_alignment, rounded == 0 ? k_alignment : rounded);
    if (p) std::memset(p, 0, rounded);
    return p;
  }
  void free(void* p) override {
    if (!p) return;
    {
      std::lock_guard lock(mapped_mu_);
      if (auto it = mapped_.find(p); it != mapped_.end()) {
        ::munmap(p, it->second);
        mapped_.erase(it);
        return;
      }
    }
    std::free(p);
  }
  void copy_to_host(const void* src, void* dst, size_t n) override { std::memcpy(dst, src, n); }
  void copy_from_host(const void* src, void* dst, size_t n) override { std::memcpy(dst, src, n); }
  void copy(const void* src, void* dst, size_t n) override { std::memcpy(dst, src, n); }

  Result<Weight> upload_weight(const kernels::MatrixView& host) override { return Weight{host}; }

  Result<float*> upload_floats(const float* host, int64_t n) override {
    auto* p = static_cast<float*>(alloc(static_cast<size_t>(n) * sizeof(float)));
    if (!p) return make_error(ErrorCode::out_of_memory, "cannot allocate " + std::to_string(n) + " floats");
    std::memcpy(p, host, static_cast<size_t>(n) * sizeof(float));
    return p;
  }

  void embed(const Weight& table, const int32_t* tokens, int64_t n_tokens, float* x) override {
    const int64_t n_embd = table.view.n_cols;
    const size_t row = kernels::row_bytes(table.view.type, n_embd);
    const auto* base = static_cast<const uint8_t*>(table.view.data);
    for (int64_t i = 0; i < n_tokens; ++i) {
      kernels::dequantize_row(table.view.type, base + static_cast<size_t>(tokens[i]) * row, x + i * n_embd, n_embd);
    }
  }

  void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out) override {
    pool_.parallel_for(n_tokens, 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) kernels::rmsnorm(x + i * n, w, n, eps, out + i * n);
    });
  }

  void matmul(const Weight& w, const float* x, int64_t n_tokens, float* y, const float* bias) override {
    kernels::matmul(w.view, x, n_tokens, y, pool_);
    if (bias) {
      for (int64_t i = 0; i < n_tokens; ++i) kernels::add_inplace(y + i * w.view.n_rows, bias, w.view.n_rows);
    }
  }

  void rope(float* x, int64_t n_tokens, const int64_t* positions, int n_heads, int head_dim,
            const kernels::RopeParams& p) override {
    const int64_t width = int64_t{n_heads} * head_dim;
    pool_.parallel_for(n_tokens, 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) kernels::rope(x + i * width, n_heads, head_dim, positions[i], p);
    });
  }

  void kv_store(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs, const float* k,
                const float* v) override {
    const int64_t width = int64_t{layout.n_kv_head} * layout.head_dim;
    auto store = [&](const SeqSlice& sq, int64_t i) {
      const int64_t row = sq.row_begin + i;
      kernels::kv_store_at(layout, sq.blocks.data(), layer, sq.pos0 + i, k + row * width, v + row * width);
    };
    for (const SeqSlice& sq : seqs) {
      if (layout.k_anchor_bytes == 0) {
        pool_.parallel_for(sq.n_tokens, 8, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) store(sq, i);
        });
        continue;
      }
      // Anchored K (kv_block.h): block by block, each block's row 0 before its other rows.
      const int64_t B = layout.block_tokens;
      for (int64_t i0 = 0; i0 < sq.n_tokens;) {
        const int64_t i1 = std::min(sq.n_tokens, i0 + B - (sq.pos0 + i0) % B);
        int64_t first = i0;
        if ((sq.pos0 + i0) % B == 0) store(sq, first++);
        pool_.parallel_for(i1 - first, 4, [&](int64_t b, int64_t e) {
          for (int64_t i = first + b; i < first + e; ++i) store(sq, i);
        });
        i0 = i1;
      }
    }
  }

  void attention(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs, const float* q,
                 const kernels::AttentionShape& s, int64_t window, float* out) override {
    const int64_t width = int64_t{s.n_head} * s.head_dim;
    int64_t max_kv = 0, n_rows = 0;
    for (const SeqSlice& sq : seqs) {
      max_kv = std::max(max_kv, sq.pos0 + sq.n_tokens);
      n_rows += sq.n_tokens;
    }
    const auto need = static_cast<size_t>(kernels::paged_attention_scratch_floats(s, max_kv));
    for (auto& buf : scratch_) {
      if (buf.size() < need) buf.resize(need);
    }
    // Work items are (row, kv head) pairs, split evenly across threads; rows map to their
    // sequence through a prefix walk (batches hold few sequences).
    const int64_t n_items = n_rows * s.n_kv_head;
    pool_.run([&](int ith, int nth) {
      float* scratch = scratch_[static_cast<size_t>(ith)].data();
      const int64_t begin = n_items * ith / nth;
      const int64_t end = n_items * (ith + 1) / nth;
      size_t si = 0;
      for (int64_t it = begin; it < end; ++it) {
        const int64_t row = it / s.n_kv_head;
        const int h = static_cast<int>(it % s.n_kv_head);
        while (row >= seqs[si].row_begin + seqs[si].n_tokens) ++si;
        const SeqSlice& sq = seqs[si];
        const int64_t pos = sq.pos0 + (row - sq.row_begin);
        const kernels::PagedKvView view{sq.blocks.data(), static_cast<int64_t>(sq.blocks.size()), &layout, layer,
                                        window};
        kernels::attention_paged(q + row * width, view, pos + 1, s, h, h + 1, out + row * width, scratch);
      }
    });
  }

  void silu_mul(float* gate, const float* up, int64_t n) override {
    pool_.parallel_for(n, 16384, [&](int64_t b, int64_t e) { kernels::silu_mul(gate + b, up + b, e - b, gate + b); });
  }

  void add(float* x, const float* y, int64_t n) override { kernels::add_inplace(x, y, n); }

  void gelu_mul(float* gate, const float* up, int64_t n) override {
    pool_.parallel_for(n, 16384,
                       [&](int64_t b, int64_t e) { kernels::gelu_tanh_mul(gate + b, up + b, e - b, gate + b); });
  }
  void softcap(float* x, int64_t n, float cap) override {
    pool_.parallel_for(n, 16384, [&](int64_t b, int64_t e) { kernels::softcap_inplace(x + b, e - b, cap); });
  }
  void scale(float* x, int64_t n, float s) override { kernels::scale_inplace(x, n, s); }
  bool has_gemma_ops() const override { return true; }

 private:
  static constexpr size_t k_mmap_threshold = size_t{1} << 20;
  std::mutex mapped_mu_;
  std::unordered_map<void*, size_t> mapped_;  // mmapped allocations and their sizes
  kernels::ThreadPool pool_;
  std::string name_;
  std::vector<std::vector<float>> scratch_;  // per thread: attention scores
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace kvc::backend

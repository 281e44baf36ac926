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
#include "core/util/assert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kv_block.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/shortconv.h"
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
    const int64_t B = layout.block_tokens;
    const bool per_channel = kernels::kv_k_per_channel(layout.k_type);
    auto tail_of = [&](const SeqSlice& sq) {
      return per_channel ? sq.kv_tail + layer * layout.tail_layer_elems() : nullptr;
    };
    auto store = [&](const SeqSlice& sq, int64_t i) {
      const int64_t row = sq.row_begin + i;
      kernels::kv_store_at(layout, sq.blocks.data(), layer, sq.pos0 + i, k + row * width, v + row * width, tail_of(sq));
    };
    if (per_channel) {
      // The F16 K and V rows of every block this batch writes, from the block's first position
      // on, for attention to read each query's own block at full precision (own_k_ below).
      own_k_offset_.resize(seqs.size());
      int64_t total = 0;
      for (size_t i = 0; i < seqs.size(); ++i) {
        own_k_offset_[i] = total;
        total += seqs[i].pos0 % B + seqs[i].n_tokens;
      }
      own_k_.resize(static_cast<size_t>(total * width));
      own_v_.resize(static_cast<size_t>(total * width));
      own_k_layer_ = layer;
    }
    for (size_t si = 0; si < seqs.size(); ++si) {
      const SeqSlice& sq = seqs[si];
      if (per_channel) {
        // K per channel (kv_block.h): block by block through the holding area, each block
        // sealed once its last row is there.
        uint16_t* own_k = own_k_.data() + own_k_offset_[si] * width;
        uint16_t* own_v = own_v_.data() + own_k_offset_[si] * width;
        const int64_t n_old = sq.pos0 % B;   // the tail's rows from earlier batches
        const uint16_t* tail = tail_of(sq);  // K rows, then V rows
        const size_t row_bytes = static_cast<size_t>(width) * sizeof(uint16_t);
        std::memcpy(own_k, tail, static_cast<size_t>(n_old) * row_bytes);
        std::memcpy(own_v, tail + B * width, static_cast<size_t>(n_old) * row_bytes);
        for (int64_t i0 = 0; i0 < sq.n_tokens;) {
          const int64_t i1 = std::min(sq.n_tokens, i0 + B - (sq.pos0 + i0) % B);
          pool_.parallel_for(i1 - i0, 4, [&](int64_t b, int64_t e) {
            for (int64_t i = i0 + b; i < i0 + e; ++i) {
              store(sq, i);
              const int64_t r = (sq.pos0 + i) % B;
              std::memcpy(own_k + (n_old + i) * width, tail + r * width, row_bytes);
              std::memcpy(own_v + (n_old + i) * width, tail + (B + r) * width, row_bytes);
            }
          });
          if ((sq.pos0 + i1) % B == 0) {
            kernels::kv_seal_block(layout, sq.blocks[static_cast<size_t>((sq.pos0 + i1) / B - 1)], layer, tail);
          }
          i0 = i1;
        }
        continue;
      }
      if (layout.k_anchor_bytes == 0) {
        pool_.parallel_for(sq.n_tokens, 8, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) store(sq, i);
        });
        continue;
      }
      // Anchored K (kv_block.h): block by block, each block's row 0 before its other rows.
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
    const int64_t width_kv = layout.row_elems();
    const int64_t B = layout.block_tokens;
    const bool per_channel = kernels::kv_k_per_channel(layout.k_type);
    KVC_ASSERT(!per_channel || own_k_layer_ == layer);  // kv_store of this layer and batch came first
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
        // K per channel: the query's own block in F16, from the rows kv_store kept.
        const int64_t own_block = pos / B;
        const int64_t own_row = per_channel ? own_k_offset_[si] + own_block * B - (sq.pos0 - sq.pos0 % B) : 0;
        const kernels::PagedKvView view{sq.blocks.data(),
                                        static_cast<int64_t>(sq.blocks.size()),
                                        &layout,
                                        layer,
                                        window,
                                        per_channel ? own_k_.data() + own_row * width_kv : nullptr,
                                        per_channel ? own_v_.data() + own_row * width_kv : nullptr,
                                        per_channel ? own_block : -1};
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

  void moe_ffn(const kernels::MoeFfnWeights& w, const float* x, int64_t n_tokens, float* y) override {
    kernels::moe_ffn(w, x, n_tokens, y, pool_, moe_scratch_);
  }
  bool has_moe_ops() const override { return true; }

  void shortconv(const kernels::KvBlockLayout& layout, int layer, std::span<const SeqSlice> seqs, const float* bcx,
                 const float* taps, int l_cache, float* y) override {
    const int64_t n = layout.head_dim / (l_cache - 1);  // the model width: state = (l_cache - 1) rows of it
    const int64_t B = layout.block_tokens;
    for (const SeqSlice& s : seqs) {
      // The state after position pos0 - 1, the step's own copy while the tokens run.
      conv_state_.assign(static_cast<size_t>(layout.head_dim), 0.0f);
      if (s.pos0 > 0) {
        const int64_t from = s.pos0 % B == 0 ? s.pos0 / B - 1 : s.pos0 / B;
        const auto* src = reinterpret_cast<const float*>(s.blocks[static_cast<size_t>(from)] + layout.k_offset(layer));
        std::copy(src, src + layout.head_dim, conv_state_.begin());
      }
      for (int64_t i = 0; i < s.n_tokens; ++i) {
        const int64_t row = s.row_begin + i, pos = s.pos0 + i;
        kernels::shortconv_step(bcx + row * 3 * n, n, taps, l_cache, conv_state_.data(), y + row * n);
        if ((pos + 1) % B == 0 || i + 1 == s.n_tokens) {
          auto* dst = reinterpret_cast<float*>(s.blocks[static_cast<size_t>(pos / B)] + layout.k_offset(layer));
          std::copy(conv_state_.begin(), conv_state_.end(), dst);
        }
      }
    }
  }
  bool has_recurrent_ops() const override { return true; }

 private:
  static constexpr size_t k_mmap_threshold = size_t{1} << 20;
  std::mutex mapped_mu_;
  std::unordered_map<void*, size_t> mapped_;  // mmapped allocations and their sizes
  kernels::ThreadPool pool_;
  std::vector<float> conv_state_;  // shortconv: one sequence's state while its tokens run
  std::string name_;
  std::vector<std::vector<float>> scratch_;  // per thread: attention scores
  kernels::MoeFfnScratch moe_scratch_;       // the expert FFN's buffers (the engine thread's)
  // K per channel (int4c): the F16 K rows of the blocks the last kv_store wrote, per slice from
  // its first block's first position; attention reads each query's own block from them, so a
  // query sees its own block at full precision however the prompt was split into batches.
  std::vector<uint16_t> own_k_;        // (sum of pos0 % B + n_tokens over slices, n_kv_head * head_dim)
  std::vector<uint16_t> own_v_;        // the same rows of V
  std::vector<int64_t> own_k_offset_;  // per slice: its first row in own_k_
  int own_k_layer_ = -1;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace kvc::backend

// NoMoeBackend: the CPU backend with its CPU-only ops (the expert FFN) hidden, as the CUDA backend shows them.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "core/backend/backend.h"

namespace kvc::test {

// The CPU backend with its mixture-of-experts op hidden, as a backend without one (CUDA) shows.
class NoMoeBackend final : public backend::Backend {
 public:
  NoMoeBackend() : cpu_(backend::make_cpu_backend(1)) {}
  std::string_view name() const override { return "test-no-moe"; }
  void* alloc(size_t n) override { return cpu_->alloc(n); }
  void free(void* p) override { cpu_->free(p); }
  void copy_to_host(const void* s, void* d, size_t n) override { cpu_->copy_to_host(s, d, n); }
  void copy_from_host(const void* s, void* d, size_t n) override { cpu_->copy_from_host(s, d, n); }
  void copy(const void* s, void* d, size_t n) override { cpu_->copy(s, d, n); }
  Result<backend::Weight> upload_weight(const kernels::MatrixView& h) override { return cpu_->upload_weight(h); }
  Result<float*> upload_floats(const float* h, int64_t n) override { return cpu_->upload_floats(h, n); }
  void embed(const backend::Weight& t, const int32_t* tok, int64_t n, float* x) override { cpu_->embed(t, tok, n, x); }
  void rmsnorm(const float* x, const float* w, int64_t nt, int64_t n, float eps, float* out) override {
    cpu_->rmsnorm(x, w, nt, n, eps, out);
  }
  void matmul(const backend::Weight& w, const float* x, int64_t n, float* y, const float* b) override {
    cpu_->matmul(w, x, n, y, b);
  }
  void rope(float* x, int64_t n, const int64_t* pos, int nh, int hd, const kernels::RopeParams& p) override {
    cpu_->rope(x, n, pos, nh, hd, p);
  }
  void kv_store(const kernels::KvBlockLayout& l, int layer, std::span<const backend::SeqSlice> s, const float* k,
                const float* v) override {
    cpu_->kv_store(l, layer, s, k, v);
  }
  void attention(const kernels::KvBlockLayout& l, int layer, std::span<const backend::SeqSlice> s, const float* q,
                 const kernels::AttentionShape& sh, int64_t window, float* out) override {
    cpu_->attention(l, layer, s, q, sh, window, out);
  }
  void silu_mul(float* g, const float* u, int64_t n) override { cpu_->silu_mul(g, u, n); }
  void add(float* x, const float* y, int64_t n) override { cpu_->add(x, y, n); }

 private:
  std::unique_ptr<backend::Backend> cpu_;
};

}  // namespace kvc::test

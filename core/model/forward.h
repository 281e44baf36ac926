// The llama forward pass, written once against the backend ops (core/backend/backend.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/model/model.h"
#include "core/util/result.h"

namespace kvc::model {

// The K/V of one sequence for every layer in one contiguous backend buffer:
//
//   layer 0: [ K: n_ctx x kv_width F16 ][ V: n_ctx x kv_width F16 ]
//   layer 1: [ K ... ][ V ... ]  ...
//
// The paged, shared, tiered cache (core/kv) supplies LayerKv views the same way.
class ContiguousKv {
 public:
  static Result<ContiguousKv> create(backend::Backend& be, const ModelConfig& c, int64_t n_ctx);
  ContiguousKv(ContiguousKv&& o) noexcept;
  ContiguousKv& operator=(ContiguousKv&& o) noexcept;
  ~ContiguousKv();

  backend::LayerKv layer(int64_t l) const;
  int64_t n_ctx() const { return n_ctx_; }
  size_t n_bytes() const { return n_bytes_; }

 private:
  ContiguousKv() = default;
  backend::Backend* be_ = nullptr;
  uint16_t* data_ = nullptr;
  int64_t n_ctx_ = 0;
  int64_t kv_width_ = 0;
  size_t n_bytes_ = 0;
};

enum class Logits { last, all };

// Runs batches of tokens through the model. Owns the activation buffers for batches of up
// to max_batch tokens; longer inputs are evaluated in chunks of that size.
class Forward {
 public:
  Forward(const Model& m, int64_t max_batch);
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;

  // Evaluates tokens at positions [pos0, pos0 + tokens.size()) against `kv`, which must
  // hold positions [0, pos0) already. Returns the logits of the last token (n_vocab floats)
  // or of every token (tokens.size() x n_vocab), in host memory owned by this object.
  Result<std::span<const float>> eval(std::span<const int32_t> tokens, int64_t pos0, const ContiguousKv& kv,
                                      Logits which = Logits::last);

  int64_t max_batch() const { return max_batch_; }

 private:
  void eval_chunk(const int32_t* tokens, int64_t n, int64_t pos0, const ContiguousKv& kv, bool all_logits,
                  float* host_logits);

  const Model& m_;
  backend::Backend& be_;
  int64_t max_batch_;
  // Backend buffers, each sized for max_batch rows.
  float* x_ = nullptr;     // (max_batch, n_embd) residual stream
  float* h_ = nullptr;     // (max_batch, n_embd) normed input
  float* q_ = nullptr;     // (max_batch, q_width)
  float* k_ = nullptr;     // (max_batch, kv_width)
  float* v_ = nullptr;     // (max_batch, kv_width)
  float* att_ = nullptr;   // (max_batch, q_width)
  float* gate_ = nullptr;  // (max_batch, n_ff)
  float* up_ = nullptr;    // (max_batch, n_ff)
  float* logits_ = nullptr;  // (max_batch, n_vocab)
  std::vector<int64_t> positions_;
  std::vector<float> host_logits_;
};

}  // namespace kvc::model

// The llama forward pass: embeddings, n_layer pre-norm blocks (GQA attention + SwiGLU), logits.
#include "core/model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/util/assert.h"

namespace kvc::model {

Result<ContiguousKv> ContiguousKv::create(backend::Backend& be, const ModelConfig& c, int64_t n_ctx) {
  if (n_ctx <= 0) return make_error(ErrorCode::invalid_argument, "context length must be positive");
  ContiguousKv kv;
  kv.be_ = &be;
  kv.n_ctx_ = n_ctx;
  kv.kv_width_ = c.kv_width();
  kv.n_bytes_ = static_cast<size_t>(c.n_layer) * 2 * static_cast<size_t>(n_ctx * c.kv_width()) * sizeof(uint16_t);
  kv.data_ = static_cast<uint16_t*>(be.alloc(kv.n_bytes_));
  if (!kv.data_) {
    return make_error(ErrorCode::out_of_memory, "cannot allocate " + std::to_string(kv.n_bytes_ >> 20) +
                                                    " MiB of KV cache for a context of " + std::to_string(n_ctx) +
                                                    " tokens; choose a smaller context with -c");
  }
  return kv;
}

ContiguousKv::ContiguousKv(ContiguousKv&& o) noexcept { *this = std::move(o); }

ContiguousKv& ContiguousKv::operator=(ContiguousKv&& o) noexcept {
  if (this != &o) {
    if (data_) be_->free(data_);
    be_ = o.be_;
    data_ = o.data_;
    n_ctx_ = o.n_ctx_;
    kv_width_ = o.kv_width_;
    n_bytes_ = o.n_bytes_;
    o.data_ = nullptr;
  }
  return *this;
}

ContiguousKv::~ContiguousKv() {
  if (data_) be_->free(data_);
}

backend::LayerKv ContiguousKv::layer(int64_t l) const {
  uint16_t* base = data_ + l * 2 * n_ctx_ * kv_width_;
  return backend::LayerKv{base, base + n_ctx_ * kv_width_, kv_width_};
}

Forward::Forward(const Model& m, int64_t max_batch) : m_(m), be_(m.backend()), max_batch_(max_batch) {
  KVC_ASSERT(max_batch > 0);
  const ModelConfig& c = m.config();
  auto buf = [&](int64_t width) {
    auto* p = static_cast<float*>(be_.alloc(static_cast<size_t>(max_batch * width) * sizeof(float)));
    KVC_ASSERT(p != nullptr);
    return p;
  };
  x_ = buf(c.n_embd);
  h_ = buf(c.n_embd);
  q_ = buf(c.q_width());
  k_ = buf(c.kv_width());
  v_ = buf(c.kv_width());
  att_ = buf(c.q_width());
  gate_ = buf(c.n_ff);
  up_ = buf(c.n_ff);
  logits_ = buf(c.n_vocab);
  positions_.resize(static_cast<size_t>(max_batch));
}

Forward::~Forward() {
  for (float* p : {x_, h_, q_, k_, v_, att_, gate_, up_, logits_}) be_.free(p);
}

Result<std::span<const float>> Forward::eval(std::span<const int32_t> tokens, int64_t pos0, const ContiguousKv& kv,
                                             Logits which) {
  const ModelConfig& c = m_.config();
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return make_error(ErrorCode::invalid_argument, "nothing to evaluate: the token list is empty");
  if (pos0 < 0 || pos0 + n > kv.n_ctx()) {
    return make_error(ErrorCode::invalid_argument,
                      "context full: " + std::to_string(pos0 + n) + " tokens do not fit a context of " +
                          std::to_string(kv.n_ctx()) + " (raise -c)");
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= c.n_vocab) {
      return make_error(ErrorCode::invalid_argument, "token id " + std::to_string(t) + " is outside the vocabulary of " +
                                                         std::to_string(c.n_vocab));
    }
  }
  const bool all = which == Logits::all;
  host_logits_.resize(static_cast<size_t>((all ? n : 1) * c.n_vocab));
  for (int64_t done = 0; done < n;) {
    const int64_t chunk = std::min(max_batch_, n - done);
    const bool last_chunk = done + chunk == n;
    float* dst = all ? host_logits_.data() + done * c.n_vocab : (last_chunk ? host_logits_.data() : nullptr);
    eval_chunk(tokens.data() + done, chunk, pos0 + done, kv, all, dst);
    done += chunk;
  }
  return std::span<const float>(host_logits_);
}

void Forward::eval_chunk(const int32_t* tokens, int64_t n, int64_t pos0, const ContiguousKv& kv, bool all_logits,
                         float* host_logits) {
  const ModelConfig& c = m_.config();
  const ModelWeights& w = m_.weights();
  for (int64_t i = 0; i < n; ++i) positions_[static_cast<size_t>(i)] = pos0 + i;
  const kernels::AttentionShape shape{static_cast<int>(c.n_head), static_cast<int>(c.n_head_kv),
                                      static_cast<int>(c.head_dim), c.kv_width(),
                                      1.0f / std::sqrt(static_cast<float>(c.head_dim))};

  be_.embed(w.token_embd, tokens, n, x_);  // x: (n, n_embd)
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    const backend::LayerKv lkv = kv.layer(l);
    // Attention block: h = norm(x); q, k, v = h W^T; rope; store k, v; x += attn(q) Wo^T.
    be_.rmsnorm(x_, lw.attn_norm, n, c.n_embd, c.rms_eps, h_);
    be_.matmul(lw.wq, h_, n, q_, lw.bq);
    be_.matmul(lw.wk, h_, n, k_, lw.bk);
    be_.matmul(lw.wv, h_, n, v_, lw.bv);
    be_.rope(q_, n, positions_.data(), static_cast<int>(c.n_head), static_cast<int>(c.head_dim), c.rope);
    be_.rope(k_, n, positions_.data(), static_cast<int>(c.n_head_kv), static_cast<int>(c.head_dim), c.rope);
    be_.kv_store(lkv, pos0, k_, v_, n, c.kv_width());
    be_.attention(q_, lkv, pos0, n, shape, att_);
    be_.matmul(lw.wo, att_, n, h_, nullptr);
    be_.add(x_, h_, n * c.n_embd);
    // Feed-forward block: x += (silu(h Wg^T) * (h Wu^T)) Wd^T with h = norm(x).
    be_.rmsnorm(x_, lw.ffn_norm, n, c.n_embd, c.rms_eps, h_);
    be_.matmul(lw.w_gate, h_, n, gate_, nullptr);
    be_.matmul(lw.w_up, h_, n, up_, nullptr);
    be_.silu_mul(gate_, up_, n * c.n_ff);
    be_.matmul(lw.w_down, gate_, n, h_, nullptr);
    be_.add(x_, h_, n * c.n_embd);
  }
  if (!host_logits) return;
  // Logits for every row, or only for the last one.
  const float* rows = all_logits ? x_ : x_ + (n - 1) * c.n_embd;
  const int64_t n_rows = all_logits ? n : 1;
  be_.rmsnorm(rows, w.output_norm, n_rows, c.n_embd, c.rms_eps, h_);
  be_.matmul(w.output, h_, n_rows, logits_, nullptr);
  be_.copy_to_host(logits_, host_logits, static_cast<size_t>(n_rows * c.n_vocab) * sizeof(float));
}

}  // namespace kvc::model

// The llama forward pass: embeddings, n_layer pre-norm blocks (GQA attention + SwiGLU), logits;
// Gemma's variant adds scaled embeddings, post-norms, GeGLU, soft-capping and local layers.
#include "core/model/forward.h"

#include <algorithm>
#include <cmath>

#include "core/util/assert.h"

namespace kvc::model {

Forward::Forward(const Model& m, const kernels::KvBlockLayout& layout, int64_t max_batch)
    : Forward(m, std::vector<kernels::KvBlockLayout>{layout}, max_batch) {}

Forward::Forward(const Model& m, std::vector<kernels::KvBlockLayout> layouts, int64_t max_batch)
    : m_(m), be_(m.backend()), layouts_(std::move(layouts)), max_batch_(max_batch) {
  KVC_ASSERT(max_batch > 0);
  const ModelConfig& c = m.config();
  const KvGroupMap map = c.kv_group_map();
  KVC_ASSERT(static_cast<int>(layouts_.size()) == map.n_storing());
  for (int64_t l = 0; l < c.n_layer; ++l) {
    layer_group_.push_back(map.kv_group[static_cast<size_t>(l)]);
    layer_index_.push_back(map.kv_layer[static_cast<size_t>(l)]);
    layer_stores_.push_back(map.layer_stores(l));
  }
  for (size_t g = 0; g < layouts_.size(); ++g) {
    const kernels::KvBlockLayout& layout = layouts_[g];
    KVC_ASSERT(layout.n_layer == map.groups[g].n_layer && layout.block_tokens == layouts_[0].block_tokens);
    KVC_ASSERT(layout.state ? layout.head_dim == c.recurrent_state_floats()  // lfm2's conv states
                            : layout.n_kv_head == c.n_head_kv);
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {  // gemma4: local and global heads differ in size
    const kernels::KvBlockLayout& layout = layouts_[static_cast<size_t>(layer_group_[static_cast<size_t>(l)])];
    KVC_ASSERT(layout.state || layout.head_dim == c.layer_head_dim(l));
  }
  slices_.resize(layouts_.size());
  auto buf = [&](int64_t width) {
    auto* p = static_cast<float*>(be_.alloc(static_cast<size_t>(max_batch * width) * sizeof(float)));
    if (!p) alloc_failed_ = true;  // reported by eval(): a device can run out of memory
    return p;
  };
  x_ = buf(c.n_embd);
  h_ = buf(c.n_embd);
  q_ = buf(c.n_head * c.max_head_dim());
  k_ = buf(c.n_head_kv * c.max_head_dim());
  v_ = buf(c.n_head_kv * c.max_head_dim());
  att_ = buf(c.n_head * c.max_head_dim());
  gate_ = buf(c.n_ff);
  up_ = buf(c.n_ff);
  out_rows_ = buf(c.n_embd);
  if (c.is_moe()) moe_out_ = buf(c.n_embd);
  if (c.mla) {
    const int64_t scratch = std::max({c.q_lora_rank, c.kv_lora_rank + c.rope.n_rot, c.mla_nope(), c.mla_value_head});
    mla_q_ = buf(c.n_head * c.head_dim);
    mla_a_ = buf(scratch);
    mla_b_ = buf(scratch);
    mla_o_ = buf(c.n_head * c.mla_value_head);
    mla_pe_ = buf(c.n_head * c.rope.n_rot);
  }
  if (c.lfm2) {
    conv_bcx_ = buf(3 * c.n_embd);
    conv_y_ = buf(c.n_embd);
  }
  if (c.gemma4) {
    if (c.n_embd_per_layer > 0) {
      pl_in_ = buf(c.n_layer * c.n_embd_per_layer);
      pl_tmp_ = buf(c.n_layer * c.n_embd_per_layer);
      pl_gate_ = buf(c.n_embd_per_layer);
    }
    const std::vector<float> ones(static_cast<size_t>(c.max_head_dim()), 1.0f);
    auto up = be_.upload_floats(ones.data(), c.max_head_dim());
    if (up.ok()) ones_ = *up;
    if (!up.ok()) alloc_failed_ = true;
  }
  logits_ = buf(c.n_vocab);
  tokens_ = static_cast<int32_t*>(be_.alloc(static_cast<size_t>(max_batch) * sizeof(int32_t)));
  if (!tokens_) alloc_failed_ = true;
}

Forward::~Forward() {
  for (float* p : {x_,     h_,     q_,     k_,     v_,      att_,      gate_,   up_,    out_rows_, logits_,  moe_out_,
                   mla_q_, mla_a_, mla_b_, mla_o_, mla_pe_, conv_bcx_, conv_y_, pl_in_, pl_tmp_,   pl_gate_, ones_}) {
    be_.free(p);
  }
  be_.free(tokens_);
}

Result<std::span<const float>> Forward::eval(std::span<const SeqInput> inputs, Logits which) {
  const ModelConfig& c = m_.config();
  if (alloc_failed_) {
    return make_error(ErrorCode::out_of_memory, "the " + std::string(be_.name()) + " backend has no memory for the " +
                                                    "activations of a batch of " + std::to_string(max_batch_) +
                                                    " tokens; use a smaller batch (-b) or context");
  }
  const int64_t B = layouts_[0].block_tokens;
  const size_t n_groups = layouts_.size();
  for (auto& s : slices_) s.clear();
  batch_tokens_.clear();
  positions_.clear();
  for (const SeqInput& in : inputs) {
    const auto n = static_cast<int64_t>(in.tokens.size());
    if (n == 0) return make_error(ErrorCode::invalid_argument, "nothing to evaluate: a sequence has no tokens");
    if (in.blocks.size() != n_groups) {
      return make_error(ErrorCode::invalid_argument, "a sequence gives " + std::to_string(in.blocks.size()) +
                                                         " block tables for a KV cache of " + std::to_string(n_groups) +
                                                         " groups");
    }
    for (const std::span<uint8_t* const> table : in.blocks) {
      if (static_cast<int64_t>(table.size()) * B < in.pos0 + n) {
        return make_error(ErrorCode::invalid_argument,
                          "the KV blocks cannot hold positions up to " + std::to_string(in.pos0 + n));
      }
    }
    const kernels::KvBlockLayout& l0 = layouts_[0];
    if (kernels::kv_k_per_channel(l0.k_type) &&
        static_cast<int64_t>(in.kv_tail.size()) < int64_t{l0.n_layer} * l0.tail_layer_elems()) {
      return make_error(ErrorCode::invalid_argument, "int4c K needs the sequence's holding area (KvCache::kv_tail)");
    }
    for (int32_t t : in.tokens) {
      if (t < 0 || t >= c.n_vocab) {
        return make_error(
            ErrorCode::invalid_argument,
            "token id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(c.n_vocab));
      }
    }
    slices_[0].push_back(backend::SeqSlice{in.blocks[0], in.pos0, n, static_cast<int64_t>(batch_tokens_.size()),
                                           in.kv_tail.empty() ? nullptr : in.kv_tail.data()});
    for (size_t g = 1; g < n_groups; ++g) {
      slices_[g].push_back(backend::SeqSlice{in.blocks[g], in.pos0, n, static_cast<int64_t>(batch_tokens_.size())});
    }
    batch_tokens_.insert(batch_tokens_.end(), in.tokens.begin(), in.tokens.end());
    for (int64_t i = 0; i < n; ++i) positions_.push_back(in.pos0 + i);
  }
  const auto n = static_cast<int64_t>(batch_tokens_.size());
  if (n > max_batch_) {
    return make_error(ErrorCode::invalid_argument,
                      "a batch of " + std::to_string(n) + " tokens exceeds the limit of " + std::to_string(max_batch_));
  }
  const ModelWeights& w = m_.weights();
  const kernels::AttentionShape shape{
      static_cast<int>(c.n_head),
      static_cast<int>(c.n_head_kv),
      static_cast<int>(c.head_dim),
      c.kv_width(),
      c.query_scale > 0.0f ? c.query_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
      c.attn_softcap};
  be_.copy_from_host(batch_tokens_.data(), tokens_, static_cast<size_t>(n) * sizeof(int32_t));
  be_.embed(w.token_embd, tokens_, n, x_);  // x: (n, n_embd)
  if (c.gemma) be_.scale(x_, n * c.n_embd, std::sqrt(static_cast<float>(c.n_embd)));
  if (c.gemma4 && c.n_embd_per_layer > 0) gemma4_per_layer_inputs(n);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    // The layer's K/V live in its KV group's blocks, at its index among that group's layers.
    const int group = layer_group_[static_cast<size_t>(l)];
    const int layer = layer_index_[static_cast<size_t>(l)];
    const kernels::KvBlockLayout& layout = layouts_[static_cast<size_t>(group)];
    const std::vector<backend::SeqSlice>& slices = slices_[static_cast<size_t>(group)];
    // A shared layer (kvchat's test models, as Gemma 3n's last layers) computes Q only and reads the
    // K/V an earlier layer of its kind stored.
    const bool stores = layer_stores_[static_cast<size_t>(l)];
    if (c.gemma4) {  // forward_gemma4.cpp
      gemma4_layer(l, n, layout, layer, slices, stores);
      continue;
    }
    // Attention block: h = norm(x); q, k, v = h W^T (+ per-head norms); rope; store k, v;
    // x += attn(q) Wo^T (Gemma: x += post_norm(attn(q) Wo^T), a local layer's window in the mask).
    be_.rmsnorm(x_, lw.attn_norm, n, c.n_embd, c.rms_eps, h_);
    if (c.layer_is_recurrent(l)) {  // lfm2's conv layer: its state in the recurrent group's blocks
      be_.matmul(lw.conv_in, h_, n, conv_bcx_, nullptr);
      be_.shortconv(layout, layer, slices, conv_bcx_, lw.conv_kernel, static_cast<int>(c.shortconv_l_cache), conv_y_);
      be_.matmul(lw.conv_out, conv_y_, n, h_, nullptr);
    } else if (c.mla) {  // deepseek2: attention in the latent space (forward_mla.cpp)
      mla_attention(l, n, layout, layer, slices, shape);
    } else {
      be_.matmul(lw.wq, h_, n, q_, lw.bq);
      if (stores) {
        be_.matmul(lw.wk, h_, n, k_, lw.bk);
        be_.matmul(lw.wv, h_, n, v_, lw.bv);
      }
      if (c.qk_norm) {  // qwen3: each head of Q and K normed on its own, before rope
        be_.rmsnorm(q_, lw.q_norm, n * c.n_head, c.head_dim, c.rms_eps, q_);
        if (stores) be_.rmsnorm(k_, lw.k_norm, n * c.n_head_kv, c.head_dim, c.rms_eps, k_);
      }
      if (c.layer_has_rope(l)) {  // SmolLM3 leaves every fourth layer without positions (NoPE)
        const kernels::RopeParams& rope = c.layer_rope(l);  // Gemma's local layers have their own
        be_.rope(q_, n, positions_.data(), static_cast<int>(c.n_head), static_cast<int>(c.head_dim), rope);
        if (stores)
          be_.rope(k_, n, positions_.data(), static_cast<int>(c.n_head_kv), static_cast<int>(c.head_dim), rope);
      }
      if (stores) be_.kv_store(layout, layer, slices, k_, v_);
      kernels::AttentionShape layer_shape = shape;
      layer_shape.sinks = lw.attn_sinks;  // gpt-oss: each head's sink in its softmax
      be_.attention(layout, layer, slices, q_, layer_shape, c.layer_window(l), att_);
      be_.matmul(lw.wo, att_, n, h_, lw.bo);
    }
    if (c.gemma) be_.rmsnorm(h_, lw.attn_post_norm, n, c.n_embd, c.rms_eps, h_);
    be_.add(x_, h_, n * c.n_embd);
    // Feed-forward block: x += (silu(h Wg^T) * (h Wu^T)) Wd^T with h = norm(x) (Gemma: gelu,
    // and the result post-normed); a mixture-of-experts layer: x += moe_ffn(h).
    be_.rmsnorm(x_, lw.ffn_norm, n, c.n_embd, c.rms_eps, h_);
    if (c.layer_is_moe(l)) {
      be_.moe_ffn(lw.moe, h_, n, moe_out_);
      be_.add(x_, moe_out_, n * c.n_embd);
      continue;
    }
    be_.matmul(lw.w_gate, h_, n, gate_, nullptr);
    be_.matmul(lw.w_up, h_, n, up_, nullptr);
    if (c.gemma) {
      be_.gelu_mul(gate_, up_, n * c.n_ff);
    } else {
      be_.silu_mul(gate_, up_, n * c.n_ff);
    }
    be_.matmul(lw.w_down, gate_, n, h_, nullptr);
    if (c.gemma) be_.rmsnorm(h_, lw.ffn_post_norm, n, c.n_embd, c.rms_eps, h_);
    be_.add(x_, h_, n * c.n_embd);
  }
  // Logits for every row, or for the last row of each sequence.
  const float* rows = x_;
  int64_t n_out = n;
  if (which == Logits::last) {
    const std::vector<backend::SeqSlice>& seqs = slices_[0];
    n_out = static_cast<int64_t>(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int64_t src = seqs[i].row_begin + seqs[i].n_tokens - 1;
      be_.copy(x_ + src * c.n_embd, out_rows_ + static_cast<int64_t>(i) * c.n_embd,
               static_cast<size_t>(c.n_embd) * sizeof(float));
    }
    rows = out_rows_;
  }
  be_.rmsnorm(rows, w.output_norm, n_out, c.n_embd, c.rms_eps, h_);
  be_.matmul(w.output, h_, n_out, logits_, nullptr);
  if (c.final_softcap > 0.0f) be_.softcap(logits_, n_out * c.n_vocab, c.final_softcap);
  host_logits_.resize(static_cast<size_t>(n_out * c.n_vocab));
  be_.copy_to_host(logits_, host_logits_.data(), host_logits_.size() * sizeof(float));
  KVC_TRY(be_.take_error());
  return std::span<const float>(host_logits_);
}

}  // namespace kvc::model

// gemma4's layer: heads of the layer's own size, Q/K norms and an unweighted V norm, GeGLU of the
// layer's width, the per-layer embedding gated into the residual, and the layer's output scale.
#include <cmath>

#include "core/model/forward.h"

namespace kvc::model {

// The per-layer inputs, as llama.cpp's gemma4 computes them from the scaled embeddings x (n rows):
//   proj   = rmsnorm_each_layer(x Wplm^T / sqrt(n_embd)) * per_layer_proj_norm   (n, L, P)
//   tok    = per_layer_token_embd[token] * sqrt(P)                               (n, L, P)
//   pl_in  = (proj + tok) / sqrt(2), stored layer-major (L, n, P) so each layer reads one slice.
void Forward::gemma4_per_layer_inputs(int64_t n) {
  const ModelConfig& c = m_.config();
  const ModelWeights& w = m_.weights();
  const int64_t L = c.n_layer, P = c.n_embd_per_layer;
  be_.matmul(w.per_layer_model_proj, x_, n, pl_tmp_, nullptr);
  be_.scale(pl_tmp_, n * L * P, 1.0f / std::sqrt(static_cast<float>(c.n_embd)));
  be_.rmsnorm(pl_tmp_, w.per_layer_proj_norm, n * L, P, c.rms_eps, pl_tmp_);
  be_.embed(w.per_layer_token_embd, tokens_, n, pl_in_);  // token-major here, reordered below
  be_.scale(pl_in_, n * L * P, std::sqrt(static_cast<float>(P)));
  be_.add(pl_tmp_, pl_in_, n * L * P);
  be_.scale(pl_tmp_, n * L * P, 1.0f / std::sqrt(2.0f));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t l = 0; l < L; ++l) {
      be_.copy(pl_tmp_ + (t * L + l) * P, pl_in_ + (l * n + t) * P, static_cast<size_t>(P) * sizeof(float));
    }
  }
}

//   h = norm(x); q = qnorm(h Wq^T) roped; a storing layer: k = knorm(h Wk^T) roped, v = rmsnorm(h Wv^T)
//   (h Wk^T where the layer has no attn_v), both stored; a shared layer reads its producer's.
//   x += post_norm(attn(q) Wo^T)                          scores unscaled, the local window in the mask
//   x += ffw_post_norm(gelu(h Wg^T) * (h Wu^T) Wd^T)      h = ffn_norm(x), the layer's own width
//   x += post_norm((gelu(x Wgate^T) * pl_in[l]) Wproj^T)  the per-layer embedding, where the model has it
//   x *= layer_output_scale
void Forward::gemma4_layer(int64_t l, int64_t n, const kernels::KvBlockLayout& layout, int layer,
                           const std::vector<backend::SeqSlice>& slices, bool stores) {
  const ModelConfig& c = m_.config();
  const LayerWeights& lw = m_.weights().layers[static_cast<size_t>(l)];
  const int64_t hd = c.layer_head_dim(l), ff = c.layer_n_ff(l);
  const int n_head = static_cast<int>(c.n_head), n_kv = static_cast<int>(c.n_head_kv);
  const kernels::RopeParams& rope = c.layer_rope(l);
  be_.rmsnorm(x_, lw.attn_norm, n, c.n_embd, c.rms_eps, h_);
  be_.matmul(lw.wq, h_, n, q_, nullptr);
  be_.rmsnorm(q_, lw.q_norm, n * c.n_head, hd, c.rms_eps, q_);
  be_.rope(q_, n, positions_.data(), n_head, static_cast<int>(hd), rope);
  if (stores) {
    be_.matmul(lw.wk, h_, n, k_, nullptr);
    if (lw.wv.view.n_rows > 0) {
      be_.matmul(lw.wv, h_, n, v_, nullptr);
    } else {
      be_.copy(k_, v_, static_cast<size_t>(n * c.layer_kv_width(l)) * sizeof(float));
    }
    be_.rmsnorm(k_, lw.k_norm, n * c.n_head_kv, hd, c.rms_eps, k_);
    be_.rmsnorm(v_, ones_, n * c.n_head_kv, hd, c.rms_eps, v_);
    be_.rope(k_, n, positions_.data(), n_kv, static_cast<int>(hd), rope);
    be_.kv_store(layout, layer, slices, k_, v_);
  }
  const kernels::AttentionShape shape{n_head, n_kv, static_cast<int>(hd), c.layer_kv_width(l), c.query_scale, 0.0f};
  be_.attention(layout, layer, slices, q_, shape, c.layer_window(l), att_);
  be_.matmul(lw.wo, att_, n, h_, nullptr);
  be_.rmsnorm(h_, lw.attn_post_norm, n, c.n_embd, c.rms_eps, h_);
  be_.add(x_, h_, n * c.n_embd);

  be_.rmsnorm(x_, lw.ffn_norm, n, c.n_embd, c.rms_eps, h_);
  be_.matmul(lw.w_gate, h_, n, gate_, nullptr);
  be_.matmul(lw.w_up, h_, n, up_, nullptr);
  be_.gelu_mul(gate_, up_, n * ff);
  be_.matmul(lw.w_down, gate_, n, h_, nullptr);
  be_.rmsnorm(h_, lw.ffn_post_norm, n, c.n_embd, c.rms_eps, h_);
  be_.add(x_, h_, n * c.n_embd);

  if (c.n_embd_per_layer > 0) {
    const int64_t P = c.n_embd_per_layer;
    be_.matmul(lw.per_layer_gate, x_, n, pl_gate_, nullptr);
    be_.gelu_mul(pl_gate_, pl_in_ + l * n * P, n * P);
    be_.matmul(lw.per_layer_proj, pl_gate_, n, h_, nullptr);
    be_.rmsnorm(h_, lw.per_layer_post_norm, n, c.n_embd, c.rms_eps, h_);
    be_.add(x_, h_, n * c.n_embd);
  }
  if (lw.out_scale != 1.0f) be_.scale(x_, n * c.n_embd, lw.out_scale);
}

}  // namespace kvc::model

// deepseek2's multi-head latent attention in the absorbed form: queries mapped into the latent space,
// scores against the cached [k_pe | latent] rows, the latent as the value, v_b after.
#include <cstring>

#include "core/model/forward.h"

namespace kvc::model {

// With H heads, latent rank R, rope dimensions P (cache row D = R + P), query heads of
// K = nope N + P, values of V per head:
//   q      = h Wq^T (or norm(h Wq_a^T) Wq_b^T)                 (n, H K), a head | q_nope | q_pe |
//   kv     = h Wkv_a^T                                         (n, R + P): | latent | k_pe |
//   row    = | rmsnorm(latent) | rope(k_pe) |                  stored in the blocks (D a token)
//   q'_h   = | q_nope_h Wk_b_h^T | rope(q_pe_h) |              (n, H D): MQA over the rows
//   o_h    = attention(q'_h)[:R] Wv_b_h^T                      (n, V): the latent part is the value
//   h      = | o_0 .. o_H-1 | Wo^T
// A latent cache (KvBlockLayout::v_in_k) reads each row whole as the value; its first R outputs
// are the latent's, the rest is dropped. The rope parts are rotated together in one buffer.
void Forward::mla_attention(int64_t l, int64_t n, const kernels::KvBlockLayout& layout, int layer,
                            const std::vector<backend::SeqSlice>& slices, const kernels::AttentionShape& shape) {
  const ModelConfig& c = m_.config();
  const LayerWeights& lw = m_.weights().layers[static_cast<size_t>(l)];
  const int64_t H = c.n_head, R = c.kv_lora_rank, P = c.rope.n_rot, D = c.head_dim, K = c.mla_key_head;
  const int64_t N = c.mla_nope(), V = c.mla_value_head;
  auto copy = [&](const float* src, float* dst, int64_t n_floats) {
    be_.copy(src, dst, static_cast<size_t>(n_floats) * sizeof(float));
  };
  kernels::RopeParams rope = c.rope;  // over buffers of rope parts only
  if (c.q_lora_rank > 0) {
    be_.matmul(lw.wq_a, h_, n, mla_a_, nullptr);
    be_.rmsnorm(mla_a_, lw.q_a_norm, n, c.q_lora_rank, c.rms_eps, mla_a_);
    be_.matmul(lw.wq_b, mla_a_, n, q_, nullptr);
  } else {
    be_.matmul(lw.wq, h_, n, q_, nullptr);
  }
  // The cache rows in k_: the normed latent, then the rotated k_pe.
  be_.matmul(lw.wkv_a, h_, n, v_, nullptr);
  for (int64_t t = 0; t < n; ++t) {
    copy(v_ + t * D, mla_a_ + t * R, R);
    copy(v_ + t * D + R, mla_pe_ + t * P, P);
  }
  be_.rmsnorm(mla_a_, lw.kv_a_norm, n, R, c.rms_eps, mla_a_);
  be_.rope(mla_pe_, n, positions_.data(), 1, static_cast<int>(P), rope);
  for (int64_t t = 0; t < n; ++t) {
    copy(mla_a_ + t * R, k_ + t * D, R);
    copy(mla_pe_ + t * P, k_ + t * D + R, P);
  }
  // The absorbed queries in mla_q_: each head's q_nope through its k_b, then its rotated q_pe.
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < n; ++t) {
      copy(q_ + t * H * K + h * K, mla_a_ + t * N, N);
      copy(q_ + t * H * K + h * K + N, mla_pe_ + t * H * P + h * P, P);
    }
    be_.matmul(lw.wk_b[static_cast<size_t>(h)], mla_a_, n, mla_b_, nullptr);
    for (int64_t t = 0; t < n; ++t) copy(mla_b_ + t * R, mla_q_ + t * H * D + h * D, R);
  }
  be_.rope(mla_pe_, n, positions_.data(), static_cast<int>(H), static_cast<int>(P), rope);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < H; ++h) copy(mla_pe_ + t * H * P + h * P, mla_q_ + t * H * D + h * D + R, P);
  }
  be_.kv_store(layout, layer, slices, k_, k_);  // a latent layout stores K only; V is the same row
  be_.attention(layout, layer, slices, mla_q_, shape, 0, att_);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < n; ++t) copy(att_ + t * H * D + h * D, mla_a_ + t * R, R);
    be_.matmul(lw.wv_b[static_cast<size_t>(h)], mla_a_, n, mla_b_, nullptr);
    for (int64_t t = 0; t < n; ++t) copy(mla_b_ + t * V, mla_o_ + t * H * V + h * V, V);
  }
  be_.matmul(lw.wo, mla_o_, n, h_, nullptr);
}

}  // namespace kvc::model

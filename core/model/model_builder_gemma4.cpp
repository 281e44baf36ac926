// Random-weight gemma4 models (per-layer embeddings, heads of two sizes, shared KV layers): keys and tensors.
#include <string>

#include "core/model/model_builder.h"

namespace kvc::model {

using kernels::DType;

namespace {

bool is_local(const ModelSpec& s, int64_t l) { return l % s.swa_period != s.swa_period - 1; }
int64_t first_shared(const ModelSpec& s) { return s.n_layer - s.shared_kv_layers; }
int64_t head_dim_of(const ModelSpec& s, int64_t l) { return is_local(s, l) ? s.head_dim_swa : s.head_size(); }
int64_t ff_of(const ModelSpec& s, int64_t l) { return s.double_wide_ffn && l >= first_shared(s) ? 2 * s.n_ff : s.n_ff; }

}  // namespace

Status check_gemma4_spec(const ModelSpec& s) {
  auto bad = [](const std::string& m) { return make_error(ErrorCode::invalid_argument, m); };
  if (s.head_dim_swa <= 0 || s.head_dim_swa % 32 != 0 || s.head_dim_swa > 1024)
    return bad("gemma4: --head-dim-swa (the local layers' head size) must be a positive multiple of 32, at most 1024");
  if (s.head_size() % 8 != 0) return bad("gemma4: --head-dim must be a multiple of 8 (a quarter of it is rotated)");
  if (s.swa_period < 2 || s.swa_period > 64) return bad("gemma4: --swa-period must lie in [2, 64]");
  if (s.sliding_window <= 0) return bad("gemma4: --window (the local layers' window) must be positive");
  if (s.n_embd_per_layer < 0 || s.n_embd_per_layer % 32 != 0 || s.n_embd_per_layer > 4096)
    return bad("gemma4: --per-layer-embd must be 0 or a positive multiple of 32, at most 4096");
  if (s.shared_kv_layers < 0 || s.shared_kv_layers > s.n_layer - 2)
    return bad("gemma4: --shared-kv-layers must leave at least two layers that store K/V");
  if (s.shared_kv_layers > 0) {
    const int64_t n_kv = first_shared(s);
    if (is_local(s, n_kv - 1) || !is_local(s, n_kv - 2))
      return bad("gemma4: the last storing layer (" + std::to_string(n_kv - 1) +
                 ") must be global and the one before it local, the layers llama.cpp's shared layers read; choose "
                 "--shared-kv-layers so that --layers minus it is a multiple of --swa-period");
  }
  if (!(s.rope_freq_base_swa > 0)) return bad("gemma4: --rope-base-swa must be positive");
  if (!(s.final_softcap >= 0 && s.final_softcap < 1000)) return bad("--final-softcap must lie in [0, 1000)");
  if (!(s.rope_scale_factor >= 1 && s.rope_scale_factor < 1000)) return bad("--rope-scale-factor must be in [1, 1000)");
  return {};
}

void add_gemma4_metadata(const ModelSpec& s, gguf::GgufWriter& w) {
  const std::string a = "gemma4.";
  auto u32 = [&](const std::string& key, int64_t v) { w.set_u32(a + key, static_cast<uint32_t>(v)); };
  // As llama.cpp's converter writes them: key_length the global heads (which rotate a quarter of their
  // pairs through rope_freqs, so rope.dimension_count is the whole head), key_length_swa the local ones.
  u32("attention.key_length", s.head_size());
  u32("attention.value_length", s.head_size());
  u32("attention.key_length_swa", s.head_dim_swa);
  u32("attention.value_length_swa", s.head_dim_swa);
  u32("rope.dimension_count", s.head_size());
  u32("rope.dimension_count_swa", s.head_dim_swa);
  w.set_f32(a + "rope.freq_base_swa", s.rope_freq_base_swa);
  std::vector<bool> pattern;
  for (int64_t l = 0; l < s.n_layer; ++l) pattern.push_back(is_local(s, l));
  w.set_vector(a + "attention.sliding_window_pattern", pattern);
  u32("attention.shared_kv_layers", s.shared_kv_layers);
  u32("embedding_length_per_layer_input", s.n_embd_per_layer);
  w.set_f32(a + "final_logit_softcapping", s.final_softcap);
  if (s.double_wide_ffn) {
    std::vector<uint32_t> ff;
    for (int64_t l = 0; l < s.n_layer; ++l) ff.push_back(static_cast<uint32_t>(ff_of(s, l)));
    w.set_vector(a + "feed_forward_length", ff);
  }
  if (s.rope_scale_factor > 1) {  // linear scaling of the global layers' positions
    w.set_string(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", s.rope_scale_factor);
  }
}

void plan_gemma4_globals(const ModelSpec& s, int64_t n_vocab, std::vector<TensorPlan>& plans) {
  const PolicyModel policy{s.n_layer, s.n_head / s.n_head_kv, false};
  // Proportional rope: a quarter of the global heads' pairs rotate, the rest stand still (factor 1e30).
  const int64_t pairs = s.head_size() / 2, rotated = s.head_size() / 8;
  std::vector<float> factors(static_cast<size_t>(pairs), 1e30f);
  for (int64_t i = 0; i < rotated; ++i) factors[static_cast<size_t>(i)] = 1.0f;
  plans.push_back({"rope_freqs.weight", {pairs}, DType::f32, 0.0f, 0.0f, factors});
  if (s.n_embd_per_layer == 0) return;
  const int64_t width = s.n_embd_per_layer * s.n_layer;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float std) {
    plans.push_back({name, {cols, rows}, tensor_type(s.type, name, 2, cols, policy), 0.0f, std, {}});
  };
  matrix("per_layer_token_embd.weight", n_vocab, width, s.weight_std);
  matrix("per_layer_model_proj.weight", width, s.n_embd, s.weight_std);
  plans.push_back({"per_layer_proj_norm.weight", {s.n_embd_per_layer}, DType::f32, 1.0f, s.norm_std, {}});
}

void plan_gemma4_layer(const ModelSpec& s, int64_t l, std::vector<TensorPlan>& plans) {
  const std::string b = "blk." + std::to_string(l) + ".";
  const float qk_std = s.qk_std > 0 ? s.qk_std : s.weight_std;
  const PolicyModel policy{s.n_layer, s.n_head / s.n_head_kv, false};
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float std) {
    plans.push_back({name, {cols, rows}, tensor_type(s.type, name, 2, cols, policy), 0.0f, std, {}});
  };
  auto vector = [&](const std::string& name, int64_t n, float mean, float std) {
    plans.push_back({name, {n}, DType::f32, mean, std, {}});
  };
  const int64_t hd = head_dim_of(s, l), ff = ff_of(s, l);
  vector(b + "attn_norm.weight", s.n_embd, 1.0f, s.norm_std);
  matrix(b + "attn_q.weight", s.n_head * hd, s.n_embd, qk_std);
  // The shared layers have K (and V) projections too, as released files do: never read.
  matrix(b + "attn_k.weight", s.n_head_kv * hd, s.n_embd, qk_std);
  if (!(s.k_eq_v && !is_local(s, l))) matrix(b + "attn_v.weight", s.n_head_kv * hd, s.n_embd, s.weight_std);
  vector(b + "attn_q_norm.weight", hd, s.qk_norm_mean, s.norm_std);
  vector(b + "attn_k_norm.weight", hd, s.qk_norm_mean, s.norm_std);
  matrix(b + "attn_output.weight", s.n_embd, s.n_head * hd, s.weight_std);
  vector(b + "post_attention_norm.weight", s.n_embd, 1.0f, s.norm_std);
  vector(b + "ffn_norm.weight", s.n_embd, 1.0f, s.norm_std);
  matrix(b + "ffn_gate.weight", ff, s.n_embd, s.weight_std);
  matrix(b + "ffn_up.weight", ff, s.n_embd, s.weight_std);
  matrix(b + "ffn_down.weight", s.n_embd, ff, s.weight_std);
  vector(b + "post_ffw_norm.weight", s.n_embd, 1.0f, s.norm_std);
  if (s.n_embd_per_layer > 0) {
    matrix(b + "inp_gate.weight", s.n_embd_per_layer, s.n_embd, s.weight_std);
    matrix(b + "proj.weight", s.n_embd, s.n_embd_per_layer, s.weight_std);
    vector(b + "post_norm.weight", s.n_embd, 1.0f, s.norm_std);
  }
  vector(b + "layer_output_scale.weight", 1, 0.8f, 0.1f);  // trained ones lie below 1
}

}  // namespace kvc::model

// Random-weight lfm2 models (short-convolution layers and GQA attention layers): keys and tensors.
#include <string>

#include "core/model/model_builder.h"

namespace kvc::model {

using kernels::DType;

bool lfm2_layer_is_attention(int64_t l) {
  // LFM2-1.2B's 16 layers: attention at 2, 5, 8, 10, 12 and 14, short convolutions elsewhere;
  // more or fewer layers repeat or cut the pattern.
  constexpr char k_pattern[] = "ccaccaccacacacac";
  return k_pattern[l % 16] == 'a';
}

Status check_lfm2_spec(const ModelSpec& s) {
  auto bad = [](const std::string& m) { return make_error(ErrorCode::invalid_argument, m); };
  if (s.shortconv_l_cache < 2 || s.shortconv_l_cache > 64) return bad("--conv-taps must lie in [2, 64]");
  if (s.n_layer < 3) return bad("lfm2 needs at least 3 layers (its first attention layer is layer 2)");
  if (s.head_dim != 0) return bad("lfm2's heads are --dim / --heads wide (no --head-dim)");
  return {};
}

void add_lfm2_metadata(const ModelSpec& s, gguf::GgufWriter& w) {
  std::vector<int32_t> heads_kv;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    heads_kv.push_back(lfm2_layer_is_attention(l) ? static_cast<int32_t>(s.n_head_kv) : 0);
  }
  w.set_vector("lfm2.attention.head_count_kv", std::move(heads_kv));  // replaces the scalar
  w.set_u32("lfm2.shortconv.l_cache", static_cast<uint32_t>(s.shortconv_l_cache));
}

void plan_lfm2_layer(const ModelSpec& s, int64_t l, std::vector<TensorPlan>& plans) {
  const std::string b = "blk." + std::to_string(l) + ".";
  const float qk_std = s.qk_std > 0 ? s.qk_std : s.weight_std;
  const int64_t hd = s.head_size();
  const PolicyModel policy{s.n_layer, s.n_head / s.n_head_kv, !s.tied};
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float std) {
    plans.push_back({name, {cols, rows}, tensor_type(s.type, name, 2, cols, policy), 0.0f, std, {}});
  };
  auto vector = [&](const std::string& name, int64_t n, float mean, float std) {
    plans.push_back({name, {n}, DType::f32, mean, std, {}});
  };
  vector(b + "attn_norm.weight", s.n_embd, 1.0f, s.norm_std);
  if (lfm2_layer_is_attention(l)) {
    matrix(b + "attn_q.weight", s.n_head * hd, s.n_embd, qk_std);
    matrix(b + "attn_k.weight", s.n_head_kv * hd, s.n_embd, qk_std);
    matrix(b + "attn_v.weight", s.n_head_kv * hd, s.n_embd, s.weight_std);
    vector(b + "attn_q_norm.weight", hd, s.qk_norm_mean, s.norm_std);
    vector(b + "attn_k_norm.weight", hd, s.qk_norm_mean, s.norm_std);
    matrix(b + "attn_output.weight", s.n_embd, s.n_head * hd, s.weight_std);
  } else {
    // B, C, x rows; the taps F32 (the conv reads them as floats), near 0.3 so that every tap matters.
    matrix(b + "shortconv.in_proj.weight", 3 * s.n_embd, s.n_embd, s.weight_std);
    plans.push_back({b + "shortconv.conv.weight", {s.shortconv_l_cache, s.n_embd}, DType::f32, 0.0f, 0.3f, {}});
    matrix(b + "shortconv.out_proj.weight", s.n_embd, s.n_embd, s.weight_std);
  }
  vector(b + "ffn_norm.weight", s.n_embd, 1.0f, s.norm_std);
  matrix(b + "ffn_gate.weight", s.n_ff, s.n_embd, s.weight_std);
  matrix(b + "ffn_up.weight", s.n_ff, s.n_embd, s.weight_std);
  matrix(b + "ffn_down.weight", s.n_embd, s.n_ff, s.weight_std);
}

}  // namespace kvc::model

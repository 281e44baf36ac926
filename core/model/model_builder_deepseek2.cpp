// Random-weight deepseek2 models (multi-head latent attention, MoE with shared experts): keys and tensors.
#include <string>

#include "core/model/model_builder.h"

namespace kvc::model {

using kernels::DType;

Status check_deepseek2_spec(const ModelSpec& s) {
  auto bad = [](const std::string& m) { return make_error(ErrorCode::invalid_argument, m); };
  if (s.n_head_kv != 1) return bad("deepseek2 keeps one latent row a token: --kv-heads must be 1");
  if (s.kv_lora_rank <= 0 || s.kv_lora_rank % 32 != 0 || s.kv_lora_rank > 4096)
    return bad("--kv-lora-rank must be a positive multiple of 32, at most 4096");
  if (s.q_lora_rank < 0 || s.q_lora_rank % 32 != 0 || s.q_lora_rank > 8192)
    return bad("--q-lora-rank must be 0 or a positive multiple of 32, at most 8192");
  if (s.mla_rope <= 0 || s.mla_rope % 2 != 0 || s.mla_rope > 256) return bad("--rope-dim must be even, in [2, 256]");
  if (s.mla_nope <= 0 || s.mla_nope % 32 != 0 || s.mla_nope > 1024)
    return bad("--mla-nope must be a positive multiple of 32, at most 1024");
  if (s.mla_value <= 0 || s.mla_value > 1024) return bad("--mla-value must lie in [1, 1024]");
  if (s.n_dense_lead < 0 || s.n_dense_lead >= s.n_layer) return bad("--dense-layers must lie in [0, --layers)");
  if (s.n_expert_shared < 0 || s.n_expert_shared > 16) return bad("--shared-experts must lie in [0, 16]");
  if (s.gating != 1 && s.gating != 2) return bad("--gating must be softmax or sigmoid");
  if (!(s.selection_bias_std >= 0 && s.selection_bias_std < 100))
    return bad("--selection-bias-std must lie in [0, 100)");
  if (!(s.expert_weights_scale > 0 && s.expert_weights_scale < 100))
    return bad("--expert-weights-scale must lie in (0, 100)");
  if (s.expert_groups != 0 && (s.expert_groups < 2 || s.n_expert % s.expert_groups != 0 || s.expert_groups_used < 1 ||
                               s.expert_groups_used >= s.expert_groups ||
                               s.expert_groups_used * (s.n_expert / s.expert_groups) < s.n_expert_used))
    return bad("--expert-groups must divide --experts, with 1 <= --expert-groups-used < groups holding --experts-used");
  if (!(s.rope_scale_factor >= 1 && s.rope_scale_factor < 1000) || s.rope_orig_ctx <= 0)
    return bad("--rope-scale-factor must be in [1, 1000) (1: no YaRN) and --rope-orig-ctx positive");
  if (!(s.yarn_log_mul >= 0 && s.yarn_log_mul < 10)) return bad("--yarn-log-mul must lie in [0, 10)");
  if (s.n_nextn < 0 || s.n_nextn > 4) return bad("--nextn-layers must lie in [0, 4]");
  return {};
}

void add_deepseek2_metadata(const ModelSpec& s, gguf::GgufWriter& w) {
  const std::string a = "deepseek2.";
  auto u32 = [&](const std::string& key, int64_t v) { w.set_u32(a + key, static_cast<uint32_t>(v)); };
  // The cached row is the latent plus the rope part; the value is the latent (as the converter writes).
  u32("attention.key_length", s.kv_lora_rank + s.mla_rope);
  u32("attention.value_length", s.kv_lora_rank);
  u32("attention.key_length_mla", s.mla_nope + s.mla_rope);
  u32("attention.value_length_mla", s.mla_value);
  u32("attention.kv_lora_rank", s.kv_lora_rank);
  u32("attention.q_lora_rank", s.q_lora_rank);  // llama.cpp needs it (0: attn_q) unless the layer count is V2-Lite's
  u32("rope.dimension_count", s.mla_rope);
  u32("leading_dense_block_count", s.n_dense_lead);
  u32("expert_count", s.n_expert);
  u32("expert_used_count", s.n_expert_used);
  u32("expert_feed_forward_length", s.n_ff_exp);
  u32("expert_shared_count", s.n_expert_shared);
  u32("expert_gating_func", s.gating);
  if (s.n_nextn > 0) u32("nextn_predict_layers", s.n_nextn);  // counted in block_count
  w.set_f32(a + "expert_weights_scale", s.expert_weights_scale);
  w.set_bool(a + "expert_weights_norm", s.expert_weights_norm);
  if (s.expert_groups > 0) {
    u32("expert_group_count", s.expert_groups);
    u32("expert_group_used_count", s.expert_groups_used);
  }
  if (s.rope_scale_factor > 1) {  // DeepSeek's YaRN (V2-Lite: factor 40 over 4096, mscale_all_dim 0.707)
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", s.rope_scale_factor);
    u32("rope.scaling.original_context_length", s.rope_orig_ctx);
    if (s.yarn_log_mul > 0) w.set_f32(a + "rope.scaling.yarn_log_multiplier", s.yarn_log_mul);
  }
}

void plan_deepseek2_layer(const ModelSpec& s, int64_t l, std::vector<TensorPlan>& plans) {
  const std::string b = "blk." + std::to_string(l) + ".";
  const float qk_std = s.qk_std > 0 ? s.qk_std : s.weight_std;
  const PolicyModel policy{s.n_layer, s.n_head, !s.tied};
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float std, int64_t n_mats = 0) {
    const DType t = tensor_type(s.type, name, n_mats > 0 ? 3 : 2, cols, policy);
    std::vector<int64_t> shape{cols, rows};
    if (n_mats > 0) shape.push_back(n_mats);
    plans.push_back({name, shape, t, 0.0f, std, {}});
  };
  auto vector = [&](const std::string& name, int64_t n, float mean, float std) {
    plans.push_back({name, {n}, DType::f32, mean, std, {}});
  };
  const int64_t q_head = s.mla_nope + s.mla_rope;
  vector(b + "attn_norm.weight", s.n_embd, 1.0f, s.norm_std);
  if (s.q_lora_rank > 0) {
    matrix(b + "attn_q_a.weight", s.q_lora_rank, s.n_embd, s.weight_std);
    vector(b + "attn_q_a_norm.weight", s.q_lora_rank, 1.0f, s.norm_std);
    matrix(b + "attn_q_b.weight", s.n_head * q_head, s.q_lora_rank, qk_std);
  } else {
    matrix(b + "attn_q.weight", s.n_head * q_head, s.n_embd, qk_std);
  }
  matrix(b + "attn_kv_a_mqa.weight", s.kv_lora_rank + s.mla_rope, s.n_embd, qk_std);
  vector(b + "attn_kv_a_norm.weight", s.kv_lora_rank, 1.0f, s.norm_std);
  // Per head: k_b (kv_lora_rank rows of mla_nope) and v_b (mla_value rows of kv_lora_rank).
  matrix(b + "attn_k_b.weight", s.kv_lora_rank, s.mla_nope, qk_std, s.n_head);
  matrix(b + "attn_v_b.weight", s.mla_value, s.kv_lora_rank, s.weight_std, s.n_head);
  matrix(b + "attn_output.weight", s.n_embd, s.n_head * s.mla_value, s.weight_std);
  vector(b + "ffn_norm.weight", s.n_embd, 1.0f, s.norm_std);
  if (l < s.n_dense_lead) {
    matrix(b + "ffn_gate.weight", s.n_ff, s.n_embd, s.weight_std);
    matrix(b + "ffn_up.weight", s.n_ff, s.n_embd, s.weight_std);
    matrix(b + "ffn_down.weight", s.n_embd, s.n_ff, s.weight_std);
    return;
  }
  const float e_std = s.expert_std > 0 ? s.expert_std : s.weight_std;
  plans.push_back({b + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}, DType::f32, 0.0f, s.router_std});
  if (s.selection_bias_std > 0) vector(b + "exp_probs_b.bias", s.n_expert, 0.0f, s.selection_bias_std);
  matrix(b + "ffn_gate_exps.weight", s.n_ff_exp, s.n_embd, e_std, s.n_expert);
  matrix(b + "ffn_up_exps.weight", s.n_ff_exp, s.n_embd, e_std, s.n_expert);
  matrix(b + "ffn_down_exps.weight", s.n_embd, s.n_ff_exp, e_std, s.n_expert);
  if (s.n_expert_shared > 0) {
    const int64_t sh = s.n_ff_exp * s.n_expert_shared;
    matrix(b + "ffn_gate_shexp.weight", sh, s.n_embd, s.weight_std);
    matrix(b + "ffn_up_shexp.weight", sh, s.n_embd, s.weight_std);
    matrix(b + "ffn_down_shexp.weight", s.n_embd, sh, s.weight_std);
  }
}

// An MTP block as llama.cpp's converter writes GLM's and DeepSeek's: a whole MoE layer, then
// the projection of [embedding norm | hidden norm] back to the width and the norms around it.
void plan_deepseek2_mtp_block(const ModelSpec& s, int64_t l, std::vector<TensorPlan>& plans) {
  plan_deepseek2_layer(s, l, plans);
  const std::string b = "blk." + std::to_string(l) + ".nextn.";
  const PolicyModel policy{s.n_layer, s.n_head, !s.tied};
  const DType t = tensor_type(s.type, b + "eh_proj.weight", 2, 2 * s.n_embd, policy);
  plans.push_back({b + "eh_proj.weight", {2 * s.n_embd, s.n_embd}, t, 0.0f, s.weight_std, {}});
  for (const char* norm : {"enorm.weight", "hnorm.weight", "shared_head_norm.weight"})
    plans.push_back({b + norm, {s.n_embd}, DType::f32, 1.0f, s.norm_std, {}});
}

}  // namespace kvc::model

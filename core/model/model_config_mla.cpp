// deepseek2's multi-head latent attention keys: the ranks, the MLA head sizes and DeepSeek's YaRN mscale.
#include <cmath>
#include <string>

#include "core/gguf/gguf_file.h"
#include "core/model/model_config.h"

namespace kvc::model {

namespace {

Error bad(const std::string& key, const std::string& what) {
  return make_error(ErrorCode::invalid_file, "metadata " + key + ": " + what);
}

Result<int64_t> size_key(const gguf::GgufFile& f, const std::string& key, bool required, uint64_t max) {
  if (!f.find(key)) {
    if (!required) return int64_t{0};
    return bad(key, "is missing");
  }
  auto v = f.get_uint(key);
  if (!v.ok()) return v.error();
  if (*v > max || (required && *v == 0)) return bad(key, std::to_string(*v) + " is not a plausible size");
  return static_cast<int64_t>(*v);
}

}  // namespace

Status read_deepseek2(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string p = "deepseek2.";
  constexpr uint64_t k_max = uint64_t{1} << 14;
  // Files from before llama.cpp's converter split attn_kv_b (the decompression of the latent into
  // per-head K and V) into attn_k_b and attn_v_b have no MLA head sizes: kvchat runs MLA only in
  // its absorbed form, which needs the split tensors.
  if (!f.find(p + "attention.key_length_mla") || f.find_tensor("blk.0.attn_kv_b.weight") != nullptr) {
    return make_error(ErrorCode::unsupported,
                      "this deepseek2 file has the older single attn_kv_b tensor (no attention.key_length_mla, "
                      "attn_k_b, attn_v_b): kvchat runs multi-head latent attention only from the split tensors. "
                      "Reconvert the model with a recent llama.cpp convert_hf_to_gguf.py (since late 2025), or "
                      "download a GGUF made after that");
  }
  c.mla = true;
  auto rank = size_key(f, p + "attention.kv_lora_rank", true, k_max);
  if (!rank.ok()) return rank.error();
  c.kv_lora_rank = *rank;
  auto q_rank = size_key(f, p + "attention.q_lora_rank", false, k_max);  // 0 or absent: attn_q
  if (!q_rank.ok()) return q_rank.error();
  c.q_lora_rank = *q_rank;
  auto k_mla = size_key(f, p + "attention.key_length_mla", true, k_max);
  if (!k_mla.ok()) return k_mla.error();
  c.mla_key_head = *k_mla;
  auto v_mla = size_key(f, p + "attention.value_length_mla", true, k_max);
  if (!v_mla.ok()) return v_mla.error();
  c.mla_value_head = *v_mla;
  if (c.mla_key_head <= c.rope.n_rot) {
    return bad(p + "attention.key_length_mla", std::to_string(c.mla_key_head) +
                                                   " leaves no non-rope part beside rope.dimension_count " +
                                                   std::to_string(c.rope.n_rot));
  }
  if (c.head_dim != c.kv_lora_rank + c.rope.n_rot) {
    return bad(p + "attention.key_length", std::to_string(c.head_dim) + " must be kv_lora_rank + rope dimensions (" +
                                               std::to_string(c.kv_lora_rank + c.rope.n_rot) +
                                               "): the latent cache row");
  }
  if (c.n_head_kv != 1) {
    return bad(p + "attention.head_count_kv",
               std::to_string(c.n_head_kv) + ": MLA keeps one latent row a token (1, as the converter writes)");
  }
  if (f.find(p + "attention.value_length")) {
    auto vl = f.get_uint(p + "attention.value_length");
    if (!vl.ok()) return vl.error();
    if (*vl != static_cast<uint64_t>(c.kv_lora_rank)) {
      return bad(p + "attention.value_length", std::to_string(*vl) + " must equal kv_lora_rank " +
                                                   std::to_string(c.kv_lora_rank) + " (the value is the latent)");
    }
  }
  // DeepSeek's YaRN, as llama.cpp computes it (in float): rope.scaling.yarn_log_multiplier is
  // 0.1 mscale_all_dim; with it the rope keeps magnitude attn_factor (mscale / mscale_all_dim = 1,
  // where set_yarn put 1 + 0.1 ln factor), and the scores are scaled by mscale^2 / sqrt(key_length_mla),
  // mscale = magnitude (1 + 0.1 (log_mul / 0.1) ln factor).
  float log_mul = 0.0f;
  if (f.find(p + "rope.scaling.yarn_log_multiplier")) {
    auto v = f.get_float(p + "rope.scaling.yarn_log_multiplier");
    if (!v.ok()) return v.error();
    if (!std::isfinite(*v) || *v < 0.0 || *v > 100.0)
      return bad(p + "rope.scaling.yarn_log_multiplier", "out of range");
    log_mul = static_cast<float>(*v) / 0.1f;
  }
  const float factor = 1.0f / c.rope.freq_scale;
  if (c.rope.yarn && log_mul != 0.0f) {
    float attn = 1.0f;
    if (f.find(p + "rope.scaling.attn_factor")) {
      auto v = f.get_float(p + "rope.scaling.attn_factor");
      if (!v.ok()) return v.error();
      attn = static_cast<float>(*v);
    }
    // llama.cpp: (1 / (1 + 0.1 ln f)) * attn, and ggml's rope multiplies by (1 + 0.1 ln f) again.
    const float adjust = 1.0f + 0.1f * std::log(factor);
    c.rope.attn_factor = attn / adjust * adjust;
  }
  const float mscale = c.rope.attn_factor * (1.0f + 0.1f * log_mul * std::log(factor));
  c.query_scale = mscale * mscale / std::sqrt(static_cast<float>(c.mla_key_head));
  return {};
}

}  // namespace kvc::model

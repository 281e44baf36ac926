// Reading a llama-family model's hyper-parameters from GGUF metadata.
#include "core/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_format.h"
#include "core/util/assert.h"

namespace kvc::model {

namespace {

// Architectures whose GGUF tensors and metadata follow the llama layout.
struct ArchTraits {
  const char* name;
  bool interleaved_rope;  // llama: adjacent pairs; qwen2: halves (neox)
  bool qkv_bias;
  bool qk_norm;       // qwen3: RMSNorm of each head of Q and K before rope
  bool window;        // attention.sliding_window is honoured (llama.cpp ignores Qwen2's and Phi-3's)
  int no_rope_every;  // every n-th layer has no rope (SmolLM3: 4, fixed as in llama.cpp); 0: none
  int swa_period;     // Gemma: the local/global layer period (read_gemma); 0: not a Gemma
  bool moe = false;   // mixture-of-experts FFN layers (read_moe)
};
constexpr ArchTraits k_archs[] = {
    {"llama", true, false, false, true, 0, 0},
    {"mistral", true, false, false, true, 0, 0},
    {"qwen2", false, true, false, false, 0, 0},
    {"qwen3", false, false, true, true, 0, 0},
    {"phi3", false, false, false, false, 0, 0},
    {"smollm3", true, false, false, true, 4, 0},
    {"gemma2", false, false, false, false, 0, 2},
    {"gemma3", false, false, true, false, 0, 6},
    {"qwen3moe", false, false, true, false, 0, 0, true},
    {"gpt-oss", false, true, false, false, 0, 0, true},
    {"deepseek2", true, false, false, false, 0, 0, true},
    {"lfm2", false, false, true, false, 0, 0},
    {"gemma4", false, false, true, false, 0, 0},  // read_gemma4: its pattern is a per-layer list
};

// Bounds on the hyperparameters: far above any released model, low enough that every size
// computed from them (K and V bytes per token, the layer table) fits in 64 bits and is
// allocated only once the tensors confirm it.
constexpr int64_t k_max_width = int64_t{1} << 20;     // embedding_length
constexpr int64_t k_max_layers = int64_t{1} << 14;    // block_count
constexpr int64_t k_max_heads = int64_t{1} << 14;     // head_count, head_count_kv
constexpr int64_t k_max_head_dim = int64_t{1} << 14;  // key_length, value_length
constexpr int64_t k_max_ffn = int64_t{1} << 22;       // feed_forward_length
constexpr int64_t k_max_context = int64_t{1} << 24;   // context_length (kvchat-cli -c allows as much)
constexpr int64_t k_max_experts = int64_t{1} << 12;   // expert_count (released models: up to 512)

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Error bad(const std::string& key, const std::string& what) {
  return make_error(ErrorCode::invalid_file, "metadata " + key + ": " + what);
}

// Architectures whose files may end in multi-token-prediction blocks (llama.cpp reads
// nextn_predict_layers for these among the ones kvchat runs).
bool reads_mtp_blocks(std::string_view arch) { return arch == "deepseek2"; }

// nextn_predict_layers: the last blocks of block_count are MTP heads, not layers of the model.
Status read_nextn(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  const std::string key = p + "nextn_predict_layers";
  if (!f.find(key)) return {};
  auto v = f.get_uint(key);
  if (!v.ok()) return v.error();
  if (*v >= static_cast<uint64_t>(c.n_layer)) {
    return make_error(ErrorCode::invalid_file,
                      "metadata " + key + ": " + std::to_string(*v) + " of the " + std::to_string(c.n_layer) +
                          " blocks are prediction heads, which leaves no layer of the model itself (a file of MTP "
                          "heads only, made for speculative decoding beside its model?); open the model's own GGUF");
  }
  c.n_layer_nextn = static_cast<int64_t>(*v);
  c.n_layer -= c.n_layer_nextn;
  return {};
}

// A count in [1, max].
Result<int64_t> required_count(const gguf::GgufFile& f, const std::string& key, int64_t max) {
  auto v = f.get_uint(key);
  if (!v.ok()) return v.error();
  if (*v == 0 || *v > static_cast<uint64_t>(max)) {
    return bad(key, std::to_string(*v) + " is not a plausible size (it must be in [1, " + std::to_string(max) + "])");
  }
  return static_cast<int64_t>(*v);
}

Result<int64_t> optional_count(const gguf::GgufFile& f, const std::string& key, int64_t max, int64_t fallback) {
  if (!f.find(key)) return fallback;
  return required_count(f, key, max);
}

Result<float> optional_float(const gguf::GgufFile& f, const std::string& key, float fallback) {
  if (!f.find(key)) return fallback;
  auto v = f.get_float(key);
  if (!v.ok()) return v.error();
  if (!std::isfinite(*v)) return bad(key, "not a finite number");
  return static_cast<float>(*v);
}

// Gemma 2 / 3's own keys, read as llama.cpp reads them (c.rope is already parsed):
//   attention.sliding_window          the local layers' window; Gemma 2 without it: 4096; Gemma 3
//                                     without it (or 0): every layer global
//   attention.sliding_window_pattern  the period (default 2 / 6): layer l is local when
//                                     l % period < period - 1, so the last of each period is global
//   rope.freq_base_swa                the local layers' rope base (default: Gemma 2 the global
//                                     base, Gemma 3 10000); local layers never scale positions
//   attn_logit_softcapping, final_logit_softcapping   Gemma 2's caps (default 50, 30); Gemma 3
//                                     caps nothing (its logits only when it has no local layer)
// The query scale is 1 / sqrt(key_length) except for the 27B models (46 layers for Gemma 2, 62
// for Gemma 3), whose query_pre_attn_scalar is n_embd / n_head: llama.cpp picks it by the layer
// count too, as the GGUF does not carry the scalar.
Status read_gemma(const gguf::GgufFile& f, const std::string& p, int default_period, ModelConfig& c) {
  const bool gemma2 = c.arch == "gemma2";
  c.gemma = true;
  int64_t window = gemma2 ? 4096 : 0;
  if (f.find(p + "attention.sliding_window")) {
    auto w = f.get_uint(p + "attention.sliding_window");
    if (!w.ok()) return w.error();
    if (*w > static_cast<uint64_t>(k_max_context)) {
      return bad(p + "attention.sliding_window",
                 std::to_string(*w) + " is not a plausible size (at most " + std::to_string(k_max_context) + ")");
    }
    window = static_cast<int64_t>(*w);
  }
  c.local_window = window;
  c.swa_period = default_period;
  if (f.find(p + "attention.sliding_window_pattern")) {
    auto period = f.get_uint(p + "attention.sliding_window_pattern");
    if (!period.ok()) {
      return make_error(ErrorCode::unsupported, "metadata " + p +
                                                    "attention.sliding_window_pattern: kvchat reads it as one "
                                                    "period (an integer), not a per-layer list");
    }
    if (*period == 0 || *period > static_cast<uint64_t>(k_max_layers)) {
      return bad(p + "attention.sliding_window_pattern", std::to_string(*period) +
                                                             " is not a plausible period (it must be in [1, " +
                                                             std::to_string(k_max_layers) + "])");
    }
    c.swa_period = static_cast<int>(*period);
  }
  c.rope_local = c.rope;
  c.rope_local.freq_scale = 1.0f;
  c.rope_local.freq_base = gemma2 ? c.rope.freq_base : 10000.0f;
  auto base_swa = optional_float(f, p + "rope.freq_base_swa", c.rope_local.freq_base);
  if (!base_swa.ok()) return base_swa.error();
  if (!(*base_swa > 0.0f))
    return bad(p + "rope.freq_base_swa", num(static_cast<double>(*base_swa)) + " is not positive");
  c.rope_local.freq_base = *base_swa;
  // Gemma 2 caps scores and logits (llama.cpp's defaults 50 and 30 where the keys are absent).
  // Gemma 3 caps no score; llama.cpp's graph caps its logits only when no layer is local.
  if (gemma2 || window == 0) {
    for (auto [key, dst, fallback] : {std::tuple{"attn_logit_softcapping", &c.attn_softcap, 50.0f},
                                      std::tuple{"final_logit_softcapping", &c.final_softcap, 30.0f}}) {
      auto cap = optional_float(f, p + key, fallback);
      if (!cap.ok()) return cap.error();
      if (!(*cap >= 0.0f)) return bad(p + key, num(static_cast<double>(*cap)) + " is negative");
      *dst = *cap;
    }
    if (!gemma2) c.attn_softcap = 0.0f;
  }
  const bool is_27b = c.n_layer == (gemma2 ? 46 : 62);
  c.query_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c.n_embd / c.n_head : c.head_dim));
  return {};
}

Result<bool> optional_bool(const gguf::GgufFile& f, const std::string& key, bool fallback) {
  if (!f.find(key)) return fallback;
  return f.get_bool(key);
}

// The mixture-of-experts keys (ModelConfig's comment lists them), read as llama.cpp reads them
// and checked so that routing cannot go out of bounds: n_used <= n_expert, groups that divide
// the experts, a dense prefix shorter than the model.
Status read_moe(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  auto count = required_count(f, p + "expert_count", k_max_experts);
  if (!count.ok()) return count.error();
  c.n_expert = *count;
  auto used = required_count(f, p + "expert_used_count", c.n_expert);
  if (!used.ok()) return used.error();
  c.n_expert_used = *used;
  if (!f.find(p + "expert_feed_forward_length") && c.n_ff == 0) {
    return bad(p + "expert_feed_forward_length", "is missing, and so is feed_forward_length to derive it from");
  }
  // llama.cpp's fallback without the key: the dense width shared among the experts a token uses.
  auto ff_exp =
      optional_count(f, p + "expert_feed_forward_length", k_max_ffn, std::max<int64_t>(1, c.n_ff / c.n_expert_used));
  if (!ff_exp.ok()) return ff_exp.error();
  c.n_ff_exp = *ff_exp;
  if (f.find(p + "leading_dense_block_count")) {
    auto v = f.get_uint(p + "leading_dense_block_count");  // 0 is allowed: no dense layer
    if (!v.ok()) return v.error();
    if (*v >= static_cast<uint64_t>(c.n_layer)) {
      return bad(p + "leading_dense_block_count",
                 std::to_string(*v) + " leaves no expert layer of the " + std::to_string(c.n_layer));
    }
    c.n_dense_lead = static_cast<int64_t>(*v);
  }
  if (c.n_dense_lead > 0 && c.n_ff == 0) {
    return bad(p + "feed_forward_length", "is missing: the dense layers before the experts need it");
  }
  if (f.find(p + "expert_shared_count")) {
    auto v = f.get_uint(p + "expert_shared_count");
    if (!v.ok()) return v.error();
    if (*v > static_cast<uint64_t>(k_max_experts)) return bad(p + "expert_shared_count", "is implausibly large");
    c.n_expert_shared = static_cast<int64_t>(*v);
  }
  // Shared experts where the file has their tensors: one FFN of the shared width.
  if (f.find_tensor("blk." + std::to_string(c.n_dense_lead) + ".ffn_up_shexp.weight")) {
    auto w = optional_count(f, p + "expert_shared_feed_forward_length", k_max_ffn,
                            c.n_ff_exp * std::max<int64_t>(1, c.n_expert_shared));
    if (!w.ok()) return w.error();
    c.n_ff_shexp = *w;
  }
  kernels::MoeRouting& r = c.routing;
  r.n_expert = static_cast<int>(c.n_expert);
  r.n_used = static_cast<int>(c.n_expert_used);
  r.gating = kernels::MoeGating::softmax;
  if (f.find(p + "expert_gating_func")) {
    auto g = f.get_uint(p + "expert_gating_func");
    if (!g.ok()) return g.error();
    switch (*g) {
      case 0: break;  // "none": the architecture's own, as llama.cpp reads older files
      case 1: r.gating = kernels::MoeGating::softmax; break;
      case 2: r.gating = kernels::MoeGating::sigmoid; break;
      case 3: r.gating = kernels::MoeGating::softmax_weight; break;
      case 4:
        return make_error(ErrorCode::unsupported, "metadata " + p +
                                                      "expert_gating_func: 4 (sqrt of softplus) is not supported yet "
                                                      "(supported: 1 softmax, 2 sigmoid, 3 softmax over the chosen)");
      default:
        return bad(p + "expert_gating_func", std::to_string(*g) +
                                                 " is not a known gating function (1 softmax, 2 sigmoid, 3 softmax "
                                                 "over the chosen experts)");
    }
  }
  auto groups = optional_count(f, p + "expert_group_count", k_max_experts, 1);
  if (!groups.ok()) return groups.error();
  if (*groups > 1) {
    if (c.n_expert % *groups != 0 || c.n_expert / *groups < 2) {
      return bad(p + "expert_group_count", std::to_string(*groups) + " does not split the " +
                                               std::to_string(c.n_expert) +
                                               " experts into equal groups of two or more");
    }
    auto groups_used = required_count(f, p + "expert_group_used_count", *groups - 1);
    if (!groups_used.ok()) return groups_used.error();
    if (*groups_used * (c.n_expert / *groups) < c.n_expert_used) {
      return bad(p + "expert_group_used_count", std::to_string(*groups_used) + " groups hold fewer experts than the " +
                                                    std::to_string(c.n_expert_used) + " each token uses");
    }
    r.n_group = static_cast<int>(*groups);
    r.n_group_used = static_cast<int>(*groups_used);
  }
  auto norm = optional_bool(f, p + "expert_weights_norm", c.arch == "qwen3moe");
  if (!norm.ok()) return norm.error();
  r.norm_weights = *norm;
  auto scale = optional_float(f, p + "expert_weights_scale", 0.0f);
  if (!scale.ok()) return scale.error();
  if (!(*scale >= 0.0f && *scale < 1e6f)) {
    return bad(p + "expert_weights_scale", num(static_cast<double>(*scale)) + " must lie in [0, 1e6)");
  }
  r.weights_scale = *scale;
  c.fused_gate_up_exps = f.find_tensor("blk." + std::to_string(c.n_dense_lead) + ".ffn_gate_up_exps.weight") != nullptr;
  return {};
}

// YaRN (rope.scaling.type "yarn"), as llama.cpp applies it with its defaults (ext_factor 1, beta_fast
// 32, beta_slow 1; it reads no yarn_* key for gpt-oss): positions scaled by 1 / factor in the
// low-frequency pairs only, between the pairs whose wavelength fits beta_fast and beta_slow
// turns in the original context, and cos and sin scaled by 1 + 0.1 ln(factor) (times
// rope.scaling.attn_factor). The pair bounds are ggml's, computed in float as there.
void yarn_bounds(kernels::RopeParams& r, int64_t n_ctx_orig) {
  constexpr float k_beta_fast = 32.0f, k_beta_slow = 1.0f, k_pi = 3.14159265358979323846f;
  const auto n_dims = static_cast<float>(r.n_rot);
  auto corr_dim = [&](float n_turns) {
    return n_dims * std::log(static_cast<float>(n_ctx_orig) / (n_turns * 2.0f * k_pi)) / (2.0f * std::log(r.freq_base));
  };
  r.yarn_low = std::max(0.0f, std::floor(corr_dim(k_beta_fast)));
  r.yarn_high = std::min(n_dims - 1.0f, std::ceil(corr_dim(k_beta_slow)));
}
void set_yarn(kernels::RopeParams& r, int64_t n_ctx_orig, float factor) {
  r.yarn = true;
  r.freq_scale = 1.0f / factor;
  yarn_bounds(r, n_ctx_orig);
  if (factor > 1.0f) r.attn_factor *= 1.0f + 0.1f * std::log(factor);
}

// gpt-oss's keys (ModelConfig::gpt_oss), read as llama.cpp reads them: attention.sliding_window
// (required), attention.sliding_window_pattern (the period, default 2: layer l is local when
// l % period < period - 1), rope.freq_base_swa (the local layers' base, default the global one).
// Its router is a softmax over the chosen experts whatever expert_gating_func says, as there.
Status read_gpt_oss(const gguf::GgufFile& f, const std::string& p, ModelConfig& c) {
  c.gpt_oss = true;
  auto window = required_count(f, p + "attention.sliding_window", k_max_context);
  if (!window.ok()) return window.error();
  c.local_window = *window;
  c.swa_period = 2;
  if (f.find(p + "attention.sliding_window_pattern")) {
    auto period = f.get_uint(p + "attention.sliding_window_pattern");
    if (!period.ok()) {
      return make_error(ErrorCode::unsupported, "metadata " + p +
                                                    "attention.sliding_window_pattern: kvchat reads it as one "
                                                    "period (an integer), not a per-layer list");
    }
    if (*period == 0 || *period > static_cast<uint64_t>(k_max_layers)) {
      return bad(p + "attention.sliding_window_pattern", std::to_string(*period) + " is not a plausible period");
    }
    c.swa_period = static_cast<int>(*period);
  }
  c.rope_local = c.rope;
  auto base_swa = optional_float(f, p + "rope.freq_base_swa", c.rope.freq_base);
  if (!base_swa.ok()) return base_swa.error();
  if (!(*base_swa > 0.0f))
    return bad(p + "rope.freq_base_swa", num(static_cast<double>(*base_swa)) + " is not positive");
  c.rope_local.freq_base = *base_swa;
  if (c.rope_local.yarn) yarn_bounds(c.rope_local, c.n_ctx_orig);  // they depend on the base
  c.routing.gating = kernels::MoeGating::softmax_weight;
  return {};
}

}  // namespace

Result<ModelConfig> ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch.ok()) return arch.error();
  c.arch = *arch;
  const ArchTraits* traits = nullptr;
  for (const auto& a : k_archs) {
    if (c.arch == a.name) traits = &a;
  }
  if (!traits) {
    return make_error(ErrorCode::unsupported,
                      "metadata general.architecture: '" + gguf::printable(c.arch) +
                          "' is not supported yet (supported: llama, mistral, qwen2, qwen3, "
                          "qwen3moe, gpt-oss, deepseek2, phi3, smollm3, gemma2, gemma3, gemma4, lfm2)");
  }
  if (f.find("general.name")) {
    if (auto n = f.get_string("general.name"); n.ok()) c.name = *n;
  }
  const std::string p = c.arch + ".";

  auto embd = required_count(f, p + "embedding_length", k_max_width);
  if (!embd.ok()) return embd.error();
  c.n_embd = *embd;
  auto layers = required_count(f, p + "block_count", k_max_layers);
  if (!layers.ok()) return layers.error();
  c.n_layer = *layers;
  if (reads_mtp_blocks(c.arch)) KVC_TRY(read_nextn(f, p, c));
  auto heads = required_count(f, p + "attention.head_count", k_max_heads);
  if (!heads.ok()) return heads.error();
  c.n_head = *heads;
  // gemma4 may give head_count_kv and feed_forward_length per layer (arrays): read_gemma4 reads them.
  auto per_layer = [&](const std::string& key) {
    const gguf::Value* v = c.arch == "gemma4" ? f.find(key) : nullptr;
    return v != nullptr && v->as<gguf::Array>() != nullptr;
  };
  if (c.arch == "lfm2") {  // head_count_kv per layer, 0 marking the conv layers
    KVC_TRY(read_lfm2(f, c));
  } else {
    auto heads_kv = per_layer(p + "attention.head_count_kv")
                        ? Result<int64_t>(c.n_head)
                        : optional_count(f, p + "attention.head_count_kv", k_max_heads, c.n_head);
    if (!heads_kv.ok()) return heads_kv.error();
    c.n_head_kv = *heads_kv;
  }
  // An MoE model without dense layers has no use for feed_forward_length (read_moe checks).
  auto ff = per_layer(p + "feed_forward_length") ? Result<int64_t>(int64_t{1})
            : traits->moe                        ? optional_count(f, p + "feed_forward_length", k_max_ffn, 0)
                                                 : required_count(f, p + "feed_forward_length", k_max_ffn);
  if (!ff.ok()) return ff.error();
  c.n_ff = *ff;
  auto ctx = optional_count(f, p + "context_length", k_max_context, 2048);
  if (!ctx.ok()) return ctx.error();
  c.n_ctx_train = *ctx;
  // Qwen2 GGUFs may carry a window that their models do not use (use_sliding_window is off
  // in every released Qwen2); llama.cpp ignores Phi-3's too (its converters wrote windows that
  // do not match the models), so both run with full attention, as there.
  if (traits->window && f.find(p + "attention.sliding_window")) {
    auto window = f.get_uint(p + "attention.sliding_window");  // 0 is allowed: no window
    if (!window.ok()) return window.error();
    if (*window > static_cast<uint64_t>(k_max_context)) {
      return bad(p + "attention.sliding_window",
                 std::to_string(*window) + " is not a plausible size (at most " + std::to_string(k_max_context) + ")");
    }
    c.sliding_window = static_cast<int64_t>(*window);
  }
  // The head size: attention.key_length where the file sets it (Qwen 3's differs from
  // width / heads), else width / heads, which must then divide evenly.
  if (!f.find(p + "attention.key_length") && c.n_embd % c.n_head != 0) {
    return bad(p + "attention.head_count", std::to_string(c.n_head) + " does not divide " + p + "embedding_length " +
                                               std::to_string(c.n_embd) + ", so the head size is not a whole number");
  }
  auto hd = optional_count(f, p + "attention.key_length", k_max_head_dim, c.n_embd / c.n_head);
  if (!hd.ok()) return hd.error();
  c.head_dim = *hd;
  if (f.find(p + "attention.value_length")) {
    auto vl = required_count(f, p + "attention.value_length", k_max_head_dim);
    if (!vl.ok()) return vl.error();
    if (*vl != c.head_dim && c.arch != "deepseek2") {  // MLA: read_deepseek2 checks it
      return make_error(ErrorCode::unsupported, "metadata " + p + "attention.value_length " + std::to_string(*vl) +
                                                    " differs from key_length " + std::to_string(c.head_dim) +
                                                    "; kvchat needs K and V heads of one size");
    }
  }
  if (c.n_head % c.n_head_kv != 0) {
    return bad(p + "attention.head_count_kv", std::to_string(c.n_head_kv) + " does not divide " + p +
                                                  "attention.head_count " + std::to_string(c.n_head) +
                                                  " (each KV head serves a whole group of query heads)");
  }
  auto eps = optional_float(f, p + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (!eps.ok()) return eps.error();
  c.rms_eps = *eps;
  if (!(c.rms_eps > 0.0f)) {
    return bad(p + "attention.layer_norm_rms_epsilon", num(static_cast<double>(c.rms_eps)) + " is not positive");
  }

  auto base = optional_float(f, p + "rope.freq_base", 10000.0f);
  if (!base.ok()) return base.error();
  if (!(*base > 0.0f)) return bad(p + "rope.freq_base", num(static_cast<double>(*base)) + " is not positive");
  auto n_rot = optional_count(f, p + "rope.dimension_count", k_max_head_dim, c.head_dim);
  if (!n_rot.ok()) return n_rot.error();
  if (*n_rot > c.head_dim || *n_rot % 2 != 0) {
    return bad(p + "rope.dimension_count",
               std::to_string(*n_rot) + " must be even and at most the head size " + std::to_string(c.head_dim));
  }
  c.rope.n_rot = static_cast<int>(*n_rot);
  c.rope.freq_base = *base;
  c.rope.interleaved = traits->interleaved_rope;
  c.qkv_bias = traits->qkv_bias;
  c.qk_norm = traits->qk_norm;
  c.no_rope_every = traits->no_rope_every;
  auto attn_factor = optional_float(f, p + "rope.scaling.attn_factor", 1.0f);
  if (!attn_factor.ok()) return attn_factor.error();
  if (!(*attn_factor > 0.0f && *attn_factor < 100.0f)) {
    return make_error(ErrorCode::invalid_file, "metadata " + p + "rope.scaling.attn_factor must lie in (0, 100)");
  }
  c.rope.attn_factor = *attn_factor;
  auto orig = optional_count(f, p + "rope.scaling.original_context_length", k_max_context, c.n_ctx_train);
  if (!orig.ok()) return orig.error();
  c.n_ctx_orig = *orig;

  std::string scaling = "none";
  if (f.find(p + "rope.scaling.type")) {
    auto s = f.get_string(p + "rope.scaling.type");
    if (!s.ok()) return s.error();
    scaling = *s;
  }
  if (scaling == "linear") {
    auto factor = optional_float(f, p + "rope.scaling.factor", 1.0f);
    if (!factor.ok()) return factor.error();
    if (!(*factor >= 1.0f)) return bad(p + "rope.scaling.factor", num(static_cast<double>(*factor)) + " is below 1");
    c.rope.freq_scale = 1.0f / *factor;
  } else if (scaling == "yarn" && (c.arch == "gpt-oss" || c.arch == "deepseek2")) {
    auto factor = optional_float(f, p + "rope.scaling.factor", 1.0f);
    if (!factor.ok()) return factor.error();
    if (!(*factor >= 1.0f && *factor < 1e6f)) {
      return bad(p + "rope.scaling.factor", num(static_cast<double>(*factor)) + " must lie in [1, 1e6)");
    }
    set_yarn(c.rope, c.n_ctx_orig, *factor);
  } else if (scaling != "none") {
    return make_error(ErrorCode::unsupported,
                      "metadata " + p + "rope.scaling.type: '" + scaling +
                          "' is not supported yet (supported: none, linear; yarn for gpt-oss and deepseek2)");
  }

  if (traits->swa_period > 0) KVC_TRY(read_gemma(f, p, traits->swa_period, c));
  if (traits->moe) KVC_TRY(read_moe(f, p, c));
  if (c.arch == "gpt-oss") KVC_TRY(read_gpt_oss(f, p, c));
  if (c.arch == "deepseek2") KVC_TRY(read_deepseek2(f, c));
  if (c.arch == "gemma4") KVC_TRY(read_gemma4(f, c));
  KVC_TRY(read_kv_sharing(f, c));

  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  // Phi-3 files fuse Q, K, V into attn_qkv, and gate and up into ffn_up (which then has 2 n_ff rows).
  c.fused_qkv = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  c.fused_gate_up = c.arch == "phi3" && f.find_tensor("blk.0.ffn_gate.weight") == nullptr;
  auto vocab = f.get_string_array("tokenizer.ggml.tokens");
  if (!vocab.ok()) return vocab.error();
  c.n_vocab = static_cast<int64_t>(vocab->size());
  if (f.find(p + "vocab_size")) {
    auto n = f.get_uint(p + "vocab_size");
    if (!n.ok()) return n.error();
    if (*n != static_cast<uint64_t>(c.n_vocab)) {
      return bad(p + "vocab_size", std::to_string(*n) + " disagrees with tokenizer.ggml.tokens, which has " +
                                       std::to_string(c.n_vocab) + " tokens");
    }
  }
  // deepseek2 files whose converter wrote no gating function (or "none"): llama.cpp takes
  // GLM-4.7-Flash's shape (47 or 48 layers, 154880 tokens) for sigmoid routing and the rest for
  // DeepSeek-V2's softmax. Matched here so such a file routes as it does there.
  if (c.arch == "deepseek2" && (c.n_layer == 47 || c.n_layer == 48) && c.n_vocab == 154880) {
    const std::string key = p + "expert_gating_func";
    auto g = f.get_uint(key);  // read (and checked) by read_moe when present
    if (!f.find(key) || (g.ok() && *g == 0)) c.routing.gating = kernels::MoeGating::sigmoid;
  }
  return c;
}

Result<kernels::KvBlockLayout> ModelConfig::kv_layout(int block_tokens, kv::KvFormat k_format,
                                                      kv::KvFormat v_format) const {
  const bool quantized = k_format != kv::KvFormat::f16 || v_format != kv::KvFormat::f16;
  if (quantized && head_dim_local > 0 && kv::kv_group_for_head_dim(head_dim_local) == 0) {
    return make_error(ErrorCode::unsupported, "KV format " + std::string(kv::kv_format_name(k_format)) +
                                                  " needs a head size that is a multiple of 8; this model's local "
                                                  "layers' head size is " +
                                                  std::to_string(head_dim_local) + ". Use --kv-type f16");
  }
  if (quantized && kv::kv_group_for_head_dim(head_dim) == 0) {
    return make_error(ErrorCode::unsupported,
                      "KV format " + std::string(kv::kv_format_name(k_format)) + "/" +
                          std::string(kv::kv_format_name(v_format)) + " needs a head size that is a multiple of 8 " +
                          "(it scales groups of 32, 16 or 8 elements of one head); this model's head size is " +
                          std::to_string(head_dim) + ". F16 KV works for any head size (--kv-type f16)");
  }
  if (block_tokens <= 0) {
    return make_error(ErrorCode::invalid_argument,
                      "the KV block size must be positive, got " + std::to_string(block_tokens));
  }
  if (mla) {  // one latent row a token and layer, no V (kernels::make_latent_block_layout)
    auto latent = kernels::make_latent_block_layout(static_cast<int>(n_layer_kv()), static_cast<int>(head_dim),
                                                    block_tokens, k_format);
    if (!latent) {
      return make_error(ErrorCode::unsupported, "KV format " + std::string(kv::kv_format_name(k_format)) +
                                                    " cannot hold a latent (MLA) cache yet; use --kv-type f16 or int8");
    }
    return *latent;
  }
  // gemma4: the storing layers' head size where they all have one (else the larger, global one;
  // each KV group's layout has its own, kv_group_layout).
  int64_t hd = layer_head_dim(0);
  for (int64_t l = 1; l < n_layer_kv(); ++l) hd = layer_head_dim(l) == hd ? hd : head_dim;
  auto layout = kernels::make_kv_block_layout(static_cast<int>(n_layer_kv()), static_cast<int>(n_head_kv),
                                              static_cast<int>(hd), block_tokens, k_format, v_format);
  if (!layout) {
    return make_error(ErrorCode::invalid_argument, "cannot lay out the KV cache for " + std::to_string(n_layer) +
                                                       " layers, " + std::to_string(n_head_kv) + " KV heads of size " +
                                                       std::to_string(head_dim));
  }
  return *layout;
}

Result<kernels::KvBlockLayout> ModelConfig::kv_group_layout(int g, int block_tokens, kv::KvFormat k_format,
                                                            kv::KvFormat v_format) const {
  auto whole = kv_layout(block_tokens, k_format, v_format);
  const KvGroupMap map = kv_group_map();
  KVC_ASSERT(g >= 0 && g < map.n_storing());
  if (!whole.ok() || map.groups.size() == 1) return whole;
  if (kernels::kv_k_per_channel(k_format)) {
    return make_error(ErrorCode::unsupported,
                      "int4c K holds its partly filled last block in F16 beside the cache, which a model with "
                      "local-attention layers (a second KV group) or shared-KV layers does not support yet; use "
                      "--kv-type int4h");
  }
  if (map.n_storing() == 1) return whole;
  if (map.groups[static_cast<size_t>(g)].kind == kv::KvGroupKind::recurrent) {  // F32 state snapshots
    auto state = kernels::make_state_block_layout(map.groups[static_cast<size_t>(g)].n_layer, recurrent_state_floats(),
                                                  block_tokens);
    if (!state)
      return make_error(ErrorCode::invalid_argument,
                        "cannot lay out the recurrent state of KV group " + std::to_string(g));
    return *state;
  }
  int64_t group_head_dim = whole->head_dim;  // gemma4: local and global layers' heads differ
  for (int64_t l = 0; l < n_layer_kv(); ++l) {
    if (map.layer_group[static_cast<size_t>(l)] == g) group_head_dim = layer_head_dim(l);
  }
  auto layout = kernels::make_kv_block_layout(map.groups[static_cast<size_t>(g)].n_layer, whole->n_kv_head,
                                              static_cast<int>(group_head_dim), block_tokens, k_format, v_format);
  if (!layout) return make_error(ErrorCode::invalid_argument, "cannot lay out KV group " + std::to_string(g));
  return *layout;
}

}  // namespace kvc::model

// gemma4: its metadata keys as llama.cpp reads them, the tensors a file must have, and loading them.
#include "core/model/model_gemma4.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>
#include <variant>

#include "core/gguf/gguf_file.h"

namespace kvc::model {

namespace {

constexpr int64_t k_max_size = int64_t{1} << 22;  // any width, head size or window far above a real one

Error bad(const std::string& key, const std::string& what) {
  return make_error(ErrorCode::invalid_file, "metadata " + key + ": " + what);
}

Result<int64_t> size_key(const gguf::GgufFile& f, const std::string& key, bool required, int64_t fallback) {
  if (!f.find(key)) {
    if (required) return bad(key, "is missing (llama.cpp requires it for gemma4)");
    return fallback;
  }
  auto v = f.get_uint(key);
  if (!v.ok()) return v.error();
  if (*v > static_cast<uint64_t>(k_max_size)) return bad(key, std::to_string(*v) + " is not a plausible size");
  return static_cast<int64_t>(*v);
}

// A per-layer integer or boolean array of exactly n_layer elements.
Result<std::vector<int64_t>> layer_array(const gguf::GgufFile& f, const std::string& key, int64_t n_layer) {
  const gguf::Value* v = f.find(key);
  const gguf::Array* a = v ? v->as<gguf::Array>() : nullptr;
  if (a == nullptr) return bad(key, "must be a list of one value per layer");
  std::vector<int64_t> out;
  bool numeric = true;
  std::visit(
      [&](const auto& elems) {
        using T = typename std::decay_t<decltype(elems)>::value_type;
        if constexpr (std::is_same_v<T, bool>) {
          for (bool b : elems) out.push_back(b ? 1 : 0);
        } else if constexpr (std::is_integral_v<T>) {
          for (T x : elems) out.push_back(static_cast<int64_t>(x));
        } else {
          numeric = false;
        }
      },
      a->elements());
  if (!numeric) return bad(key, "must be a list of integers or booleans");
  if (static_cast<int64_t>(out.size()) != n_layer) {
    return bad(key, "has " + std::to_string(out.size()) + " values for " + std::to_string(n_layer) + " layers");
  }
  return out;
}

}  // namespace

// As llama.cpp's gemma4 reads them: attention.sliding_window_pattern (one flag a layer: local),
// attention.sliding_window (required), key_length / value_length (the global layers' heads) and
// key_length_swa / value_length_swa (the local ones', required), rope.dimension_count_swa and
// rope.freq_base_swa (default 10000, never scaled), head_count_kv and feed_forward_length as one
// value or one a layer, embedding_length_per_layer_input (required; 0: none),
// attention.shared_kv_layers (the last N layers read the K/V of layer n_kv - 2 when local, n_kv - 1
// when global), final_logit_softcapping (default 30); scores are not scaled (f_attention_scale 1).
Status read_gemma4(const gguf::GgufFile& f, ModelConfig& c) {
  const std::string p = "gemma4.";
  c.gemma = true;  // scaled embeddings, post norms, GeGLU, tied output where output.weight is absent
  c.gemma4 = true;
  if (f.find(p + "expert_count")) {
    return make_error(ErrorCode::unsupported,
                      "metadata " + p +
                          "expert_count: the gemma4 mixture-of-experts variant (26B-A4B) is not "
                          "supported yet; the dense gemma4 models (E2B, E4B, 31B) are");
  }
  auto pattern = layer_array(f, p + "attention.sliding_window_pattern", c.n_layer);
  if (!pattern.ok()) return pattern.error();
  c.local_layers.clear();
  for (int64_t x : *pattern) c.local_layers.push_back(x != 0 ? 1 : 0);
  auto window = size_key(f, p + "attention.sliding_window", true, 0);
  if (!window.ok()) return window.error();
  if (*window == 0) return bad(p + "attention.sliding_window", "0 is not a window");
  c.local_window = *window;
  c.swa_period = 0;

  auto k_swa = size_key(f, p + "attention.key_length_swa", true, 0);
  if (!k_swa.ok()) return k_swa.error();
  auto v_swa = size_key(f, p + "attention.value_length_swa", true, 0);
  if (!v_swa.ok()) return v_swa.error();
  if (*k_swa == 0 || *k_swa % 2 != 0) return bad(p + "attention.key_length_swa", "must be even and positive");
  if (*v_swa != *k_swa) {
    return make_error(ErrorCode::unsupported, "metadata " + p + "attention.value_length_swa " + std::to_string(*v_swa) +
                                                  " differs from key_length_swa " + std::to_string(*k_swa) +
                                                  " (gemma4 needs K and V heads of one size, as llama.cpp)");
  }
  c.head_dim_local = *k_swa;

  // The local layers' rope: their own rotated dimensions and base, no scaling, no rope_freqs.
  c.rope_local = c.rope;
  c.rope_local.freq_scale = 1.0f;
  c.rope_local.freq_factors = nullptr;
  auto n_rot_swa = size_key(f, p + "rope.dimension_count_swa", false, c.rope.n_rot);
  if (!n_rot_swa.ok()) return n_rot_swa.error();
  if (*n_rot_swa > c.head_dim_local || *n_rot_swa % 2 != 0) {
    return bad(p + "rope.dimension_count_swa", std::to_string(*n_rot_swa) + " must be even and at most the local " +
                                                   "head size " + std::to_string(c.head_dim_local));
  }
  c.rope_local.n_rot = static_cast<int>(*n_rot_swa);
  if (f.find(p + "rope.freq_base_swa")) {
    auto b = f.get_float(p + "rope.freq_base_swa");
    if (!b.ok()) return b.error();
    if (!(std::isfinite(*b) && *b > 0)) return bad(p + "rope.freq_base_swa", "must be positive");
    c.rope_local.freq_base = static_cast<float>(*b);
  } else {
    c.rope_local.freq_base = 10000.0f;  // llama.cpp's default for rope_freq_base_train_swa
  }

  if (const gguf::Value* v = f.find(p + "attention.head_count_kv"); v && v->as<gguf::Array>()) {
    auto kv = layer_array(f, p + "attention.head_count_kv", c.n_layer);
    if (!kv.ok()) return kv.error();
    const int64_t first = kv->front();
    for (int64_t x : *kv) {
      if (x != first) {
        return make_error(ErrorCode::unsupported, "metadata " + p +
                                                      "attention.head_count_kv: KV heads that differ from layer to "
                                                      "layer are not supported yet");
      }
    }
    if (first <= 0 || c.n_head % first != 0) {
      return bad(p + "attention.head_count_kv",
                 std::to_string(first) + " does not divide the " + std::to_string(c.n_head) + " query heads");
    }
    c.n_head_kv = first;
  }
  if (const gguf::Value* v = f.find(p + "feed_forward_length"); v && v->as<gguf::Array>()) {
    auto ff = layer_array(f, p + "feed_forward_length", c.n_layer);
    if (!ff.ok()) return ff.error();
    c.layer_ff = *ff;
    for (int64_t x : c.layer_ff) {
      if (x <= 0 || x > k_max_size) return bad(p + "feed_forward_length", "a layer's width is not a plausible size");
    }
    c.n_ff = *std::max_element(c.layer_ff.begin(), c.layer_ff.end());
  }
  auto per_layer = size_key(f, p + "embedding_length_per_layer_input", true, 0);
  if (!per_layer.ok()) return per_layer.error();
  c.n_embd_per_layer = *per_layer;

  auto shared = size_key(f, p + "attention.shared_kv_layers", false, 0);
  if (!shared.ok()) return shared.error();
  if (*shared > 0) {
    if (*shared > c.n_layer - 2) {
      return bad(p + "attention.shared_kv_layers", std::to_string(*shared) + " leaves fewer than two of the " +
                                                       std::to_string(c.n_layer) +
                                                       " layers storing K/V (the shared ones read the last two)");
    }
    c.shared_kv_from_layer = c.n_layer - *shared;
    // llama.cpp's producer: layer n_kv - 2 for a local shared layer, n_kv - 1 for a global one.
    const int64_t n_kv = c.shared_kv_from_layer;
    for (int64_t l = n_kv; l < c.n_layer; ++l) {
      const int64_t src = n_kv - (c.layer_is_local(l) ? 2 : 1);
      if (c.layer_is_local(src) != c.layer_is_local(l)) {
        return make_error(ErrorCode::unsupported,
                          "metadata " + p + "attention.shared_kv_layers: layer " + std::to_string(l) + " is " +
                              (c.layer_is_local(l) ? "local" : "global") + " but reads layer " + std::to_string(src) +
                              ", which is not (gemma4's shared layers read the last local and the last global "
                              "storing layer)");
      }
    }
  }
  c.attn_softcap = 0.0f;
  c.final_softcap = 30.0f;  // llama.cpp's default where the key is absent
  if (f.find(p + "final_logit_softcapping")) {
    auto cap = f.get_float(p + "final_logit_softcapping");
    if (!cap.ok()) return cap.error();
    if (!(std::isfinite(*cap) && *cap >= 0)) return bad(p + "final_logit_softcapping", "must be 0 or positive");
    c.final_softcap = static_cast<float>(*cap);
  }
  c.query_scale = 1.0f;
  return {};
}

void expected_gemma4_tensors(const ModelConfig& c, std::vector<ExpectedTensor>& out) {
  auto matrix = [&](std::string name, int64_t rows, int64_t cols, bool optional = false) {
    out.push_back({std::move(name), rows, cols, true, optional});
  };
  auto vector = [&](std::string name, int64_t n, bool optional = false) {
    out.push_back({std::move(name), 1, n, false, optional});
  };
  const int64_t npl = c.n_embd_per_layer;
  matrix("token_embd.weight", c.n_vocab, c.n_embd);
  vector("rope_freqs.weight", c.rope.n_rot / 2, true);  // the global layers' proportional rope
  if (npl > 0) {
    matrix("per_layer_token_embd.weight", c.n_vocab, npl * c.n_layer);
    matrix("per_layer_model_proj.weight", npl * c.n_layer, c.n_embd);
    vector("per_layer_proj_norm.weight", npl);
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const int64_t hd = c.layer_head_dim(l), ff = c.layer_n_ff(l);
    const bool stores = l < c.n_layer_kv();
    vector(b + "attn_norm.weight", c.n_embd);
    matrix(b + "attn_q.weight", c.layer_q_width(l), c.n_embd);
    matrix(b + "attn_k.weight", c.layer_kv_width(l), c.n_embd, !stores);
    matrix(b + "attn_v.weight", c.layer_kv_width(l), c.n_embd, true);  // absent: V is K's projection
    matrix(b + "attn_output.weight", c.n_embd, c.layer_q_width(l));
    vector(b + "attn_q_norm.weight", hd);
    vector(b + "attn_k_norm.weight", hd, !stores);
    vector(b + "post_attention_norm.weight", c.n_embd);
    vector(b + "layer_output_scale.weight", 1, true);
    vector(b + "ffn_norm.weight", c.n_embd);
    matrix(b + "ffn_gate.weight", ff, c.n_embd);
    matrix(b + "ffn_up.weight", ff, c.n_embd);
    matrix(b + "ffn_down.weight", c.n_embd, ff);
    vector(b + "post_ffw_norm.weight", c.n_embd);
    if (npl > 0) {
      matrix(b + "inp_gate.weight", npl, c.n_embd);
      matrix(b + "proj.weight", c.n_embd, npl);
      vector(b + "post_norm.weight", c.n_embd);
    }
  }
  vector("output_norm.weight", c.n_embd);
  if (!c.tied_embeddings) matrix("output.weight", c.n_vocab, c.n_embd);
}

Status load_gemma4_layer(Loader& ld, const ModelConfig& c, int64_t l, LayerWeights& w) {
  const std::string b = "blk." + std::to_string(l) + ".";
  auto matrix = [&](backend::Weight& dst, const std::string& name, int64_t rows, int64_t cols) -> Status {
    auto r = ld.matrix(b + name, rows, cols);
    if (!r.ok()) return r.error();
    dst = *r;
    return {};
  };
  auto vec = [&](const float*& dst, const std::string& name, int64_t n, bool optional = false) -> Status {
    auto r = ld.vector(b + name, n, optional);
    if (!r.ok()) return r.error();
    dst = *r;
    return {};
  };
  const int64_t hd = c.layer_head_dim(l), ff = c.layer_n_ff(l), kvw = c.layer_kv_width(l);
  KVC_TRY(vec(w.attn_norm, "attn_norm.weight", c.n_embd));
  KVC_TRY(matrix(w.wq, "attn_q.weight", c.layer_q_width(l), c.n_embd));
  // A shared layer's K/V weights (where the file has them) are views that its forward pass never
  // reads: it attends over the K/V its producer stored.
  if (ld.has(b + "attn_k.weight")) KVC_TRY(matrix(w.wk, "attn_k.weight", kvw, c.n_embd));
  if (ld.has(b + "attn_v.weight")) KVC_TRY(matrix(w.wv, "attn_v.weight", kvw, c.n_embd));
  if (l < c.n_layer_kv() && w.wk.view.n_rows == 0) {
    return make_error(ErrorCode::invalid_file, "tensor " + b + "attn_k.weight is missing");
  }
  KVC_TRY(matrix(w.wo, "attn_output.weight", c.n_embd, c.layer_q_width(l)));
  KVC_TRY(vec(w.q_norm, "attn_q_norm.weight", hd));
  KVC_TRY(vec(w.k_norm, "attn_k_norm.weight", hd, l >= c.n_layer_kv()));
  KVC_TRY(vec(w.attn_post_norm, "post_attention_norm.weight", c.n_embd));
  std::vector<float> scale;
  auto has_scale = ld.host_vector(b + "layer_output_scale.weight", 1, true, scale);
  if (!has_scale.ok()) return has_scale.error();
  w.out_scale = *has_scale ? scale[0] : 1.0f;
  if (!std::isfinite(w.out_scale)) {
    return make_error(ErrorCode::invalid_file, "tensor " + b + "layer_output_scale.weight is not finite");
  }
  KVC_TRY(vec(w.ffn_norm, "ffn_norm.weight", c.n_embd));
  KVC_TRY(matrix(w.w_gate, "ffn_gate.weight", ff, c.n_embd));
  KVC_TRY(matrix(w.w_up, "ffn_up.weight", ff, c.n_embd));
  KVC_TRY(matrix(w.w_down, "ffn_down.weight", c.n_embd, ff));
  KVC_TRY(vec(w.ffn_post_norm, "post_ffw_norm.weight", c.n_embd));
  if (c.n_embd_per_layer > 0) {
    KVC_TRY(matrix(w.per_layer_gate, "inp_gate.weight", c.n_embd_per_layer, c.n_embd));
    KVC_TRY(matrix(w.per_layer_proj, "proj.weight", c.n_embd, c.n_embd_per_layer));
    KVC_TRY(vec(w.per_layer_post_norm, "post_norm.weight", c.n_embd));
  }
  return {};
}

Status load_gemma4_globals(Loader& ld, const ModelConfig& c, ModelWeights& w) {
  if (c.n_embd_per_layer == 0) return {};
  const int64_t width = c.n_embd_per_layer * c.n_layer;
  auto table = ld.matrix("per_layer_token_embd.weight", c.n_vocab, width);
  if (!table.ok()) return table.error();
  w.per_layer_token_embd = *table;
  auto proj = ld.matrix("per_layer_model_proj.weight", width, c.n_embd);
  if (!proj.ok()) return proj.error();
  w.per_layer_model_proj = *proj;
  auto norm = ld.vector("per_layer_proj_norm.weight", c.n_embd_per_layer);
  if (!norm.ok()) return norm.error();
  w.per_layer_proj_norm = *norm;
  return {};
}

}  // namespace kvc::model

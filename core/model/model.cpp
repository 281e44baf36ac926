// Loading a llama-family GGUF model: config, tokenizer, chat template and weights.
#include "core/model/model.h"

#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/model/model_check.h"
#include "core/model/model_gemma4.h"
#include "core/model/weight_loader.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/util/assert.h"
#include "kernels/cpu/quant.h"

namespace kvc::model {

namespace {

// A mixture-of-experts layer's FFN (b: "blk.N."): router, experts, shared experts.
Status load_moe(Loader& ld, const ModelConfig& c, const std::string& b, kernels::MoeFfnWeights& m) {
  m.routing = c.routing;
  m.n_ff = c.n_ff_exp;
  if (c.gpt_oss) m.activation = kernels::MoeActivation::swiglu_oai;
  auto matrix = [&](kernels::MatrixView& dst, const std::string& name, int64_t rows, int64_t cols) -> Status {
    auto r = ld.matrix(b + name, rows, cols);
    if (!r.ok()) return r.error();
    dst = r->view;
    return {};
  };
  auto experts = [&](kernels::MatrixView& dst, const std::string& name, int64_t rows, int64_t cols) -> Status {
    auto r = ld.experts(b + name, rows, cols, c.n_expert);
    if (!r.ok()) return r.error();
    dst = r->view;
    return {};
  };
  auto floats = [&](const float*& dst, const std::string& name, int64_t n, int64_t n_mats) -> Status {
    auto r = ld.vector(b + name, n, true, n_mats);
    if (!r.ok()) return r.error();
    dst = *r;
    return {};
  };
  KVC_TRY(matrix(m.router, "ffn_gate_inp.weight", c.n_expert, c.n_embd));
  KVC_TRY(floats(m.router_bias, "ffn_gate_inp.bias", c.n_expert, 0));
  KVC_TRY(floats(m.selection_bias, "exp_probs_b.bias", c.n_expert, 0));
  if (c.fused_gate_up_exps) {
    KVC_TRY(experts(m.gate, "ffn_gate_up_exps.weight", 2 * c.n_ff_exp, c.n_embd));
    KVC_TRY(floats(m.gate_bias, "ffn_gate_up_exps.bias", 2 * c.n_ff_exp, c.n_expert));
    m.up = {m.gate.type, nullptr, 0, c.n_embd};
  } else {
    KVC_TRY(experts(m.gate, "ffn_gate_exps.weight", c.n_ff_exp, c.n_embd));
    KVC_TRY(experts(m.up, "ffn_up_exps.weight", c.n_ff_exp, c.n_embd));
    KVC_TRY(floats(m.gate_bias, "ffn_gate_exps.bias", c.n_ff_exp, c.n_expert));
    KVC_TRY(floats(m.up_bias, "ffn_up_exps.bias", c.n_ff_exp, c.n_expert));
  }
  KVC_TRY(experts(m.down, "ffn_down_exps.weight", c.n_embd, c.n_ff_exp));
  KVC_TRY(floats(m.down_bias, "ffn_down_exps.bias", c.n_embd, c.n_expert));
  if (c.n_ff_shexp > 0) {
    KVC_TRY(matrix(m.shared_gate, "ffn_gate_shexp.weight", c.n_ff_shexp, c.n_embd));
    KVC_TRY(matrix(m.shared_up, "ffn_up_shexp.weight", c.n_ff_shexp, c.n_embd));
    KVC_TRY(matrix(m.shared_down, "ffn_down_shexp.weight", c.n_embd, c.n_ff_shexp));
    const float* gate_inp = nullptr;  // a vector in the file: a one-row F32 matrix here
    KVC_TRY(floats(gate_inp, "ffn_gate_inp_shexp.weight", c.n_embd, 0));
    if (gate_inp) m.shared_gate_inp = {kernels::DType::f32, gate_inp, 1, c.n_embd};
  }
  return {};
}

// An lfm2 layer l: its conv (in_proj, the taps, out_proj) or its attention (Q/K/V, their norms,
// attn_output), then its FFN; attn_norm is the input norm of either.
Status load_lfm2_layer(Loader& ld, const ModelConfig& c, int64_t l, LayerWeights& w) {
  const std::string b = "blk." + std::to_string(l) + ".";
  auto matrix = [&](backend::Weight& dst, const std::string& name, int64_t rows, int64_t cols) -> Status {
    auto r = ld.matrix(b + name, rows, cols);
    if (!r.ok()) return r.error();
    dst = *r;
    return {};
  };
  auto floats = [&](const float*& dst, const std::string& name, int64_t n) -> Status {
    auto r = ld.vector(b + name, n);
    if (!r.ok()) return r.error();
    dst = *r;
    return {};
  };
  KVC_TRY(floats(w.attn_norm, "attn_norm.weight", c.n_embd));
  if (c.layer_is_recurrent(l)) {
    KVC_TRY(matrix(w.conv_in, "shortconv.in_proj.weight", 3 * c.n_embd, c.n_embd));
    auto taps = ld.matrix_floats(b + "shortconv.conv.weight", c.n_embd, c.shortconv_l_cache);
    if (!taps.ok()) return taps.error();
    w.conv_kernel = *taps;
    KVC_TRY(matrix(w.conv_out, "shortconv.out_proj.weight", c.n_embd, c.n_embd));
  } else {
    KVC_TRY(matrix(w.wq, "attn_q.weight", c.q_width(), c.n_embd));
    KVC_TRY(matrix(w.wk, "attn_k.weight", c.kv_width(), c.n_embd));
    KVC_TRY(matrix(w.wv, "attn_v.weight", c.kv_width(), c.n_embd));
    KVC_TRY(matrix(w.wo, "attn_output.weight", c.n_embd, c.q_width()));
    KVC_TRY(floats(w.q_norm, "attn_q_norm.weight", c.head_dim));
    KVC_TRY(floats(w.k_norm, "attn_k_norm.weight", c.head_dim));
  }
  KVC_TRY(floats(w.ffn_norm, "ffn_norm.weight", c.n_embd));
  KVC_TRY(matrix(w.w_gate, "ffn_gate.weight", c.n_ff, c.n_embd));
  KVC_TRY(matrix(w.w_up, "ffn_up.weight", c.n_ff, c.n_embd));
  return matrix(w.w_down, "ffn_down.weight", c.n_embd, c.n_ff);
}

// deepseek2's attention (b: "blk.N."): Q (directly, or through the Q latent and its norm), the
// K/V latent with its norm, and the per-head k_b / v_b; attn_output is loaded with the others.
Status load_mla(Loader& ld, const ModelConfig& c, const std::string& b, LayerWeights& w) {
  auto matrix = [&](backend::Weight& dst, const std::string& name, int64_t rows, int64_t cols) -> Status {
    auto r = ld.matrix(b + name, rows, cols);
    if (!r.ok()) return r.error();
    dst = *r;
    return {};
  };
  auto vec = [&](const float*& dst, const std::string& name, int64_t n) -> Status {
    auto r = ld.vector(b + name, n);
    if (!r.ok()) return r.error();
    dst = *r;
    return {};
  };
  auto heads = [&](std::vector<backend::Weight>& dst, const std::string& name, int64_t rows, int64_t cols) -> Status {
    auto r = ld.stacked(b + name, rows, cols, c.n_head);
    if (!r.ok()) return r.error();
    dst = std::move(*r);
    return {};
  };
  const int64_t q_rows = c.n_head * c.mla_key_head;
  if (c.q_lora_rank > 0) {
    KVC_TRY(matrix(w.wq_a, "attn_q_a.weight", c.q_lora_rank, c.n_embd));
    KVC_TRY(vec(w.q_a_norm, "attn_q_a_norm.weight", c.q_lora_rank));
    KVC_TRY(matrix(w.wq_b, "attn_q_b.weight", q_rows, c.q_lora_rank));
  } else {
    KVC_TRY(matrix(w.wq, "attn_q.weight", q_rows, c.n_embd));
  }
  KVC_TRY(matrix(w.wkv_a, "attn_kv_a_mqa.weight", c.kv_lora_rank + c.rope.n_rot, c.n_embd));
  KVC_TRY(vec(w.kv_a_norm, "attn_kv_a_norm.weight", c.kv_lora_rank));
  KVC_TRY(heads(w.wk_b, "attn_k_b.weight", c.kv_lora_rank, c.mla_nope()));
  KVC_TRY(heads(w.wv_b, "attn_v_b.weight", c.mla_value_head, c.kv_lora_rank));
  return {};
}

// Touches every page of the tensor data so that the first token does not pay for page
// faults, reporting progress; asks the kernel to read ahead.
void prefault(const gguf::GgufFile& f, const LoadOptions& opt) {
  const std::span<const uint8_t> data = f.data_section();
  if (data.empty()) return;
  const uint8_t* base = data.data();
  const size_t total = data.size();
  const auto page = static_cast<size_t>(4096);
  const uintptr_t aligned = reinterpret_cast<uintptr_t>(base) & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(aligned), total + (reinterpret_cast<uintptr_t>(base) - aligned), MADV_WILLNEED);
  volatile uint8_t sink = 0;
  const size_t step = size_t{64} << 20;
  for (size_t done = 0; done < total;) {
    const size_t end = std::min(total, done + step);
    for (size_t i = done; i < end; i += page) sink = static_cast<uint8_t>(sink + base[i]);
    done = end;
    if (opt.progress) opt.progress(done, total);
  }
  (void)sink;
}

}  // namespace

Result<tokenizer::Vocabulary> vocabulary_from_gguf(const gguf::GgufFile& f) {
  tokenizer::Vocabulary v;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.error();
  v.model = *model;
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens.ok()) return tokens.error();
  v.tokens = std::move(*tokens);
  if (f.find("tokenizer.ggml.scores")) {
    auto scores = f.get_f32_array("tokenizer.ggml.scores");
    if (!scores.ok()) return scores.error();
    v.scores = std::move(*scores);
  } else {
    v.scores.assign(v.tokens.size(), 0.0f);
  }
  if (f.find("tokenizer.ggml.token_type")) {
    auto types = f.get_i32_array("tokenizer.ggml.token_type");
    if (!types.ok()) return types.error();
    v.types = std::move(*types);
  } else {
    v.types.assign(v.tokens.size(), 1);
  }
  auto id = [&](const char* key, int32_t fallback) -> Result<int32_t> {
    if (!f.find(key)) return fallback;
    auto r = f.get_uint(key);
    if (!r.ok()) return r.error();
    if (*r == 0xffffffffu) return -1;  // some converters write uint32 -1 for "none"
    if (*r >= v.tokens.size()) {
      return make_error(ErrorCode::invalid_file, std::string("metadata ") + key + ": token id " + std::to_string(*r) +
                                                     " is outside the vocabulary of " +
                                                     std::to_string(v.tokens.size()) + " tokens");
    }
    return static_cast<int32_t>(*r);
  };
  auto flag = [&](const char* key, bool fallback) -> Result<bool> {
    if (!f.find(key)) return fallback;
    return f.get_bool(key);
  };
  // Byte-level BPE: the pre-tokenizer's name and the merges; its defaults differ from
  // SentencePiece's (no space prefix, BOS only where the pre-tokenizer's family adds one).
  bool default_add_bos = true, default_add_space = true;
  if (v.model == "gpt2") {
    auto pre = f.get_string_or("tokenizer.ggml.pre", "default");
    if (!pre.ok()) return pre.error();
    v.pre = std::move(*pre);
    if (!f.find("tokenizer.ggml.merges")) {
      return make_error(ErrorCode::invalid_file,
                        "tokenizer.ggml.merges is missing: a byte-level BPE (gpt2) vocabulary needs its merges");
    }
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges.ok()) return merges.error();
    v.merges = std::move(*merges);
    auto pt = tokenizer::PreTokenizer::create(v.pre);
    if (!pt.ok()) return pt.error();
    default_add_bos = pt->default_add_bos();
    default_add_space = false;
  }
  auto bos = id("tokenizer.ggml.bos_token_id", -1);
  auto eos = id("tokenizer.ggml.eos_token_id", -1);
  auto eot = id("tokenizer.ggml.eot_token_id", -1);
  auto eom = id("tokenizer.ggml.eom_token_id", -1);
  auto unk = id("tokenizer.ggml.unknown_token_id", -1);
  auto pad = id("tokenizer.ggml.padding_token_id", -1);
  auto add_bos = flag("tokenizer.ggml.add_bos_token", default_add_bos);
  auto add_eos = flag("tokenizer.ggml.add_eos_token", false);
  auto add_space = flag("tokenizer.ggml.add_space_prefix", default_add_space);
  for (auto* r : {&bos, &eos, &eot, &eom, &unk, &pad}) {
    if (!r->ok()) return r->error();
  }
  for (auto* r : {&add_bos, &add_eos, &add_space}) {
    if (!r->ok()) return r->error();
  }
  v.bos_id = *bos;
  v.eos_id = *eos;
  v.eot_id = *eot;
  v.eom_id = *eom;
  v.unk_id = *unk;
  v.pad_id = *pad;
  v.add_bos = *add_bos;
  v.add_eos = *add_eos;
  v.add_space_prefix = *add_space;
  return v;
}

chat::TemplateTokens template_tokens(const tokenizer::Tokenizer& tok) {
  chat::TemplateTokens t;
  if (tok.bos() >= 0) t.bos = std::string(tok.piece(tok.bos()));
  if (tok.eos() >= 0) t.eos = std::string(tok.piece(tok.eos()));
  t.add_bos = tok.wants_bos() && tok.bos() >= 0;
  return t;
}

Result<chat::ChatTemplate> chat_template_from_gguf(const gguf::GgufFile& file, const tokenizer::Tokenizer& tok) {
  auto text = chat_template_text(file);  // refuses a template over the size cap, naming the key
  if (!text.ok()) return text.error();
  return chat::ChatTemplate::load(*text, template_tokens(tok));
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path, backend::Backend& be, const LoadOptions& opt) {
  auto file = gguf::GgufFile::open(path);
  if (!file.ok()) return file.error();
  return from_file(std::move(*file), path, be, opt);
}

Result<std::unique_ptr<Model>> Model::from_file(gguf::GgufFile file, const std::string& path, backend::Backend& be,
                                                const LoadOptions& opt) {
  // Everything is checked before anything is allocated or uploaded.
  auto checked = check_model_file(file);
  if (!checked.ok()) return make_error(checked.error().code, path + ": " + checked.error().message);
  std::unique_ptr<Model> m(new Model(std::move(file), std::move(checked->tokenizer), checked->chat_template));
  m->config_ = std::move(checked->config);
  m->backend_ = &be;
  m->path_ = path;

  prefault(m->file_, opt);
  {
    // Hash all tensor data (the file's data section) and the tokens.
    kv::BlockKey fp = kv::hash_bytes(m->file_.data_section());
    for (int32_t id = 0; id < m->tokenizer_.n_vocab(); ++id) {
      const auto p = m->tokenizer_.piece(id);
      fp = kv::hash_bytes({reinterpret_cast<const uint8_t*>(p.data()), p.size()}, fp);
    }
    m->weights_fingerprint_ = fp;
  }

  const ModelConfig& c = m->config_;
  Loader ld(m->file_, be, m->owned_);
  auto fail = [&](const Error& e) { return make_error(e.code, path + ": " + e.message); };

  if (c.mla && !be.has_moe_ops()) {  // the CPU backend: its per-head k_b / v_b are views of the mapped file
    return fail(make_error(ErrorCode::unsupported, "architecture " + c.arch +
                                                       " (multi-head latent attention and a mixture of experts) "
                                                       "is not supported by the " +
                                                       std::string(be.name()) + " backend yet; use --backend cpu"));
  }
  if (c.gemma4 && be.name().rfind("cpu", 0) != 0) {
    return fail(make_error(ErrorCode::unsupported,
                           "architecture gemma4 (per-layer embeddings, heads of two sizes, "
                           "shared KV layers) is not supported by the " +
                               std::string(be.name()) + " backend yet; use --backend cpu"));
  }
  if (c.is_moe() && !be.has_moe_ops()) {
    return fail(make_error(ErrorCode::unsupported, "architecture " + c.arch +
                                                       " (a mixture of experts: the expert router and the experts' "
                                                       "FFN) is not supported by the " +
                                                       std::string(be.name()) + " backend yet; use --backend cpu"));
  }
  if (c.lfm2 && !be.has_recurrent_ops()) {
    return fail(make_error(ErrorCode::unsupported, "architecture " + c.arch +
                                                       " (short-convolution layers with a recurrent state) is not "
                                                       "supported by the " +
                                                       std::string(be.name()) + " backend yet; use --backend cpu"));
  }
  if (c.gemma && !be.has_gemma_ops()) {
    return fail(make_error(ErrorCode::unsupported, "architecture " + c.arch + " (GeGLU, soft-capping) is not " +
                                                       "supported by the " + std::string(be.name()) +
                                                       " backend yet; use --backend cpu"));
  }
  auto embd = ld.matrix("token_embd.weight", c.n_vocab, c.n_embd);
  if (!embd.ok()) return fail(embd.error());
  m->weights_.token_embd = *embd;
  m->weights_.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& w = m->weights_.layers[static_cast<size_t>(l)];
    if (c.gemma4) {  // model_gemma4.cpp: heads and FFN widths of its own per layer
      if (Status st = load_gemma4_layer(ld, c, l, w); !st.ok()) return fail(st.error());
      continue;
    }
    const std::string b = "blk." + std::to_string(l) + ".";
    auto assign_m = [&](backend::Weight& dst, const char* name, int64_t rows, int64_t cols) -> Status {
      auto r = ld.matrix(b + name, rows, cols);
      if (!r.ok()) return r.error();
      dst = *r;
      return {};
    };
    auto assign_v = [&](const float*& dst, const char* name, int64_t n, bool optional) -> Status {
      auto r = ld.vector(b + name, n, optional);
      if (!r.ok()) return r.error();
      dst = *r;
      return {};
    };
    // Phi-3 fuses Q, K and V into attn_qkv (rows: Q, then K, then V) and gate and up into
    // ffn_up (rows: gate, then up); other files keep them apart.
    auto part = [&](backend::Weight& dst, const char* name, int64_t total, int64_t cols, int64_t begin,
                    int64_t rows) -> Status {
      auto r = ld.matrix_part(b + name, total, cols, begin, rows);
      if (!r.ok()) return r.error();
      dst = *r;
      return {};
    };
    if (c.lfm2) {  // model_config_lfm2.cpp: conv or attention, then a dense SwiGLU FFN
      if (Status st = load_lfm2_layer(ld, c, l, w); !st.ok()) return fail(st.error());
      continue;
    }
    const bool fused_qkv = c.fused_qkv, fused_up = c.fused_gate_up;
    const int64_t qkv_rows = c.q_width() + 2 * c.kv_width();
    for (const Status& s :
         {assign_v(w.attn_norm, "attn_norm.weight", c.n_embd, false),
          c.mla       ? load_mla(ld, c, b, w)
          : fused_qkv ? part(w.wq, "attn_qkv.weight", qkv_rows, c.n_embd, 0, c.q_width())
                      : assign_m(w.wq, "attn_q.weight", c.q_width(), c.n_embd),
          c.mla       ? Status{}
          : fused_qkv ? part(w.wk, "attn_qkv.weight", qkv_rows, c.n_embd, c.q_width(), c.kv_width())
                      : assign_m(w.wk, "attn_k.weight", c.kv_width(), c.n_embd),
          c.mla       ? Status{}
          : fused_qkv ? part(w.wv, "attn_qkv.weight", qkv_rows, c.n_embd, c.q_width() + c.kv_width(), c.kv_width())
                      : assign_m(w.wv, "attn_v.weight", c.kv_width(), c.n_embd),
          assign_m(w.wo, "attn_output.weight", c.n_embd, c.mla ? c.n_head * c.mla_value_head : c.q_width()),
          assign_v(w.bq, "attn_q.bias", c.q_width(), true), assign_v(w.bk, "attn_k.bias", c.kv_width(), true),
          assign_v(w.bv, "attn_v.bias", c.kv_width(), true), assign_v(w.bo, "attn_output.bias", c.n_embd, true),
          assign_v(w.attn_sinks, "attn_sinks.weight", c.n_head, !c.gpt_oss),
          assign_v(w.q_norm, "attn_q_norm.weight", c.head_dim, !c.qk_norm),
          assign_v(w.k_norm, "attn_k_norm.weight", c.head_dim, !c.qk_norm),
          c.gpt_oss ? Status{} : assign_v(w.attn_post_norm, "post_attention_norm.weight", c.n_embd, !c.gemma),
          assign_v(w.ffn_post_norm, "post_ffw_norm.weight", c.n_embd, !c.gemma),
          assign_v(w.ffn_norm, c.gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight", c.n_embd, false)}) {
      if (!s.ok()) return fail(s.error());
    }
    if (c.layer_is_moe(l)) {
      if (Status st = load_moe(ld, c, b, w.moe); !st.ok()) return fail(st.error());
    } else {
      for (const Status& s : {fused_up ? part(w.w_gate, "ffn_up.weight", 2 * c.n_ff, c.n_embd, 0, c.n_ff)
                                       : assign_m(w.w_gate, "ffn_gate.weight", c.n_ff, c.n_embd),
                              fused_up ? part(w.w_up, "ffn_up.weight", 2 * c.n_ff, c.n_embd, c.n_ff, c.n_ff)
                                       : assign_m(w.w_up, "ffn_up.weight", c.n_ff, c.n_embd),
                              assign_m(w.w_down, "ffn_down.weight", c.n_embd, c.n_ff)}) {
        if (!s.ok()) return fail(s.error());
      }
    }
    KVC_ASSERT(!c.qkv_bias || (w.bq && w.bk && w.bv));  // check_tensors requires them
  }
  // Rope frequency divisors, one per rotated pair: Llama 3's rope_freqs.weight, or Phi-3's
  // LongRoPE pair, whose long factors serve contexts past the original one (as llama.cpp picks).
  {
    m->config_.rope_long = opt.n_ctx > c.n_ctx_orig && ld.has("rope_factors_long.weight");
    std::vector<float> unused;
    auto found = ld.host_vector("rope_freqs.weight", c.rope.n_rot / 2, true, m->rope_factors_);
    if (!found.ok()) return fail(found.error());
    for (const auto& [name, chosen] :
         {std::pair{"rope_factors_long.weight", c.rope_long}, {"rope_factors_short.weight", !c.rope_long}}) {
      if (!ld.has(name)) continue;
      if (*found && chosen) {
        return fail(make_error(ErrorCode::invalid_file, std::string("tensor ") + name +
                                                            " and rope_freqs.weight: "
                                                            "a file has one kind of rope factors, not both"));
      }
      auto r = ld.host_vector(name, c.rope.n_rot / 2, false, chosen ? m->rope_factors_ : unused);
      if (!r.ok()) return fail(r.error());
      if (chosen) found = true;
    }
    if (*found) {
      for (float f : m->rope_factors_) {
        if (!(f > 0.0f) || !std::isfinite(f)) {
          return fail(make_error(ErrorCode::invalid_file,
                                 "rope factors (rope_freqs / rope_factors_*): every factor must be positive"));
        }
      }
      if (be.name().rfind("cuda", 0) == 0) {
        return fail(make_error(ErrorCode::unsupported,
                               "rope frequency factors (Llama 3's rope_freqs, Phi-3's LongRoPE) "
                               "are not supported by the CUDA backend yet; use --backend cpu"));
      }
      m->config_.rope.freq_factors = m->rope_factors_.data();
    }
    if (c.rope.attn_factor != 1.0f && be.name().rfind("cuda", 0) == 0) {
      return fail(make_error(ErrorCode::unsupported,
                             "rope.scaling.attn_factor is not supported by the CUDA backend "
                             "yet; use --backend cpu"));
    }
  }
  if (Status st = load_gemma4_globals(ld, c, m->weights_); c.gemma4 && !st.ok()) return fail(st.error());
  auto onorm = ld.vector(c.lfm2 ? "token_embd_norm.weight" : "output_norm.weight", c.n_embd);
  if (!onorm.ok()) return fail(onorm.error());
  m->weights_.output_norm = *onorm;
  if (c.tied_embeddings) {
    m->weights_.output = m->weights_.token_embd;
  } else {
    auto out = ld.matrix("output.weight", c.n_vocab, c.n_embd);
    if (!out.ok()) return fail(out.error());
    m->weights_.output = *out;
  }
  KVC_ASSERT(ld.first_unused(c) == nullptr);  // check_model_file refuses unread tensors
  m->weight_bytes_ = ld.bytes();
  m->expert_bytes_ = ld.expert_bytes();
  return m;
}

size_t Model::decode_read_bytes() const {
  // The routed experts: a token reads n_expert_used of every n_expert.
  const size_t unread_experts = expert_bytes_ - active_expert_bytes(expert_bytes_, config_);
  if (config_.tied_embeddings) return weight_bytes_ - unread_experts;
  const auto& e = weights_.token_embd.view;
  const size_t row = kernels::row_bytes(e.type, e.n_cols);
  return weight_bytes_ - unread_experts - row * static_cast<size_t>(e.n_rows) + row;
}

std::string Model::weight_type_summary() const {
  std::map<std::string, size_t> bytes;
  auto add = [&](const backend::Weight& w) {
    if (w.view.n_rows == 0) return;  // a MoE layer's dense FFN, an unfused expert pair's up
    bytes[kernels::dtype_name(w.view.type)] +=
        kernels::row_bytes(w.view.type, w.view.n_cols) * static_cast<size_t>(w.view.n_rows);
  };
  for (const auto& l : weights_.layers) {
    for (const auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) add(*w);
    for (const auto* v : {&l.moe.gate, &l.moe.up, &l.moe.down}) add(backend::Weight{*v});
  }
  if (bytes.size() == 1) return bytes.begin()->first;
  std::string s = "mixed:";
  for (const auto& [name, n] : bytes) s += " " + name;
  return s;
}

kv::BlockKey kv_fingerprint(const Model& m, const kernels::KvBlockLayout& layout, int64_t version) {
  const ModelConfig& c = m.config();
  // Little-endian words: layout geometry, formats and their group, then rope settings, then
  // the values version (absent for version 0, whose builds hashed only what precedes it).
  // (The weights fingerprint already covers every tensor: Q/K norms and rope_freqs too.)
  const int64_t words[] = {layout.n_layer,
                           layout.n_kv_head,
                           layout.head_dim,
                           layout.block_tokens,
                           static_cast<int64_t>(layout.k_type),
                           static_cast<int64_t>(layout.v_type),
                           c.rope.n_rot,
                           c.rope.interleaved ? 1 : 0,
                           layout.group,
                           c.sliding_window,
                           c.qk_norm ? 1 : 0,
                           c.rope.freq_factors ? 1 : 0,
                           c.rope_long ? 1 : 0,
                           c.no_rope_every};
  const double reals[] = {static_cast<double>(c.rope.freq_base), static_cast<double>(c.rope.freq_scale),
                          static_cast<double>(c.rope.attn_factor)};
  uint8_t bytes[sizeof words + sizeof reals + sizeof version];
  std::memcpy(bytes, words, sizeof words);
  std::memcpy(bytes + sizeof words, reals, sizeof reals);
  std::memcpy(bytes + sizeof words + sizeof reals, &version, sizeof version);
  const size_t n = sizeof words + sizeof reals + (version == 0 ? 0 : sizeof version);
  kv::BlockKey key = kv::hash_bytes({bytes, n}, m.weights_fingerprint());
  if (c.is_moe()) {
    // The routing keys change every layer's output after the first expert layer, so K and V too
    // (the keys of dense models are unchanged by this addition).
    const kernels::MoeRouting& r = c.routing;
    const double moe[] = {static_cast<double>(r.n_expert),      static_cast<double>(r.n_used),
                          static_cast<double>(r.gating),        static_cast<double>(r.n_group),
                          static_cast<double>(r.n_group_used),  r.norm_weights ? 1.0 : 0.0,
                          static_cast<double>(r.weights_scale), static_cast<double>(c.n_dense_lead)};
    key = kv::hash_bytes({reinterpret_cast<const uint8_t*>(moe), sizeof moe}, key);
  }
  if (c.gpt_oss) {
    // gpt-oss's K and V depend on its layer pattern, window and YaRN bounds too (other models'
    // keys are unchanged by this addition).
    const double oss[] = {static_cast<double>(c.swa_period), static_cast<double>(c.local_window),
                          static_cast<double>(c.rope.yarn_low), static_cast<double>(c.rope.yarn_high),
                          static_cast<double>(c.rope_local.freq_base)};
    key = kv::hash_bytes({reinterpret_cast<const uint8_t*>(oss), sizeof oss}, key);
  }
  if (c.mla) {
    // deepseek2's latent rows depend on its YaRN bounds (other models' keys are unchanged by this).
    const double mla[] = {static_cast<double>(c.kv_lora_rank), static_cast<double>(c.rope.yarn_low),
                          static_cast<double>(c.rope.yarn_high), c.rope.yarn ? 1.0 : 0.0};
    key = kv::hash_bytes({reinterpret_cast<const uint8_t*>(mla), sizeof mla}, key);
  }
  if (!c.gemma) return key;
  // Gemma's K and V depend on its layer pattern, window, local rope and caps too (the keys of
  // other models are unchanged by this addition).
  const double gemma[] = {static_cast<double>(c.swa_period),           static_cast<double>(c.local_window),
                          static_cast<double>(c.attn_softcap),         static_cast<double>(c.query_scale),
                          static_cast<double>(c.rope_local.freq_base), static_cast<double>(c.rope_local.freq_scale)};
  return kv::hash_bytes({reinterpret_cast<const uint8_t*>(gemma), sizeof gemma}, key);
}

kv::BlockKey kv_group_fingerprint(const Model& m, const kernels::KvBlockLayout& layout, int g) {
  const ModelConfig& c = m.config();
  const kv::BlockKey key = kv_fingerprint(m, layout);
  const KvGroupMap map = c.kv_group_map();
  if (map.groups.size() == 1) return key;
  std::vector<int64_t> words = {g, map.groups[static_cast<size_t>(g)].window};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    if (map.layer_group[static_cast<size_t>(l)] == g) words.push_back(l);
  }
  return kv::hash_bytes({reinterpret_cast<const uint8_t*>(words.data()), words.size() * sizeof(int64_t)}, key);
}

Model::~Model() {
  for (void* p : owned_) backend_->free(p);
}

}  // namespace kvc::model

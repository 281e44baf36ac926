// The checks that make a GGUF a usable model: expected tensors, their shapes and types, the chat template.
#include "core/model/model_check.h"

#include <charconv>
#include <set>

#include "core/gguf/gguf_file.h"
#include "core/model/model.h"
#include "core/model/model_gemma4.h"

namespace kvc::model {

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::vector<int64_t> ExpectedTensor::shape() const {
  std::vector<int64_t> s = matrix ? std::vector<int64_t>{n_cols, n_rows} : std::vector<int64_t>{n_cols};
  if (n_mats > 0) s.push_back(n_mats);
  return s;
}

bool is_matrix_type(kernels::DType t) {
  switch (t) {
    case kernels::DType::f32:
    case kernels::DType::f16:
    case kernels::DType::bf16:
    case kernels::DType::q8_0:
    case kernels::DType::q4_0:
    case kernels::DType::q4_1:
    case kernels::DType::q5_0:
    case kernels::DType::q5_1:
    case kernels::DType::iq4_nl:
    case kernels::DType::q2_k:
    case kernels::DType::q3_k:
    case kernels::DType::q4_k:
    case kernels::DType::q5_k:
    case kernels::DType::q6_k:
    case kernels::DType::mxfp4: return true;
    case kernels::DType::q8_k: return false;
  }
  return false;
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  auto matrix = [&](std::string name, int64_t rows, int64_t cols) {
    out.push_back({std::move(name), rows, cols, true, false});
  };
  auto vector = [&](std::string name, int64_t n, bool optional) {
    out.push_back({std::move(name), 1, n, false, optional});
  };
  // One per expert: a matrix [n_cols, n_rows, n_expert] or a vector [n, n_expert].
  auto experts = [&](std::string name, int64_t rows, int64_t cols) {
    out.push_back({std::move(name), rows, cols, true, false, c.n_expert});
  };
  auto expert_vectors = [&](std::string name, int64_t n) {
    out.push_back({std::move(name), 1, n, false, true, c.n_expert});
  };
  if (c.gemma4) {  // model_gemma4.cpp
    expected_gemma4_tensors(c, out);
    return out;
  }
  matrix("token_embd.weight", c.n_vocab, c.n_embd);
  // Rope frequency divisors: Llama 3's, or Phi-3's LongRoPE pair (Model::load picks one).
  vector("rope_freqs.weight", c.rope.n_rot / 2, true);
  vector("rope_factors_long.weight", c.rope.n_rot / 2, true);
  vector("rope_factors_short.weight", c.rope.n_rot / 2, true);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    vector(b + "attn_norm.weight", c.n_embd, false);
    if (c.lfm2) {  // a conv layer's gated short convolution, or attention with Q/K norms; a SwiGLU FFN
      if (c.layer_is_recurrent(l)) {
        matrix(b + "shortconv.in_proj.weight", 3 * c.n_embd, c.n_embd);
        out.push_back({b + "shortconv.conv.weight", c.n_embd, c.shortconv_l_cache, true, false});
        matrix(b + "shortconv.out_proj.weight", c.n_embd, c.n_embd);
      } else {
        matrix(b + "attn_q.weight", c.q_width(), c.n_embd);
        matrix(b + "attn_k.weight", c.kv_width(), c.n_embd);
        matrix(b + "attn_v.weight", c.kv_width(), c.n_embd);
        matrix(b + "attn_output.weight", c.n_embd, c.q_width());
        vector(b + "attn_q_norm.weight", c.head_dim, false);
        vector(b + "attn_k_norm.weight", c.head_dim, false);
      }
      vector(b + "ffn_norm.weight", c.n_embd, false);
      matrix(b + "ffn_gate.weight", c.n_ff, c.n_embd);
      matrix(b + "ffn_up.weight", c.n_ff, c.n_embd);
      matrix(b + "ffn_down.weight", c.n_embd, c.n_ff);
      continue;
    }
    if (c.mla) {  // deepseek2: Q (or its latent), the K/V latent, per-head k_b and v_b
      if (c.q_lora_rank > 0) {
        matrix(b + "attn_q_a.weight", c.q_lora_rank, c.n_embd);
        vector(b + "attn_q_a_norm.weight", c.q_lora_rank, false);
        matrix(b + "attn_q_b.weight", c.n_head * c.mla_key_head, c.q_lora_rank);
      } else {
        matrix(b + "attn_q.weight", c.n_head * c.mla_key_head, c.n_embd);
      }
      matrix(b + "attn_kv_a_mqa.weight", c.kv_lora_rank + c.rope.n_rot, c.n_embd);
      vector(b + "attn_kv_a_norm.weight", c.kv_lora_rank, false);
      out.push_back({b + "attn_k_b.weight", c.kv_lora_rank, c.mla_nope(), true, false, c.n_head});
      out.push_back({b + "attn_v_b.weight", c.mla_value_head, c.kv_lora_rank, true, false, c.n_head});
    } else if (c.fused_qkv) {
      matrix(b + "attn_qkv.weight", c.q_width() + 2 * c.kv_width(), c.n_embd);
    } else {
      matrix(b + "attn_q.weight", c.q_width(), c.n_embd);
      matrix(b + "attn_k.weight", c.kv_width(), c.n_embd);
      matrix(b + "attn_v.weight", c.kv_width(), c.n_embd);
    }
    matrix(b + "attn_output.weight", c.n_embd, c.mla ? c.n_head * c.mla_value_head : c.q_width());
    if (c.gemma) {  // the norms after attention and after the FFN
      vector(b + "post_attention_norm.weight", c.n_embd, false);
      vector(b + "post_ffw_norm.weight", c.n_embd, false);
    }
    vector(b + "attn_q.bias", c.q_width(), !c.qkv_bias);
    vector(b + "attn_k.bias", c.kv_width(), !c.qkv_bias);
    vector(b + "attn_v.bias", c.kv_width(), !c.qkv_bias);
    vector(b + "attn_output.bias", c.n_embd, !c.gpt_oss);
    if (c.gpt_oss) vector(b + "attn_sinks.weight", c.n_head, false);
    if (c.qk_norm) {
      vector(b + "attn_q_norm.weight", c.head_dim, false);
      vector(b + "attn_k_norm.weight", c.head_dim, false);
    }
    // gpt-oss names its FFN's input norm post_attention_norm.
    vector(b + (c.gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), c.n_embd, false);
    if (c.layer_is_moe(l)) {
      // The router (+ its bias, + DeepSeek's selection-only bias), each expert's gate and up
      // (apart or fused) and down, their optional biases, and the shared experts.
      matrix(b + "ffn_gate_inp.weight", c.n_expert, c.n_embd);
      vector(b + "ffn_gate_inp.bias", c.n_expert, true);
      vector(b + "exp_probs_b.bias", c.n_expert, true);
      if (c.fused_gate_up_exps) {
        experts(b + "ffn_gate_up_exps.weight", 2 * c.n_ff_exp, c.n_embd);
        expert_vectors(b + "ffn_gate_up_exps.bias", 2 * c.n_ff_exp);
      } else {
        experts(b + "ffn_gate_exps.weight", c.n_ff_exp, c.n_embd);
        experts(b + "ffn_up_exps.weight", c.n_ff_exp, c.n_embd);
        expert_vectors(b + "ffn_gate_exps.bias", c.n_ff_exp);
        expert_vectors(b + "ffn_up_exps.bias", c.n_ff_exp);
      }
      experts(b + "ffn_down_exps.weight", c.n_embd, c.n_ff_exp);
      expert_vectors(b + "ffn_down_exps.bias", c.n_embd);
      if (c.n_ff_shexp > 0) {
        matrix(b + "ffn_gate_shexp.weight", c.n_ff_shexp, c.n_embd);
        matrix(b + "ffn_up_shexp.weight", c.n_ff_shexp, c.n_embd);
        matrix(b + "ffn_down_shexp.weight", c.n_embd, c.n_ff_shexp);
        vector(b + "ffn_gate_inp_shexp.weight", c.n_embd, true);
      }
    } else {
      if (c.fused_gate_up) {
        matrix(b + "ffn_up.weight", 2 * c.n_ff, c.n_embd);
      } else {
        matrix(b + "ffn_gate.weight", c.n_ff, c.n_embd);
        matrix(b + "ffn_up.weight", c.n_ff, c.n_embd);
      }
      matrix(b + "ffn_down.weight", c.n_embd, c.n_ff);
    }
  }
  vector(c.lfm2 ? "token_embd_norm.weight" : "output_norm.weight", c.n_embd, false);
  if (!c.tied_embeddings) matrix("output.weight", c.n_vocab, c.n_embd);
  return out;
}

Status check_tensors(const gguf::GgufFile& f, const ModelConfig& c) {
  if (f.tensors().empty()) {
    return make_error(ErrorCode::invalid_file,
                      "the file has no tensors (a vocabulary-only GGUF?): tensor token_embd.weight is missing");
  }
  for (const ExpectedTensor& e : expected_tensors(c)) {
    const gguf::TensorInfo* t = f.find_tensor(e.name);
    if (t == nullptr) {
      if (e.optional) continue;
      std::string why;
      if (e.name.ends_with(".bias")) why = " (" + c.arch + " models have Q, K and V biases)";
      return make_error(ErrorCode::invalid_file, "tensor " + e.name + " is missing" + why);
    }
    const std::vector<int64_t> want = e.shape();
    if (t->shape != want) {
      return make_error(ErrorCode::invalid_file, "tensor " + e.name + " has shape " + shape_str(t->shape) +
                                                     ", expected " + shape_str(want) + " from the metadata");
    }
    if (e.matrix && !is_matrix_type(t->type)) {
      return make_error(ErrorCode::unsupported,
                        "tensor " + e.name + ": type " + kernels::dtype_name(t->type) + " cannot be a weight matrix");
    }
  }
  return {};
}

size_t expert_bytes(const gguf::GgufFile& f, const ModelConfig& c) {
  size_t n = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name.find("_exps.") != std::string::npos && !is_mtp_tensor(t.name, c)) n += t.n_bytes;
  }
  return n;
}

bool is_mtp_tensor(std::string_view name, const ModelConfig& c) {
  if (c.n_layer_nextn == 0 || !name.starts_with("blk.")) return false;
  name.remove_prefix(4);
  int64_t block = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), block);
  if (ec != std::errc() || end == name.data() || end == name.data() + name.size() || *end != '.') return false;
  return block >= c.n_layer && block < c.n_layer + c.n_layer_nextn;
}

std::vector<std::string> unused_tensors(const gguf::GgufFile& f, const ModelConfig& c) {
  std::set<std::string, std::less<>> used;
  for (ExpectedTensor& e : expected_tensors(c)) used.insert(std::move(e.name));
  std::vector<std::string> out;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (!used.contains(t.name) && !is_mtp_tensor(t.name, c)) out.push_back(t.name);
  }
  return out;
}

Result<std::string_view> chat_template_text(const gguf::GgufFile& f) {
  constexpr std::string_view k_key = "tokenizer.chat_template";
  const gguf::Value* v = f.find(k_key);
  if (v == nullptr) return std::string_view();
  const std::string* s = v->as<std::string>();
  if (s == nullptr) {
    auto r = f.get_string(k_key);  // the getter's message: what was expected, what was found
    return r.error();
  }
  if (s->size() > k_max_chat_template_bytes) {
    return make_error(ErrorCode::invalid_file,
                      "metadata tokenizer.chat_template: " + std::to_string(s->size()) +
                          " bytes is too long for a chat template; kvchat refuses templates over " +
                          std::to_string(k_max_chat_template_bytes) + " bytes (real ones are a few KiB)");
  }
  return std::string_view(*s);
}

Result<CheckedModel> check_model_file(const gguf::GgufFile& f) {
  auto config = ModelConfig::from_gguf(f);
  if (!config.ok()) return config.error();
  auto vocab = vocabulary_from_gguf(f);
  if (!vocab.ok()) return vocab.error();
  auto tok = tokenizer::Tokenizer::create(*vocab);
  if (!tok.ok()) return tok.error();
  auto tmpl = chat_template_from_gguf(f, *tok);
  if (!tmpl.ok()) return tmpl.error();
  KVC_TRY(check_tensors(f, *config));
  // A tensor the architecture does not read means a feature kvchat does not implement: the
  // output would be silently wrong, so the file is refused (llama.cpp refuses it too).
  if (const auto unused = unused_tensors(f, *config); !unused.empty()) {
    return make_error(
        ErrorCode::unsupported,
        "tensor " + unused.front() + " is not used by architecture " + config->arch + " as kvchat implements it" +
            (unused.size() > 1 ? " (nor are " + std::to_string(unused.size() - 1) + " more)" : std::string()) +
            ", so its output would be wrong; this model needs a newer kvchat");
  }
  return CheckedModel{std::move(*config), std::move(*tok), std::move(*tmpl)};
}

}  // namespace kvc::model

// Random-weight llama GGUF models, generated and quantized while they are written.
#include "core/model/model_builder.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/gguf/gguf_writer.h"
#include "core/model/broken_models.h"
#include "core/model/tensor_plan.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"

namespace kvc::model {

namespace {

using kernels::DType;

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t hash_name(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

// A standard near-normal value from 64 random bits: the sum of four 16-bit uniforms
// (Irwin-Hall, n = 4), centred and scaled to unit variance; it lies within +-3.46. Integer
// arithmetic and one float multiply, so every machine produces the same bits.
float near_normal(uint64_t bits) {
  const int32_t sum = static_cast<int32_t>(bits & 0xffff) + static_cast<int32_t>((bits >> 16) & 0xffff) +
                      static_cast<int32_t>((bits >> 32) & 0xffff) + static_cast<int32_t>(bits >> 48);
  // Each uniform has variance (65536^2 - 1) / 12, so the sum's deviation is ~65536 / sqrt(3).
  constexpr float k_scale = 1.7320508f / 65536.0f;
  return static_cast<float>(sum - 2 * 65535) * k_scale;  // the mean of the sum is 4 * 65535 / 2
}

// Fills rows [row_begin, row_end) of `t` into `out` (already quantized to t.type).
void generate_rows(const TensorPlan& t, uint64_t seed, int64_t row_begin, int64_t row_end, uint8_t* out,
                   std::vector<float>& scratch) {
  const int64_t n_cols = t.shape[0];
  const size_t row = kernels::row_bytes(t.type, n_cols);
  scratch.resize(static_cast<size_t>(n_cols));
  for (int64_t r = row_begin; r < row_end; ++r) {
    uint64_t s = seed ^ hash_name(t.name) ^ (static_cast<uint64_t>(r) * 0xd1b54a32d192ed03ull);
    float std = t.std2_from_row >= 0 && r >= t.std2_from_row ? t.std2 : t.std;
    if (!t.row_std_scale.empty()) std *= t.row_std_scale[static_cast<size_t>(r)];
    for (int64_t c = 0; c < n_cols; ++c) {
      scratch[static_cast<size_t>(c)] =
          t.values.empty() ? t.mean + std * near_normal(splitmix64(s)) : t.values[static_cast<size_t>(r * n_cols + c)];
    }
    kernels::quantize_row(t.type, scratch.data(), out + static_cast<size_t>(r - row_begin) * row, n_cols);
  }
}

// Llama 3's rope factors, one divisor per rotated pair k of n_pairs, as Meta's scaling
// defines them (low_freq_factor 1, high_freq_factor 4): 1 where the pair's wavelength
// 2 pi base^(2k / n_rot) is under orig_ctx / 4, `factor` where it is over orig_ctx, and
// 1 / ((1 - t) / factor + t) in between, t = (orig_ctx / wavelength - 1) / 3. Each factor is
// rounded to a multiple of 2^-12, so that a last-bit difference between C libraries' pow()
// cannot change the file (and its recorded hash).
std::vector<float> llama3_rope_factors(int64_t n_pairs, float base, float factor, int64_t orig_ctx) {
  std::vector<float> f(static_cast<size_t>(n_pairs));
  const double ctx = static_cast<double>(orig_ctx);
  for (int64_t k = 0; k < n_pairs; ++k) {
    const double wavelength =
        2.0 * 3.14159265358979323846 *
        std::pow(static_cast<double>(base), static_cast<double>(k) / static_cast<double>(n_pairs));
    double v = 1.0;
    if (wavelength > ctx) {
      v = static_cast<double>(factor);
    } else if (wavelength > ctx / 4.0) {
      const double t = (ctx / wavelength - 1.0) / 3.0;
      v = 1.0 / ((1.0 - t) / static_cast<double>(factor) + t);
    }
    f[static_cast<size_t>(k)] = static_cast<float>(std::round(v * 4096.0) / 4096.0);
  }
  return f;
}

}  // namespace

Status ModelSpec::validate(int64_t n_vocab) const {
  auto bad = [](const std::string& m) { return make_error(ErrorCode::invalid_argument, m); };
  if (n_embd <= 0 || n_layer <= 0 || n_head <= 0 || n_head_kv <= 0 || n_ff <= 0 || n_ctx <= 0) {
    return bad("every dimension must be positive");
  }
  if (head_dim == 0 && n_embd % n_head != 0 && arch != "deepseek2")
    return bad("--dim must be a multiple of --heads (or give --head-dim)");
  if (n_head % n_head_kv != 0) return bad("--heads must be a multiple of --kv-heads");
  if (arch != "deepseek2" && (head_size() <= 0 || head_size() % 2 != 0 || head_size() > 1024)) {
    return bad("the head size (--head-dim, or --dim / --heads) must be even and at most 1024 for rotary embeddings");
  }
  const bool gemma = arch == "gemma2" || arch == "gemma3" || arch == "gemma4";
  const bool moe = arch == "qwen3moe" || arch == "gpt-oss" || arch == "deepseek2";
  if (arch == "deepseek2") KVC_TRY(check_deepseek2_spec(*this));
  if (n_nextn != 0 && arch != "deepseek2") return bad("--nextn-layers is for --arch deepseek2");
  if (arch == "lfm2") KVC_TRY(check_lfm2_spec(*this));
  if (arch == "gemma4") KVC_TRY(check_gemma4_spec(*this));
  if (head_dim != 0 && arch != "qwen3" && !moe && !gemma)
    return bad(
        "--head-dim is for --arch qwen3, qwen3moe, gpt-oss, gemma2, gemma3 and gemma4 (other architectures use --dim / "
        "--heads)");
  if (arch == "gpt-oss") {
    if (sliding_window <= 0) return bad("--window must be positive for gpt-oss (its local layers' window)");
    if (!(rope_scale_factor >= 1 && rope_scale_factor < 1000 && rope_orig_ctx > 0))
      return bad("--rope-scale-factor must be in [1, 1000) and --rope-orig-ctx positive");
    if (!(sink_std >= 0 && sink_std < 100)) return bad("--sink-std must lie in [0, 100)");
  }
  if (moe) {
    if (n_expert < 2 || n_expert > 512) return bad("--experts must lie in [2, 512]");
    if (n_expert_used < 1 || n_expert_used > n_expert) return bad("--experts-used must lie in [1, --experts]");
    if (n_ff_exp <= 0 || n_ff_exp % 32 != 0 || n_ff_exp > 262144)
      return bad("--expert-ffn must be a positive multiple of 32 (the quantization block)");
    if (!(router_std > 0 && router_std < 100)) return bad("--router-std must lie in (0, 100)");
    if (!(expert_std >= 0 && expert_std < 10)) return bad("--expert-std must lie in [0, 10)");
  }
  if (arch == "gemma3" && !(rope_scale_factor >= 1 && rope_scale_factor < 1000))
    return bad("--rope-scale-factor must be in [1, 1000)");
  if (arch == "gemma2" && !(attn_softcap > 0 && attn_softcap < 1000 && final_softcap > 0 && final_softcap < 1000))
    return bad("--attn-softcap and --final-softcap must lie in (0, 1000)");
  if ((arch == "llama3" || arch == "phi3") &&
      !(rope_scale_factor >= 1 && rope_scale_factor < 1000 && rope_orig_ctx > 0)) {
    return bad("--rope-scale-factor must be in [1, 1000) and --rope-orig-ctx positive");
  }
  if (n_embd % 32 != 0 || n_ff % 32 != 0)
    return bad("--dim and --ffn must be multiples of 32 (the quantization block)");
  if (n_vocab < 4) return bad("the vocabulary is too small");
  if (arch != "llama" && arch != "llama3" && arch != "qwen2" && arch != "qwen3" && !moe && arch != "phi3" &&
      arch != "smollm3" && !gemma && arch != "lfm2") {
    return bad("unknown architecture '" + arch +
               "' (choose llama, llama3, qwen2, qwen3, qwen3moe, gpt-oss, deepseek2, phi3, smollm3, gemma2, gemma3, "
               "gemma4 or lfm2)");
  }
  if (sliding_window < 0 || sliding_window > n_ctx) return bad("--window must lie in [0, --ctx]");
  if (shared_kv_from_layer != 0) {
    if (arch != "llama" && arch != "gemma2" && arch != "gemma3")
      return bad("--shared-kv-from-layer is for --arch llama, gemma2 and gemma3 (gemma4: --shared-kv-layers)");
    if (shared_kv_from_layer < 1 || shared_kv_from_layer >= n_layer)
      return bad("--shared-kv-from-layer must lie in [1, --layers)");
    const int64_t period = arch == "gemma2" ? 2 : arch == "gemma3" ? 6 : 0;
    auto local = [&](int64_t l) {
      return period > 0 && (sliding_window > 0 || arch == "gemma2") && l % period < period - 1;
    };
    for (int64_t l = shared_kv_from_layer; l < n_layer; ++l) {
      bool found = false;
      for (int64_t k = 0; k < shared_kv_from_layer; ++k) found = found || local(k) == local(l);
      if (!found)
        return bad("--shared-kv-from-layer: layer " + std::to_string(l) + " has no earlier layer of its kind");
    }
  }
  if (!(weight_std > 0 && weight_std < 10) || !(qk_std >= 0 && qk_std < 10) || !(norm_std >= 0 && norm_std < 10) ||
      !(bias_std >= 0 && bias_std < 10)) {
    return bad("standard deviations must lie in [0, 10) (and --std above 0)");
  }
  if (!(rope_freq_base > 0)) return bad("--rope-base must be positive");
  if (!(qk_norm_mean > 0 && qk_norm_mean < 100)) return bad("--qk-norm-mean must lie in (0, 100)");
  if (k_outliers < 0 || k_outliers > head_size()) {
    return bad("--k-outliers must lie in [0, head size " + std::to_string(head_size()) + "], got " +
               std::to_string(k_outliers));
  }
  if (!(k_outlier_scale >= 1 && k_outlier_scale <= 100)) return bad("--k-outlier-scale must lie in [1, 100]");
  if (n_layer > 512 || n_embd > 65536 || n_ff > 262144) return bad("the model is implausibly large");
  return {};
}

std::string demo_chat_template() {
  return "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
         "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
         "{% endif %}{% endfor %}";
}

void add_vocabulary(gguf::GgufWriter& w, const tokenizer::Vocabulary& vocab) {
  w.set_string("tokenizer.ggml.model", vocab.model);
  if (vocab.model == "gpt2") w.set_string("tokenizer.ggml.pre", vocab.pre.empty() ? "default" : vocab.pre);
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  if (vocab.model != "gpt2") w.set_vector("tokenizer.ggml.scores", vocab.scores);  // BPE has none
  w.set_vector("tokenizer.ggml.token_type", vocab.types);
  if (vocab.model == "gpt2") w.set_string_array("tokenizer.ggml.merges", vocab.merges);
  auto set_id = [&](const char* key, int32_t id) {
    if (id >= 0) w.set_u32(key, static_cast<uint32_t>(id));
  };
  set_id("tokenizer.ggml.bos_token_id", vocab.bos_id);
  set_id("tokenizer.ggml.eos_token_id", vocab.eos_id);
  set_id("tokenizer.ggml.eot_token_id", vocab.eot_id);
  set_id("tokenizer.ggml.eom_token_id", vocab.eom_id);
  set_id("tokenizer.ggml.unknown_token_id", vocab.unk_id);
  set_id("tokenizer.ggml.padding_token_id", vocab.pad_id);
  w.set_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  w.set_bool("tokenizer.ggml.add_eos_token", vocab.add_eos);
  w.set_bool("tokenizer.ggml.add_space_prefix", vocab.add_space_prefix);
}

Status write_vocabulary_file(const tokenizer::Vocabulary& vocab, const std::string& chat_template,
                             const std::string& path) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "vocabulary");
  add_vocabulary(w, vocab);
  if (!chat_template.empty()) w.set_string("tokenizer.chat_template", chat_template);
  return w.write(path);
}

Status write_random_model(const ModelSpec& spec, const tokenizer::Vocabulary& vocab, const std::string& path,
                          const std::function<void(size_t, size_t)>& progress) {
  const auto n_vocab = static_cast<int64_t>(vocab.tokens.size());
  KVC_TRY(spec.validate(n_vocab));
  const int64_t head_dim = spec.head_size();
  const int64_t q_width = spec.n_head * head_dim, kv_width = spec.n_head_kv * head_dim;
  // Llama 3 is the llama architecture plus rope_freqs.weight.
  const std::string arch = spec.arch == "llama3" ? "llama" : spec.arch;

  gguf::GgufWriter w;
  const std::string a = arch + ".";
  w.set_string("general.architecture", arch);
  w.set_string("general.name", spec.name);
  w.set_u32("general.file_type", gguf_file_type(spec.type));
  w.set_u32(a + "context_length", static_cast<uint32_t>(spec.n_ctx));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(spec.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(spec.n_layer + spec.n_nextn));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(spec.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(spec.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(spec.n_head_kv));
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(head_dim));
  const bool gemma = spec.arch == "gemma2" || spec.arch == "gemma3" || spec.arch == "gemma4";
  const bool oss = spec.arch == "gpt-oss";
  const bool moe = spec.arch == "qwen3moe" || oss || spec.arch == "deepseek2";
  const bool qwen3 = spec.arch == "qwen3" || spec.arch == "qwen3moe";  // Q/K norms and key_length
  if (moe) {
    w.set_u32(a + "expert_count", static_cast<uint32_t>(spec.n_expert));
    w.set_u32(a + "expert_used_count", static_cast<uint32_t>(spec.n_expert_used));
    w.set_u32(a + "expert_feed_forward_length", static_cast<uint32_t>(spec.n_ff_exp));
  }
  if (oss) {  // YaRN over the original context, as gpt-oss's files say it (factor 32 of 4096 there)
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", spec.rope_scale_factor);
    w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(spec.rope_orig_ctx));
  }
  if (qwen3 || gemma || oss) {
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
  }
  w.set_f32(a + "rope.freq_base", spec.rope_freq_base);
  if (spec.arch == "phi3") {
    // LongRoPE: past the original context the long factors apply, and cos / sin are scaled by
    // sqrt(1 + ln(ctx / orig) / ln(orig)) (rounded like the factors, see llama3_rope_factors).
    w.set_u32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(spec.rope_orig_ctx));
    const double scale = static_cast<double>(spec.n_ctx) / static_cast<double>(spec.rope_orig_ctx);
    const double attn =
        scale <= 1 ? 1.0 : std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(spec.rope_orig_ctx)));
    w.set_f32(a + "rope.scaling.attn_factor", static_cast<float>(std::round(attn * 4096.0) / 4096.0));
  }
  if (spec.sliding_window > 0) w.set_u32(a + "attention.sliding_window", static_cast<uint32_t>(spec.sliding_window));
  if (spec.shared_kv_from_layer > 0) {  // kvchat's own key: no released model has it
    w.set_u32("kvchat.shared_kv_from_layer", static_cast<uint32_t>(spec.shared_kv_from_layer));
  }
  if (spec.arch == "gemma2") {
    w.set_f32(a + "attn_logit_softcapping", spec.attn_softcap);
    w.set_f32(a + "final_logit_softcapping", spec.final_softcap);
  }
  if (spec.arch == "gemma3" && spec.rope_scale_factor > 1) {  // the global layers' linear scaling (Gemma 3 4B: 8)
    w.set_string(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", spec.rope_scale_factor);
  }
  if (spec.arch == "deepseek2") add_deepseek2_metadata(spec, w);
  if (spec.arch == "lfm2") add_lfm2_metadata(spec, w);
  if (spec.arch == "gemma4") add_gemma4_metadata(spec, w);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", spec.rms_eps);
  w.set_u32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
  add_vocabulary(w, vocab);
  if (!spec.chat_template.empty()) w.set_string("tokenizer.chat_template", spec.chat_template);

  // Outlier key channels: in each KV head, k_outliers channels (drawn from the seed) whose K
  // rows have k_outlier_scale times the deviation, so those channels of K are that much larger.
  // k_rows[r] scales row r of the kv_width K rows.
  std::vector<float> k_rows;
  if (spec.k_outliers > 0) {
    k_rows.assign(static_cast<size_t>(kv_width), 1.0f);
    uint64_t s = spec.seed ^ 0x6b2d6f75746c6965ull;  // "k-outlie"
    for (int64_t h = 0; h < spec.n_head_kv; ++h) {
      for (int64_t j = 0; j < spec.k_outliers;) {
        const auto c = static_cast<int64_t>(splitmix64(s) % static_cast<uint64_t>(head_dim));
        float& f = k_rows[static_cast<size_t>(h * head_dim + c)];
        if (f != 1.0f) continue;  // already an outlier: draw again
        f = spec.k_outlier_scale;
        ++j;
      }
    }
  }
  // Matrices near-normal around 0 (attn_q / attn_k with their own deviation), norms near 1.
  const float qk_std = spec.qk_std > 0 ? spec.qk_std : spec.weight_std;
  std::vector<TensorPlan> plans;
  auto matrix = [&](std::string name, int64_t rows, int64_t cols, float std) {
    const DType t =
        tensor_type(spec.type, name, 2, cols, {spec.n_layer, spec.n_head / spec.n_head_kv, !spec.tied && !gemma});
    plans.push_back({std::move(name), {cols, rows}, t, 0.0f, std, {}});
  };
  // n_expert matrices of (rows, cols) in one 3-D tensor [cols, rows, n_expert].
  auto experts = [&](std::string name, int64_t rows, int64_t cols) {
    const DType t = tensor_type(spec.type, name, 3, cols, {spec.n_layer, spec.n_head / spec.n_head_kv, !spec.tied});
    plans.push_back({std::move(name),
                     {cols, rows, spec.n_expert},
                     t,
                     0.0f,
                     spec.expert_std > 0 ? spec.expert_std : spec.weight_std,
                     {}});
  };
  auto vector = [&](std::string name, int64_t n, float mean, float std) {
    plans.push_back({std::move(name), {n}, DType::f32, mean, std, {}});
  };
  matrix("token_embd.weight", n_vocab, spec.n_embd, spec.weight_std);
  if (spec.arch == "llama3") {
    plans.push_back(
        {"rope_freqs.weight",
         {head_dim / 2},
         DType::f32,
         0.0f,
         0.0f,
         llama3_rope_factors(head_dim / 2, spec.rope_freq_base, spec.rope_scale_factor, spec.rope_orig_ctx)});
  }
  if (spec.arch == "phi3") {  // LongRoPE-shaped factor pairs: long ones up to the factor, short ones mild
    plans.push_back(
        {"rope_factors_long.weight",
         {head_dim / 2},
         DType::f32,
         0.0f,
         0.0f,
         llama3_rope_factors(head_dim / 2, spec.rope_freq_base, spec.rope_scale_factor, spec.rope_orig_ctx)});
    plans.push_back({"rope_factors_short.weight",
                     {head_dim / 2},
                     DType::f32,
                     0.0f,
                     0.0f,
                     llama3_rope_factors(head_dim / 2, spec.rope_freq_base, 1.25f, spec.rope_orig_ctx)});
  }
  if (spec.arch == "gemma4") plan_gemma4_globals(spec, n_vocab, plans);
  for (int64_t l = 0; l < spec.n_layer; ++l) {
    if (spec.arch == "deepseek2") {
      plan_deepseek2_layer(spec, l, plans);
      continue;
    }
    if (spec.arch == "lfm2") {
      plan_lfm2_layer(spec, l, plans);
      continue;
    }
    if (spec.arch == "gemma4") {
      plan_gemma4_layer(spec, l, plans);
      continue;
    }
    const std::string b = "blk." + std::to_string(l) + ".";
    vector(b + "attn_norm.weight", spec.n_embd, 1.0f, spec.norm_std);
    if (spec.arch == "phi3") {  // Q, K and V rows in one tensor; V's rows keep the plain deviation
      matrix(b + "attn_qkv.weight", q_width + 2 * kv_width, spec.n_embd, qk_std);
      plans.back().std2_from_row = q_width + kv_width;
      plans.back().std2 = spec.weight_std;
      if (!k_rows.empty()) {
        plans.back().row_std_scale.assign(static_cast<size_t>(q_width + 2 * kv_width), 1.0f);
        std::copy(k_rows.begin(), k_rows.end(), plans.back().row_std_scale.begin() + q_width);
      }
    } else {
      matrix(b + "attn_q.weight", q_width, spec.n_embd, qk_std);
      matrix(b + "attn_k.weight", kv_width, spec.n_embd, qk_std);
      plans.back().row_std_scale = k_rows;
      matrix(b + "attn_v.weight", kv_width, spec.n_embd, spec.weight_std);
    }
    if (spec.arch == "qwen2" || oss) {
      vector(b + "attn_q.bias", q_width, 0.0f, spec.bias_std);
      vector(b + "attn_k.bias", kv_width, 0.0f, spec.bias_std);
      vector(b + "attn_v.bias", kv_width, 0.0f, spec.bias_std);
    }
    if (qwen3 || spec.arch == "gemma3") {
      vector(b + "attn_q_norm.weight", head_dim, spec.qk_norm_mean, spec.norm_std);
      vector(b + "attn_k_norm.weight", head_dim, spec.qk_norm_mean, spec.norm_std);
    }
    matrix(b + "attn_output.weight", spec.n_embd, q_width, spec.weight_std);
    if (oss) {
      vector(b + "attn_output.bias", spec.n_embd, 0.0f, spec.bias_std);
      vector(b + "attn_sinks.weight", spec.n_head, 0.0f, spec.sink_std);
    }
    if (gemma) vector(b + "post_attention_norm.weight", spec.n_embd, 1.0f, spec.norm_std);
    // gpt-oss names its FFN's input norm post_attention_norm.
    vector(b + (oss ? "post_attention_norm.weight" : "ffn_norm.weight"), spec.n_embd, 1.0f, spec.norm_std);
    if (moe) {  // the router (F32, as converters and llama-quantize keep it) and the experts, 3-D
      plans.push_back({b + "ffn_gate_inp.weight", {spec.n_embd, spec.n_expert}, DType::f32, 0.0f, spec.router_std});
      if (oss) vector(b + "ffn_gate_inp.bias", spec.n_expert, 0.0f, spec.router_std);
      experts(b + "ffn_gate_exps.weight", spec.n_ff_exp, spec.n_embd);
      experts(b + "ffn_up_exps.weight", spec.n_ff_exp, spec.n_embd);
      experts(b + "ffn_down_exps.weight", spec.n_embd, spec.n_ff_exp);
      if (oss) {  // each expert's biases: (n, n_expert)
        plans.push_back({b + "ffn_gate_exps.bias", {spec.n_ff_exp, spec.n_expert}, DType::f32, 0.0f, spec.bias_std});
        plans.push_back({b + "ffn_up_exps.bias", {spec.n_ff_exp, spec.n_expert}, DType::f32, 0.0f, spec.bias_std});
        plans.push_back({b + "ffn_down_exps.bias", {spec.n_embd, spec.n_expert}, DType::f32, 0.0f, spec.bias_std});
      }
    } else {
      if (spec.arch == "phi3") {  // gate then up rows in ffn_up
        matrix(b + "ffn_up.weight", 2 * spec.n_ff, spec.n_embd, spec.weight_std);
      } else {
        matrix(b + "ffn_gate.weight", spec.n_ff, spec.n_embd, spec.weight_std);
        matrix(b + "ffn_up.weight", spec.n_ff, spec.n_embd, spec.weight_std);
      }
      matrix(b + "ffn_down.weight", spec.n_embd, spec.n_ff, spec.weight_std);
    }
    if (gemma) vector(b + "post_ffw_norm.weight", spec.n_embd, 1.0f, spec.norm_std);
  }
  vector(spec.arch == "lfm2" ? "token_embd_norm.weight" : "output_norm.weight", spec.n_embd, 1.0f, spec.norm_std);
  if (!spec.tied && !gemma) matrix("output.weight", n_vocab, spec.n_embd, spec.weight_std);  // Gemma: always tied
  for (int64_t l = spec.n_layer; l < spec.n_layer + spec.n_nextn; ++l) plan_deepseek2_mtp_block(spec, l, plans);
  if (!spec.broken.empty()) KVC_TRY(apply_broken_variant(spec.broken, spec, vocab, w, plans));

  size_t total = 0;
  for (const auto& p : plans) total += kernels::row_bytes(p.type, p.shape[0]) * static_cast<size_t>(p.n_rows());
  auto pool =
      std::make_shared<kernels::ThreadPool>(spec.n_threads > 0 ? spec.n_threads : kernels::default_thread_count());
  auto done = std::make_shared<size_t>(0);
  for (const auto& p : plans) {
    w.add_tensor_stream(p.name, p.shape, p.type,
                        [p, pool, done, total, &progress, seed = spec.seed](const gguf::ByteSink& sink) -> Status {
                          const int64_t n_rows = p.n_rows();
                          const size_t row = kernels::row_bytes(p.type, p.shape[0]);
                          // Chunks of about 4 MiB, generated in parallel, emitted in order.
                          const int64_t chunk_rows =
                              std::max<int64_t>(1, static_cast<int64_t>((size_t{4} << 20) / row));
                          std::vector<uint8_t> buf;
                          std::vector<std::vector<float>> scratch(static_cast<size_t>(pool->n_threads()));
                          for (int64_t r0 = 0; r0 < n_rows; r0 += chunk_rows) {
                            const int64_t r1 = std::min(n_rows, r0 + chunk_rows);
                            buf.resize(static_cast<size_t>(r1 - r0) * row);
                            pool->run([&](int ith, int nth) {
                              const int64_t b = r0 + (r1 - r0) * ith / nth, e = r0 + (r1 - r0) * (ith + 1) / nth;
                              if (b < e)
                                generate_rows(p, seed, b, e, buf.data() + static_cast<size_t>(b - r0) * row,
                                              scratch[static_cast<size_t>(ith)]);
                            });
                            KVC_TRY(sink(buf));
                            *done += buf.size();
                            if (progress) progress(*done, total);
                          }
                          return {};
                        });
  }
  KVC_TRY(w.write(path));
  if (!spec.broken.empty()) KVC_TRY(patch_broken_variant(spec.broken, path));
  return {};
}

}  // namespace kvc::model

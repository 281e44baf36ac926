// kvchat-cli mkmodel: write a llama or qwen2 GGUF with random weights; and the built-in demo model.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "app/cli/cli_common.h"
#include "app/common/demo_model.h"
#include "core/gguf/gguf_file.h"
#include "core/model/broken_models.h"
#include "core/model/model_builder.h"
#include "core/tokenizer/train_vocabulary.h"
#include "storage/data_dir.h"

namespace kvc::cli {

namespace {

struct MkmodelArgs {
  model::ModelSpec spec;
  std::string out;
  std::string type = "q8_0";
  std::string preset;
  std::string vocab_from;
  std::string corpus;
  int64_t n_vocab = 1024;
  int64_t pad_vocab = 0;  // pad the vocabulary with unused tokens to this size (0: as it is)
  bool quiet = false;
  std::string data_dir;
};

// The vocabulary of --vocab-from (and its chat template, when `chat_template` is still empty),
// or one trained on the corpus.
Result<tokenizer::Vocabulary> make_vocabulary(const std::string& vocab_from, const std::string& corpus, int64_t n_vocab,
                                              std::string& chat_template) {
  if (!vocab_from.empty()) {
    auto f = gguf::GgufFile::open(vocab_from);
    if (!f.ok()) return f.error();
    if (chat_template.empty()) {
      auto t = f->get_string_or("tokenizer.chat_template", "");
      if (!t.ok()) return t.error();
      chat_template = std::move(*t);
    }
    return model::vocabulary_from_gguf(*f);
  }
  const std::string path = corpus.empty() ? (app::asset_dir() / "demo/corpus.txt").string() : corpus;
  return tokenizer::train_vocabulary(path, static_cast<int>(n_vocab));
}

// The shapes of released models people run (from their published configs), for benchmarks:
// speed depends on the shape and the weight type, not on the values. n_vocab pads the
// vocabulary to the model's own size. Gemma: window is the local layers' sliding_window (the
// pattern of five local layers to a global one is the gemma3 architecture's), rope_scale the
// global layers' linear rope scaling (1: none).
struct Preset {
  const char* name;
  const char* arch;
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, head_dim, n_vocab, n_ctx;
  bool tied;
  float rope_base;
  int64_t window = 0;
  float rope_scale = 0;                                   // 0: the architecture's default
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;  // qwen3moe's experts (0: not a MoE)
  float rms_eps = 0;                                      // 0: mkmodel's default
  int64_t rope_orig_ctx = 0;                              // 0: mkmodel's default
  // deepseek2 (multi-head latent attention): kv_lora_rank, q_lora_rank (0: none), the query
  // heads' nope / rope parts, the value head, dense leading layers, shared experts, YaRN's log
  // multiplier (0.1 mscale_all_dim), the routed weights' scale.
  int64_t kv_lora = 0, q_lora = 0, mla_nope = 0, mla_rope = 0, mla_value = 0, dense_lead = 0, shared = 0;
  float yarn_log_mul = 0, weights_scale = 0;
  // deepseek2's routing (0: mkmodel's default) and its MTP blocks.
  int gating = 0;
  float selection_bias_std = 0;
  bool weights_norm = false;
  int64_t nextn = 0;
};

constexpr Preset k_presets[] = {
    {"tinyllama", "llama", 2048, 22, 32, 4, 5632, 0, 32000, 2048, false, 10000.0f},
    {"llama3.2-1b", "llama3", 2048, 16, 32, 8, 8192, 0, 128256, 131072, true, 500000.0f},
    {"llama3.2-3b", "llama3", 3072, 28, 24, 8, 8192, 0, 128256, 131072, true, 500000.0f},
    {"qwen3-1.7b", "qwen3", 2048, 28, 16, 8, 6144, 128, 151936, 40960, true, 1000000.0f},
    {"mistral-7b", "llama", 4096, 32, 32, 8, 14336, 0, 32768, 32768, false, 1000000.0f},
    // LFM2-1.2B: 16 layers, 10 short convolutions of 3 taps and 6 GQA attention layers (32 / 8
    // heads of 64, Q/K norms), tied output.
    {"lfm2-1.2b", "lfm2", 2048, 16, 32, 8, 8192, 0, 65536, 128000, true, 1000000.0f},
    // Gemma 3 1B: 26 layers (22 local of window 512, 4 global), MQA with heads of 256; 4B: 34
    // layers (window 1024), 4 KV heads, global rope scaled 1/8.
    {"gemma3-1b", "gemma3", 1152, 26, 4, 1, 6912, 256, 262144, 32768, true, 1000000.0f, 512, 1.0f},
    {"gemma3-4b", "gemma3", 2560, 34, 8, 4, 10240, 256, 262208, 131072, true, 1000000.0f, 1024, 8.0f},
    {"gemma4-e2b", "gemma4", 1536, 35, 8, 1, 6144, 512, 262144, 131072, true, 1000000.0f, 512, 1.0f, 0, 0, 0, 1e-6f},
    {"gemma4-e4b", "gemma4", 2560, 42, 8, 2, 10240, 512, 262144, 131072, true, 1000000.0f, 512, 1.0f, 0, 0, 0, 1e-6f},
    // Qwen3-30B-A3B (and Qwen3-Coder-30B-A3B): 48 layers of 128 experts of width 768, 8 used
    // per token (3.3B of 30.5B parameters active), GQA 32 / 4 heads of 128, separate output.
    {"qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 6144, 128, 151936, 40960, false, 1000000.0f, 0, 0, 128, 8, 768,
     1e-6f},
    // gpt-oss-20b: 24 layers (local of window 128 and global alternating) of 32 experts of
    // width 2880, 4 used per token, GQA 64 / 8 heads of 64, YaRN 32x over 4096 positions, the
    // o200k vocabulary's size. Its files keep the experts in MXFP4 (--type mxfp4_moe).
    {"gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 2880, 64, 201088, 131072, false, 150000.0f, 128, 32.0f, 32, 4, 2880,
     1e-5f, 4096},
    // DeepSeek-V2-Lite (and Coder-V2-Lite): 27 layers, the first dense (10944 wide), then 64
    // experts of 1408, 6 used, 2 shared; 16 heads, a latent of 512 + 64 rope values a token,
    // query heads of 128 + 64 without a Q latent, values of 128; YaRN 40x over 4096 with
    // mscale_all_dim 0.707; softmax routing, weights not normalised, scale 1.
    {"deepseek-v2-lite",
     "deepseek2",
     2048,
     27,
     16,
     1,
     10944,
     0,
     102400,
     163840,
     false,
     10000.0f,
     0,
     40.0f,
     64,
     6,
     1408,
     1e-6f,
     4096,
     512,
     0,
     128,
     64,
     128,
     1,
     2,
     0.0707f,
     1.0f},
    // GLM-4.7-Flash (Glm4MoeLiteForCausalLM, converted as deepseek2): 47 layers, the first dense
    // (10240 wide), then 64 experts of 1536, 4 used, 1 shared; 20 heads, a latent of 512 + 64
    // rope values a token, a Q latent of 768, query heads of 192 + 64, values of 256; rope base
    // 1e6 without scaling; sigmoid routing with a selection bias, weights normalised and scaled
    // 1.8; one MTP block after the layers (block_count 48).
    {"glm-4.7-flash",
     "deepseek2",
     2048,
     47,
     20,
     1,
     10240,
     0,
     154880,
     202752,
     false,
     1000000.0f,
     0,
     1.0f,
     64,
     4,
     1536,
     1e-5f,
     0,
     512,
     768,
     192,
     64,
     256,
     1,
     1,
     0.0f,
     1.8f,
     2,
     0.5f,
     true,
     1},
};

// Gemma 4's edge models (their published configs): heads of 256 on local layers and 512 on global
// ones (a quarter of whose pairs rotate), local windows of 512, per-layer embeddings of 256, the
// last layers sharing K/V. E2B: 35 layers (4 local to 1 global), 20 shared, MQA, the shared
// layers' FFN double-wide; E4B: 42 layers (5 to 1), 18 shared, 2 KV heads. With --layers N the
// storing layers keep their share, rounded to whole local/global periods.
struct Gemma4Preset {
  const char* name;
  int swa_period;
  int64_t shared, head_dim_swa, per_layer;
  bool double_wide;
};
constexpr Gemma4Preset k_gemma4_presets[] = {
    {"gemma4-e2b", 5, 20, 256, 256, true},
    {"gemma4-e4b", 6, 18, 256, 256, false},
};

const Preset* find_preset(const std::string& name) {
  for (const auto& p : k_presets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::string preset_list() {
  std::string out;
  for (const auto& p : k_presets) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

// The preset's values for every shape option not given on the command line.
template <typename Given>
void apply_preset(const Preset& p, MkmodelArgs& a, const Given& given) {
  auto set = [&](const char* option, auto& field, auto value) {
    if (!given(option)) field = value;
  };
  a.spec.name = std::string("kvchat random ") + p.name + " shape";
  set("--arch", a.spec.arch, std::string(p.arch));
  set("--dim", a.spec.n_embd, p.n_embd);
  set("--layers", a.spec.n_layer, p.n_layer);
  set("--heads", a.spec.n_head, p.n_head);
  set("--kv-heads", a.spec.n_head_kv, p.n_head_kv);
  set("--ffn", a.spec.n_ff, p.n_ff);
  set("--head-dim", a.spec.head_dim, p.head_dim);
  set("--rope-base", a.spec.rope_freq_base, p.rope_base);
  set("--pad-vocab", a.pad_vocab, p.n_vocab);
  if (!given("--tied")) a.spec.tied = p.tied;
  set("--ctx", a.spec.n_ctx, p.n_ctx);
  if (p.window > 0) set("--window", a.spec.sliding_window, p.window);
  if (p.rope_scale > 0) set("--rope-scale-factor", a.spec.rope_scale_factor, p.rope_scale);
  if (p.n_expert > 0) {
    set("--experts", a.spec.n_expert, p.n_expert);
    set("--experts-used", a.spec.n_expert_used, p.n_expert_used);
    set("--expert-ffn", a.spec.n_ff_exp, p.n_ff_exp);
  }
  if (p.rms_eps > 0) a.spec.rms_eps = p.rms_eps;
  if (p.kv_lora > 0) {
    set("--kv-lora-rank", a.spec.kv_lora_rank, p.kv_lora);
    set("--q-lora-rank", a.spec.q_lora_rank, p.q_lora);
    set("--mla-nope", a.spec.mla_nope, p.mla_nope);
    set("--rope-dim", a.spec.mla_rope, p.mla_rope);
    set("--mla-value", a.spec.mla_value, p.mla_value);
    set("--dense-layers", a.spec.n_dense_lead, p.dense_lead);
    set("--shared-experts", a.spec.n_expert_shared, p.shared);
    set("--yarn-log-mul", a.spec.yarn_log_mul, p.yarn_log_mul);
    set("--expert-weights-scale", a.spec.expert_weights_scale, p.weights_scale);
    if (p.gating > 0) set("--gating", a.spec.gating, p.gating);
    if (p.selection_bias_std > 0) set("--selection-bias-std", a.spec.selection_bias_std, p.selection_bias_std);
    if (p.weights_norm && !given("--expert-weights-norm")) a.spec.expert_weights_norm = true;
    set("--nextn-layers", a.spec.n_nextn, p.nextn);
  }
  if (p.rope_orig_ctx > 0) set("--rope-orig-ctx", a.spec.rope_orig_ctx, p.rope_orig_ctx);
  for (const Gemma4Preset& g : k_gemma4_presets) {
    if (std::string(g.name) != p.name) continue;
    set("--swa-period", a.spec.swa_period, g.swa_period);
    set("--head-dim-swa", a.spec.head_dim_swa, g.head_dim_swa);
    set("--per-layer-embd", a.spec.n_embd_per_layer, g.per_layer);
    if (!given("--double-wide-ffn")) a.spec.double_wide_ffn = g.double_wide;
    // The storing layers' share of the preset, in whole periods (the last storing layer global).
    const int64_t period = a.spec.swa_period, n = a.spec.n_layer;
    const int64_t kv_periods = std::max<int64_t>(1, ((n - g.shared * n / p.n_layer) + period / 2) / period);
    set("--shared-kv-layers", a.spec.shared_kv_layers, std::max<int64_t>(0, n - kv_periods * period));
    a.spec.final_softcap = given("--final-softcap") ? a.spec.final_softcap : 30.0f;
  }
}

// Appends unused tokens ("<unused_N>") until the vocabulary has n tokens: a model with the
// vocabulary size (and so the embedding and output matrices) of the shape it stands for.
Status pad_vocabulary(tokenizer::Vocabulary& v, int64_t n) {
  const auto have = static_cast<int64_t>(v.tokens.size());
  if (n == 0 || n == have) return {};
  if (n < have) {
    return make_error(ErrorCode::invalid_argument, "--pad-vocab " + std::to_string(n) + " is smaller than the " +
                                                       std::to_string(have) +
                                                       " tokens of the vocabulary; give a larger size or none");
  }
  if (n > (int64_t{1} << 24)) return make_error(ErrorCode::invalid_argument, "--pad-vocab is at most 16777216");
  for (int64_t i = have; i < n; ++i) {
    v.tokens.push_back("<unused_" + std::to_string(i - have) + ">");
    v.scores.push_back(0.0f);
    v.types.push_back(static_cast<int32_t>(tokenizer::TokenType::unused));
  }
  return {};
}

template <typename Given>
int run_mkmodel(MkmodelArgs a, const Given& given) {
  if (a.spec.broken == "list") {
    for (const auto& v : model::broken_variants()) {
      std::printf("%-26s %s\n", std::string(v.name).c_str(), std::string(v.what).c_str());
    }
    return 0;
  }
  if (!a.preset.empty()) {
    const Preset* p = find_preset(a.preset);
    if (p == nullptr) {
      return report(
          make_error(ErrorCode::invalid_argument, "unknown preset '" + a.preset + "'; choose one of " + preset_list()));
    }
    apply_preset(*p, a, given);
  }
  auto type = model::parse_file_type(a.type);
  if (!type)
    return report(make_error(ErrorCode::invalid_argument,
                             "unknown type '" + a.type + "'; choose one of " + model::file_type_list()));
  a.spec.type = *type;
  if (a.out.empty()) {
    // Default: the data directory's models/ folder, where the app lists models.
    const auto dir = storage::resolve_data_dir(a.data_dir) / "models";
    if (Status st = storage::ensure_dir(dir); !st.ok()) return report(st.error());
    a.out = (dir / ((a.preset.empty() ? "random" : a.preset) + "-" + a.type + ".gguf")).string();
  }
  auto vocab = make_vocabulary(a.vocab_from, a.corpus, a.n_vocab, a.spec.chat_template);
  if (!vocab.ok()) return report(vocab.error());
  if (Status st = pad_vocabulary(*vocab, a.pad_vocab); !st.ok()) return report(st.error());
  Progress bar("writing " + a.out, a.quiet);
  auto st = model::write_random_model(a.spec, *vocab, a.out, [&](size_t done, size_t total) {
    bar.update(total ? static_cast<double>(done) / static_cast<double>(total) : 1.0);
  });
  if (!st.ok()) return report(st.error());
  bar.done();
  return 0;
}

}  // namespace

Result<std::string> ensure_demo_model(const std::string& data_dir, bool quiet) {
  const auto path = app::demo_model_path(data_dir);
  if (std::filesystem::exists(path) && gguf::GgufFile::open(path.string()).ok()) return path.string();
  if (!quiet) {
    std::fprintf(stderr, "building the demo model (random weights, vocabulary trained on kvchat's own text) at %s\n",
                 path.c_str());
  }
  Progress bar("demo model", quiet);
  auto built = app::ensure_demo_model(data_dir, [&](double f) { bar.update(f); });
  if (!built.ok()) return built.error();
  bar.done();
  return built;
}

void register_mkmodel(CLI::App& app) {
  auto a = std::make_shared<MkmodelArgs>();
  auto* cmd = app.add_subcommand(
      "mkmodel",
      "write a llama-family GGUF (llama, llama3, qwen2, qwen3, qwen3moe, gpt-oss, deepseek2, phi3, smollm3, gemma2, "
      "gemma3, gemma4, lfm2) with "
      "random "
      "weights of any shape and type");
  cmd->add_option("-o,--output", a->out, "GGUF file to write (default: DATA_DIR/models/PRESET-TYPE.gguf)");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->add_option("--preset", a->preset,
                  "a released model's shape (architecture, sizes, vocabulary size, tying; options given too "
                  "override it): " +
                      preset_list());
  cmd->add_option(
         "--type", a->type,
         "weight type: q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, f16, bf16, f32; "
         "mxfp4_moe (experts MXFP4, the rest Q8_0)")
      ->capture_default_str();
  cmd->add_option("--dim", a->spec.n_embd, "model width")->capture_default_str();
  cmd->add_option("--layers", a->spec.n_layer, "transformer blocks")->capture_default_str();
  cmd->add_option("--heads", a->spec.n_head, "attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", a->spec.n_head_kv, "KV heads (1 = MQA)")->capture_default_str();
  cmd->add_option("--ffn", a->spec.n_ff, "feed-forward width")->capture_default_str();
  cmd->add_option("--ctx", a->spec.n_ctx, "context length")->capture_default_str();
  cmd->add_option(
         "--arch", a->spec.arch,
         "architecture: llama; llama3 (llama with rope_freqs.weight); qwen2 (split-halves rope, Q/K/V "
         "biases); qwen3 (split halves, per-head Q/K norms); phi3 (fused QKV and gate/up, LongRoPE); "
         "smollm3 (no rope in every fourth layer); qwen3moe (qwen3 with a mixture-of-experts FFN); gpt-oss (biases, "
         "attention sinks, local and global layers, YaRN, biased experts with a clamped SwiGLU); deepseek2 (multi-head "
         "latent attention, dense leading layers, shared experts); gemma2 (scaled embeddings, post-norms, GeGLU, local "
         "layers alternating with global ones, soft-capping); gemma3 (gemma2 with Q/K norms, five local "
         "layers per global one, local rope base 10000, no caps); lfm2 (gated short convolutions with a recurrent "
         "state, and GQA attention with Q/K norms at layers 2, 5, 8, 10, 12, 14 of every 16)")
      ->capture_default_str();
  cmd->add_option("--conv-taps", a->spec.shortconv_l_cache, "lfm2: the conv layers' taps (shortconv.l_cache)")
      ->capture_default_str();
  cmd->add_option("--head-dim", a->spec.head_dim,
                  "qwen3, qwen3moe, gpt-oss, gemma2, gemma3: the head size when it is not --dim / --heads");
  cmd->add_option("--experts", a->spec.n_expert, "qwen3moe, gpt-oss: experts per layer")->capture_default_str();
  cmd->add_option("--experts-used", a->spec.n_expert_used, "qwen3moe, gpt-oss: experts each token runs")
      ->capture_default_str();
  cmd->add_option("--expert-ffn", a->spec.n_ff_exp, "qwen3moe, gpt-oss: one expert's feed-forward width")
      ->capture_default_str();
  cmd->add_option("--kv-lora-rank", a->spec.kv_lora_rank, "deepseek2: the K/V latent's width")->capture_default_str();
  cmd->add_option("--q-lora-rank", a->spec.q_lora_rank, "deepseek2: the Q latent's width (0: attn_q directly)")
      ->capture_default_str();
  cmd->add_option("--mla-nope", a->spec.mla_nope, "deepseek2: a query head's part without rope")->capture_default_str();
  cmd->add_option("--rope-dim", a->spec.mla_rope, "deepseek2: the rope part of a query head and of the latent row")
      ->capture_default_str();
  cmd->add_option("--mla-value", a->spec.mla_value, "deepseek2: a head's value width after v_b")->capture_default_str();
  cmd->add_option("--dense-layers", a->spec.n_dense_lead, "deepseek2: leading layers with a dense FFN (--ffn wide)")
      ->capture_default_str();
  cmd->add_option("--shared-experts", a->spec.n_expert_shared, "deepseek2: shared experts (each --expert-ffn wide)")
      ->capture_default_str();
  cmd->add_option("--gating", a->spec.gating, "deepseek2: expert gating, 1 softmax or 2 sigmoid")
      ->capture_default_str();
  cmd->add_option("--selection-bias-std", a->spec.selection_bias_std,
                  "deepseek2: exp_probs_b (the selection-only bias) near-normal with this deviation (0: none)")
      ->capture_default_str();
  cmd->add_option("--expert-weights-scale", a->spec.expert_weights_scale, "deepseek2: the routed weights' scale")
      ->capture_default_str();
  cmd->add_flag("--expert-weights-norm", a->spec.expert_weights_norm, "deepseek2: normalise the chosen weights");
  cmd->add_option("--nextn-layers", a->spec.n_nextn,
                  "deepseek2: multi-token-prediction blocks after the layers (nextn_predict_layers; kvchat "
                  "keeps them unread)")
      ->capture_default_str();
  cmd->add_option("--expert-groups", a->spec.expert_groups,
                  "deepseek2: expert groups for group-limited routing (0: none)")
      ->capture_default_str();
  cmd->add_option("--expert-groups-used", a->spec.expert_groups_used, "deepseek2: groups a token's experts come from")
      ->capture_default_str();
  cmd->add_option("--yarn-log-mul", a->spec.yarn_log_mul,
                  "deepseek2: rope.scaling.yarn_log_multiplier (0.1 mscale_all_dim; with --rope-scale-factor > 1)")
      ->capture_default_str();
  cmd->add_option("--sink-std", a->spec.sink_std, "gpt-oss: standard deviation of the attention sinks around 0")
      ->capture_default_str();
  cmd->add_option("--router-std", a->spec.router_std,
                  "qwen3moe: standard deviation of the router weights (F32); larger is more decisive routing")
      ->capture_default_str();
  cmd->add_option("--expert-std", a->spec.expert_std,
                  "qwen3moe: standard deviation of the experts' matrices (default: --std); larger gives the "
                  "experts a larger share of each layer's output");
  cmd->add_option("--rope-scale-factor", a->spec.rope_scale_factor,
                  "llama3, phi3: the divisor of the low-frequency rope pairs (phi3: of its long factors); gemma3: "
                  "the global layers' linear rope scaling (1: none); gpt-oss: the YaRN factor")
      ->capture_default_str();
  cmd->add_option("--rope-orig-ctx", a->spec.rope_orig_ctx,
                  "llama3, phi3, gpt-oss: the original context the rope factors (gpt-oss: YaRN) extend")
      ->capture_default_str();
  cmd->add_option("--window", a->spec.sliding_window,
                  "attention.sliding_window to write (0: none; gemma2, gemma3, gpt-oss: the local layers' window)")
      ->capture_default_str();
  cmd->add_option("--shared-kv-from-layer", a->spec.shared_kv_from_layer,
                  "kvchat-only test models (llama, gemma2, gemma3): layers from this one on store no K/V and "
                  "read the last earlier layer's of their kind, as Gemma 3n does (0: none)")
      ->capture_default_str();
  cmd->add_option("--head-dim-swa", a->spec.head_dim_swa,
                  "gemma4: the local layers' head size (--head-dim: the global)")
      ->capture_default_str();
  cmd->add_option("--swa-period", a->spec.swa_period, "gemma4: layer l is global when l % period == period - 1")
      ->capture_default_str();
  cmd->add_option("--shared-kv-layers", a->spec.shared_kv_layers,
                  "gemma4: the last N layers store no K/V and read the last local / global storing layer's")
      ->capture_default_str();
  cmd->add_option("--per-layer-embd", a->spec.n_embd_per_layer, "gemma4: per-layer embedding width (0: none)")
      ->capture_default_str();
  cmd->add_flag("--double-wide-ffn", a->spec.double_wide_ffn, "gemma4: the shared layers' FFN is 2 --ffn wide");
  cmd->add_flag("--k-eq-v", a->spec.k_eq_v, "gemma4: the global layers have no attn_v (V is K's projection)");
  cmd->add_option("--rope-base-swa", a->spec.rope_freq_base_swa, "gemma4: the local layers' rope base")
      ->capture_default_str();
  cmd->add_option("--attn-softcap", a->spec.attn_softcap, "gemma2: attn_logit_softcapping")->capture_default_str();
  cmd->add_option("--final-softcap", a->spec.final_softcap, "gemma2, gemma4: final_logit_softcapping")
      ->capture_default_str();
  cmd->add_option("--rope-base", a->spec.rope_freq_base, "rope frequency base")->capture_default_str();
  cmd->add_flag("--tied", a->spec.tied, "no output.weight: the output layer reuses the token embeddings");
  cmd->add_option("--seed", a->spec.seed, "weights seed (the file depends only on the options)")->capture_default_str();
  cmd->add_option("--std", a->spec.weight_std, "standard deviation of the matrices' weights (near-normal)")
      ->capture_default_str();
  cmd->add_option("--qk-std", a->spec.qk_std,
                  "standard deviation of attn_q / attn_k (default: --std); larger is sharper attention");
  cmd->add_option(
         "--k-outliers", a->spec.k_outliers,
         "outlier key channels per KV head (chosen from --seed): their attn_k rows are --k-outlier-scale times larger")
      ->capture_default_str();
  cmd->add_option("--k-outlier-scale", a->spec.k_outlier_scale, "how much larger the outlier key channels are")
      ->capture_default_str();
  cmd->add_option("--norm-std", a->spec.norm_std, "standard deviation of the norm weights around 1")
      ->capture_default_str();
  cmd->add_option("--qk-norm-mean", a->spec.qk_norm_mean,
                  "qwen3, gemma3: the Q/K norm weights' mean (larger: sharper attention)")
      ->capture_default_str();
  cmd->add_option("--bias-std", a->spec.bias_std, "standard deviation of qwen2's Q/K/V biases (gpt-oss: every bias)")
      ->capture_default_str();
  auto* vf = cmd->add_option("--vocab-from", a->vocab_from,
                             "copy the tokenizer of this GGUF (a model or a vocabulary-only file)");
  cmd->add_option("--corpus", a->corpus, "train the vocabulary on this text (default: assets/demo/corpus.txt)")
      ->excludes(vf);
  cmd->add_option("--vocab", a->n_vocab, "vocabulary size when training")->capture_default_str()->excludes(vf);
  cmd->add_option("--pad-vocab", a->pad_vocab,
                  "pad the vocabulary with unused tokens to this many (a preset pads to its model's size)");
  cmd->add_option("-t,--threads", a->spec.n_threads, "threads (default: one per physical core)");
  cmd->add_flag("-q,--quiet", a->quiet, "no progress on stderr");
  // Hidden, for tests: a file that parses but is not a usable model (tests/app/test_hostile_models.cpp).
  cmd->add_option("--break", a->spec.broken, "write this broken variant of the model; 'list' lists them")->group("");
  cmd->callback([a, cmd] {
    const auto given = [cmd](const char* option) { return cmd->count(option) > 0; };
    if (int rc = run_mkmodel(*a, given); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

// kvchat-cli inspect: a model's metadata, tensors, weight bytes, KV cost and memory estimate, or why it cannot run.
#include <cstdio>
#include <map>
#include <type_traits>
#include <variant>

#include "app/cli/cli_common.h"
#include "core/gguf/gguf_file.h"
#include "core/kv/kv_format.h"
#include "core/model/model.h"
#include "core/model/model_check.h"
#include "core/model/model_config.h"
#include "core/tokenizer/tokenizer.h"

namespace kvc::cli {

namespace {

// "1 local layer (window 32) and 1 global": Gemma's and gpt-oss's layer kinds.
std::string local_and_global(const model::ModelConfig& c, const std::string& window_note) {
  const int64_t local = c.n_local_layers();
  return std::to_string(local) + (local == 1 ? " local layer" : " local layers") + " (window " +
         std::to_string(c.local_window) + window_note + ") and " + std::to_string(c.n_layer - local) + " global";
}

std::string num0(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

// One line for a metadata value: scalars as they are, strings cut at 60 bytes (control
// characters escaped), arrays as their type, length and first few elements.
std::string format_value(const gguf::Value& v) {
  auto clip = [](const std::string& s) {
    std::string out;
    for (char c : s.substr(0, 60)) out += (c == '\n') ? std::string("\\n") : std::string(1, c);
    return s.size() > 60 ? "\"" + out + "\"... (" + std::to_string(s.size()) + " bytes)" : "\"" + out + "\"";
  };
  return std::visit(
      [&](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return clip(x);
        } else if constexpr (std::is_same_v<T, gguf::Array>) {
          std::string s = "[" + std::to_string(x.size()) + " x " + gguf::to_string(x.element_type()) + "]";
          std::visit(
              [&](const auto& elems) {
                using E = typename std::decay_t<decltype(elems)>::value_type;
                if constexpr (std::is_arithmetic_v<E> && !std::is_same_v<E, bool>) {
                  for (size_t i = 0; i < elems.size() && i < 4; ++i) s += " " + std::to_string(elems[i]);
                } else if constexpr (std::is_same_v<E, std::string>) {
                  for (size_t i = 0; i < elems.size() && i < 4; ++i) s += " " + clip(elems[i]);
                }
                if (elems.size() > 4) s += " ...";
              },
              x.elements());
          return s;
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else {
          return std::to_string(x);
        }
      },
      v.storage());
}

struct InspectArgs {
  std::string model;
  int64_t n_ctx = 4096;
  bool tensors = false;
  std::string data_dir;
};

// The tokenizer summary: kind, size, BOS/EOS and the end-of-generation tokens, or why it cannot load.
void print_tokenizer(const gguf::GgufFile& f) {
  auto vocab = model::vocabulary_from_gguf(f);
  auto tok = vocab.ok() ? tokenizer::Tokenizer::create(*vocab) : Result<tokenizer::Tokenizer>(vocab.error());
  if (!tok.ok()) {
    std::printf("\ntokenizer: cannot load: %s\n", tok.error().what().c_str());
    return;
  }
  auto name = [&](int32_t id) { return id < 0 ? std::string("none") : "\"" + std::string(tok->piece(id)) + "\""; };
  std::string eog;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    if (tok->is_end_of_generation(id)) eog += (eog.empty() ? "" : " ") + name(id);
  }
  if (vocab->model == "gpt2") {
    std::printf("\ntokenizer: byte-level BPE, pre-tokenizer %s, %d tokens, %zu merges", vocab->pre.c_str(),
                tok->n_vocab(), vocab->merges.size());
  } else {
    std::printf("\ntokenizer: SentencePiece, %d tokens", tok->n_vocab());
  }
  std::printf("; BOS %s%s, EOS %s; a reply ends at: %s\n", name(tok->bos()).c_str(), tok->wants_bos() ? " (added)" : "",
              name(tok->eos()).c_str(), eog.empty() ? "none" : eog.c_str());
  auto tmpl = model::chat_template_from_gguf(f, *tok);
  std::printf("chat template: %s\n", tmpl.ok() ? tmpl->describe().c_str() : tmpl.error().what().c_str());
}

int run_inspect(InspectArgs a) {
  a.model = resolve_model_path(a.model, a.data_dir);
  auto file = gguf::GgufFile::open(a.model);
  if (!file.ok()) return report(file.error());
  const gguf::GgufFile& f = *file;
  std::printf("file:      %s (GGUF v%u, %s)\n", a.model.c_str(), f.version(),
              human_bytes(static_cast<double>(f.file_bytes())).c_str());
  std::printf("\nmetadata (%zu keys):\n", f.metadata().size());
  for (const auto& kv : f.metadata()) { std::printf("  %-44s %s\n", kv.key.c_str(), format_value(kv.value).c_str()); }
  size_t weight_bytes = 0;
  std::map<std::string, std::pair<size_t, size_t>> by_type;  // name -> (count, bytes)
  if (a.tensors) std::printf("\ntensors (%zu):\n", f.tensors().size());
  for (const auto& t : f.tensors()) {
    weight_bytes += t.n_bytes;
    auto& e = by_type[kernels::dtype_name(t.type)];
    ++e.first;
    e.second += t.n_bytes;
    if (a.tensors) {
      std::string shape;
      for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? " x " : "") + std::to_string(t.shape[i]);
      std::printf("  %-32s %-5s %-18s %s\n", t.name.c_str(), kernels::dtype_name(t.type), shape.c_str(),
                  human_bytes(static_cast<double>(t.n_bytes)).c_str());
    }
  }
  std::printf("\nweights:   %zu tensors, %s:", f.tensors().size(),
              human_bytes(static_cast<double>(weight_bytes)).c_str());
  for (const auto& [name, e] : by_type) {
    std::printf(" %s x%zu (%s)", name.c_str(), e.first, human_bytes(static_cast<double>(e.second)).c_str());
  }
  std::printf("\n");
  print_tokenizer(f);

  if (f.tensors().empty()) {
    std::printf("\nmodel:     none: a vocabulary-only file (use it with tokenize, or mkmodel --vocab-from)\n");
    return 0;
  }
  // Everything loading would check, so a file inspect accepts is one kvchat can run.
  auto checked = model::check_model_file(f);
  if (!checked.ok()) {
    std::printf("\nmodel:     cannot run: %s\n", checked.error().what().c_str());
    return report(make_error(checked.error().code, a.model + ": " + checked.error().message));
  }
  const model::ModelConfig& c = checked->config;
  std::printf(
      "\nmodel:     %s%s%s, %lld layers, width %lld, %lld heads / %lld kv heads (%s), head %lld, FFN %lld, vocab %lld\n",
      c.arch.c_str(), c.name.empty() ? "" : " ", c.name.c_str(), static_cast<long long>(c.n_layer),
      static_cast<long long>(c.n_embd), static_cast<long long>(c.n_head), static_cast<long long>(c.n_head_kv),
      c.n_head_kv == 1          ? "MQA"
      : c.n_head_kv == c.n_head ? "MHA"
                                : "GQA",
      static_cast<long long>(c.head_dim), static_cast<long long>(c.n_ff), static_cast<long long>(c.n_vocab));
  std::printf("           context %lld, rope base %.0f, %d rotary dims (%s), rms eps %g%s%s\n",
              static_cast<long long>(c.n_ctx_train), static_cast<double>(c.rope.freq_base), c.rope.n_rot,
              c.rope.interleaved ? "adjacent pairs" : "split halves", static_cast<double>(c.rms_eps),
              c.qkv_bias ? ", QKV bias" : "", c.tied_embeddings ? ", tied embeddings" : "");
  std::string features;
  if (c.qk_norm) features += ", Q/K norms";
  if (f.find_tensor("rope_freqs.weight") && !c.gemma4) features += ", rope factors (Llama 3)";
  if (f.find_tensor("rope_factors_long.weight"))
    features += ", LongRoPE (original context " + std::to_string(c.n_ctx_orig) + ")";
  if (c.fused_qkv) features += ", fused QKV";
  if (c.fused_gate_up) features += ", fused gate/up";
  if (c.no_rope_every) features += ", no rope in every " + std::to_string(c.no_rope_every) + "th layer";
  if (c.sliding_window) features += ", sliding window " + std::to_string(c.sliding_window);
  if (c.gemma) {
    features += ", scaled embeddings, post-norms, GeGLU";
    if (c.n_local_layers() > 0) {
      features += ", " + local_and_global(c, ", rope base " + num0(c.rope_local.freq_base));
    }
    if (c.attn_softcap > 0) features += ", attention soft-cap " + num0(c.attn_softcap);
    if (c.final_softcap > 0) features += ", logit soft-cap " + num0(c.final_softcap);
    if (c.rope.freq_scale != 1.0f) features += ", global rope scaled 1/" + num0(1.0f / c.rope.freq_scale);
  }
  if (c.gpt_oss) {
    features += ", attention sinks, output bias, " + local_and_global(c, "") + ", clamped SwiGLU experts";
    if (c.rope.yarn) {
      features += ", YaRN rope " + num0(1.0f / c.rope.freq_scale) + "x over " + std::to_string(c.n_ctx_orig);
    }
  }
  if (c.gemma4) {
    features += ", heads of " + std::to_string(c.head_dim_local) + " (local) and " + std::to_string(c.head_dim) +
                " (global), unscaled scores, V norm, layer output scale";
    if (f.find_tensor("rope_freqs.weight")) features += ", proportional rope on the global layers (rope_freqs)";
    if (c.n_embd_per_layer > 0) {
      const gguf::TensorInfo* t = f.find_tensor("per_layer_token_embd.weight");
      features +=
          ", per-layer embeddings of " + std::to_string(c.n_embd_per_layer) +
          (t ? " (table " + human_bytes(static_cast<double>(t->n_bytes)) + ", memory-mapped, one row read a token)"
             : std::string());
    }
    if (!c.layer_ff.empty() && c.layer_n_ff(c.n_layer - 1) != c.layer_n_ff(0)) {
      features += ", FFN " + std::to_string(c.layer_n_ff(c.n_layer - 1)) + " wide on the shared layers";
    }
    if (c.shared_kv_from_layer > 0) {
      features += ", layers " + std::to_string(c.shared_kv_from_layer) +
                  "+ read the K/V of the last local and the last global storing layer (attention.shared_kv_layers)";
    }
  } else if (c.shared_kv_from_layer > 0) {
    features +=
        ", layers " + std::to_string(c.shared_kv_from_layer) + "+ read an earlier layer's K/V (kvchat test model)";
  }
  if (!features.empty()) std::printf("           %s\n", features.substr(2).c_str());
  // A mixture of experts: every expert is in memory, a token reads the ones it is routed to.
  if (c.is_moe()) {
    const kernels::MoeRouting& r = c.routing;
    std::string how = r.gating == kernels::MoeGating::softmax   ? "softmax"
                      : r.gating == kernels::MoeGating::sigmoid ? "sigmoid"
                                                                : "softmax over the chosen";
    how += " router";
    if (r.norm_weights) how += ", weights normalised";
    if (r.n_group > 1)
      how += ", best " + std::to_string(r.n_group_used) + " of " + std::to_string(r.n_group) + " groups";
    if (c.n_ff_shexp > 0) how += ", shared experts of width " + std::to_string(c.n_ff_shexp);
    const size_t experts = model::expert_bytes(f, c);
    std::printf("experts:   %lld per layer, %lld per token (width %lld; %s) in %lld of %lld layers\n",
                static_cast<long long>(c.n_expert), static_cast<long long>(c.n_expert_used),
                static_cast<long long>(c.n_ff_exp), how.c_str(), static_cast<long long>(c.n_moe_layers()),
                static_cast<long long>(c.n_layer));
    std::printf("           %s of routed experts, %s of them active per token (all must be in memory)\n",
                human_bytes(static_cast<double>(experts)).c_str(),
                human_bytes(static_cast<double>(model::active_expert_bytes(experts, c))).c_str());
  }
  if (c.n_layer_nextn > 0) {
    std::printf(
        "MTP:       %lld multi-token-prediction %s after the layers (blk.%lld%s), kept in the file and not "
        "run (speculative decoding does not use them yet)\n",
        static_cast<long long>(c.n_layer_nextn), c.n_layer_nextn == 1 ? "block" : "blocks",
        static_cast<long long>(c.n_layer),
        c.n_layer_nextn == 1 ? "" : ("-" + std::to_string(c.n_layer + c.n_layer_nextn - 1)).c_str());
  }
  const int group = kv::kv_group_for_head_dim(c.head_dim);
  const std::string scale_note = c.mla && group > 0 ? "; int8: one scale per " + std::to_string(group) + " elements"
                                 : group > 0
                                     ? "; int8/int4 and their rotated h forms: one scale per " + std::to_string(group) +
                                           " elements; int4c K: one per channel and block of 16 positions"
                                     : "";
  if (c.n_recurrent_layers() > 0) {
    std::printf(
        "\nKV cache per token (%lld of %lld layers store K and V; the %lld conv layers keep a state a sequence%s):\n",
        static_cast<long long>(c.n_layer - c.n_recurrent_layers()), static_cast<long long>(c.n_layer),
        static_cast<long long>(c.n_recurrent_layers()), scale_note.c_str());
  } else if (c.n_layer_kv() < c.n_layer) {
    std::printf("\nKV cache per token (%lld of %lld layers store K and V, the rest read theirs%s):\n",
                static_cast<long long>(c.n_layer_kv()), static_cast<long long>(c.n_layer), scale_note.c_str());
  } else if (c.mla) {
    std::printf("\nKV cache per token (all %lld layers, one latent row of %lld + %lld rope values each, no V%s):\n",
                static_cast<long long>(c.n_layer), static_cast<long long>(c.kv_lora_rank),
                static_cast<long long>(c.rope.n_rot), scale_note.c_str());
  } else {
    std::printf("\nKV cache per token (all %lld layers, K and V%s):\n", static_cast<long long>(c.n_layer),
                scale_note.c_str());
  }
  const double f16 = c.kv_bytes_per_token(kv::KvFormat::f16);
  if (c.n_layer_kv() < c.n_layer) {  // what the shared layers would keep if they stored their own
    model::ModelConfig unshared = c;
    unshared.shared_kv_from_layer = 0;
    const double all = unshared.kv_bytes_per_token(kv::KvFormat::f16);
    std::printf("  sharing: %.0f instead of %.0f bytes/token in F16 (saves %.1f%%: %lld layers read another's K/V)\n",
                f16, all, all > 0 ? 100.0 * (1.0 - f16 / all) : 0.0,
                static_cast<long long>(c.n_layer - c.n_layer_kv()));
  }
  // Bytes as the cache lays them out (blocks of 16 positions: int4h's anchors, int4c's per-channel rows).
  constexpr int k_block_tokens = 16;
  for (kv::KvFormat fmt : kv::k_kv_formats) {
    const std::string name(kv::kv_format_name(fmt));
    // A model with recurrent layers: the attention layers' group (the conv states are below).
    const auto layout = c.n_recurrent_layers() > 0 ? c.kv_group_layout(0, k_block_tokens, fmt, fmt)
                                                   : c.kv_layout(k_block_tokens, fmt, fmt);
    if (!layout.ok()) {
      if (c.mla) {
        std::printf("  %-5s not available for a latent (MLA) cache yet (use f16 or int8)\n", name.c_str());
      } else if (c.n_recurrent_layers() > 0) {
        std::printf("  %-5s not available: this model's recurrent layers (a second KV group) cannot hold it yet\n",
                    name.c_str());
      } else {
        std::printf("  %-5s not available: head size %lld is not a multiple of 8 (use f16)\n", name.c_str(),
                    static_cast<long long>(c.head_dim));
      }
      continue;
    }
    if (c.n_kv_groups() > 1 && !c.kv_group_layout(0, k_block_tokens, fmt, fmt).ok()) {
      std::printf("  %-5s not available: this model's %s cannot hold it yet\n", name.c_str(),
                  c.n_recurrent_layers() > 0    ? "recurrent layers (a second KV group)"
                  : c.n_kv_storing_groups() > 1 ? "local-attention layers (a second KV group)"
                                                : "shared-KV layers");
      continue;
    }
    double b = static_cast<double>(layout->block_bytes) / k_block_tokens;
    if (c.head_dim_local > 0) {  // gemma4: each storing group's layout has its own head size
      b = 0.0;
      for (int g = 0; g < c.n_kv_storing_groups(); ++g) {
        auto gl = c.kv_group_layout(g, k_block_tokens, fmt, fmt);
        if (gl.ok()) b += static_cast<double>(gl->block_bytes) / k_block_tokens;
      }
    }
    std::printf("  %-5s %10.0f bytes/token  (%.3fx F16)   %lld tokens: %s\n", name.c_str(), b, b / f16,
                static_cast<long long>(a.n_ctx), human_bytes(b * static_cast<double>(a.n_ctx)).c_str());
  }
  if (c.mla) {  // what multi-head attention with the same heads would keep: K and V per head
    const double mha = c.kv_bytes_per_token_mha(2.0);
    std::printf(
        "  as MHA  %10.0f bytes/token  (%.2fx the latent; %lld heads x (%lld + %lld) x 2 bytes a layer, "
        "what a cache without MLA keeps)\n",
        mha, mha / f16, static_cast<long long>(c.n_head), static_cast<long long>(c.mla_key_head),
        static_cast<long long>(c.mla_value_head));
  }
  // Each KV group with its kind and its bytes per token (docs/ARCHITECTURE.md §3.9).
  const model::KvGroupMap map = c.kv_group_map();
  if (map.groups.size() > 1) {
    std::printf("  KV groups (f16):\n");
    for (size_t g = 0; g < map.groups.size(); ++g) {
      const kv::KvGroupSpec& spec = map.groups[g];
      int64_t head_dim = c.head_dim;  // the group's own (gemma4's local and global heads differ in size)
      for (int64_t l = 0; l < c.n_layer; ++l) {
        if (map.layer_group[static_cast<size_t>(l)] == static_cast<int>(g)) head_dim = c.layer_head_dim(l);
      }
      const double per_token = spec.stores() && spec.kind != kv::KvGroupKind::recurrent
                                   ? 2.0 * static_cast<double>(spec.n_layer * c.n_head_kv * head_dim) * 2.0
                                   : 0.0;
      std::string what = std::to_string(spec.n_layer) + (spec.n_layer == 1 ? " layer" : " layers");
      if (spec.kind == kv::KvGroupKind::window) what += ", window " + std::to_string(spec.window);
      if (spec.kind == kv::KvGroupKind::shared) what += ", reading group " + std::to_string(spec.source) + "'s K/V";
      if (spec.kind == kv::KvGroupKind::recurrent) {  // no K/V: a state a sequence, its snapshot in every block
        what += ", F32 state " + human_bytes(static_cast<double>(spec.state_bytes)) +
                " a sequence, one snapshot of it a block of " + std::to_string(k_block_tokens) + " positions";
      }
      std::printf("    group %zu  %-9s %10.0f bytes/token  (%s)\n", g,
                  std::string(kv::kv_group_kind_name(spec.kind)).c_str(), per_token, what.c_str());
    }
  }
  // Local and global layers apart: what each KV group costs, and what keeping only the window of
  // the local layers saves (kvchat's local group keeps its window per sequence, and on disk only
  // checkpoints at turn boundaries: docs/ARCHITECTURE.md §3.9).
  int64_t n_local = 0;  // of the layers that store K/V
  for (int64_t l = 0; l < c.n_layer_kv(); ++l) n_local += c.layer_is_local(l) ? 1 : 0;
  if (n_local > 0) {
    const double local = c.kv_bytes_per_token_local(2.0), global = c.kv_bytes_per_token_global(2.0);
    const double full = f16 * static_cast<double>(a.n_ctx), aware = c.kv_bytes_window_aware(2.0, a.n_ctx);
    std::printf(
        "  by layer group (f16): %lld local + %lld global layers = %.0f + %.0f bytes/token (local window "
        "%lld)\n",
        static_cast<long long>(n_local), static_cast<long long>(c.n_layer_kv() - n_local), local, global,
        static_cast<long long>(c.local_window));
    std::printf("  window-aware at %lld tokens: %s instead of %s (saves %.1f%%)\n", static_cast<long long>(a.n_ctx),
                human_bytes(aware).c_str(), human_bytes(full).c_str(), full > 0 ? 100.0 * (1.0 - aware / full) : 0.0);
  }
  // Activations for a 256-token prefill batch, plus logits; a MoE layer's tokens copied per chosen
  // expert with their gate, up and output rows.
  const int64_t ffn = c.is_moe() ? c.n_expert_used * (2 * c.n_embd + 3 * c.n_ff_exp) + c.n_expert : 2 * c.n_ff;
  const double act =
      256.0 * 4.0 * static_cast<double>(4 * c.n_embd + 2 * c.q_width() + 2 * c.kv_width() + ffn + c.n_vocab);
  // Recurrent layers: a state a sequence, plus the snapshot each block of the context keeps.
  const auto state = static_cast<double>(c.recurrent_state_bytes());
  const double snapshots = state * static_cast<double>((a.n_ctx + k_block_tokens - 1) / k_block_tokens);
  const double kv_total = f16 * static_cast<double>(a.n_ctx) + snapshots + state;
  std::printf("\nmemory estimate at %lld tokens of context: weights %s + KV (f16) %s + activations %s = %s\n",
              static_cast<long long>(a.n_ctx), human_bytes(static_cast<double>(weight_bytes)).c_str(),
              human_bytes(kv_total).c_str(), human_bytes(act).c_str(),
              human_bytes(static_cast<double>(weight_bytes) + kv_total + act).c_str());
  if (state > 0) {
    std::printf(
        "           the KV holds %s of attention K/V, %s of conv state snapshots (%s a block) and the live "
        "state %s\n",
        human_bytes(f16 * static_cast<double>(a.n_ctx)).c_str(), human_bytes(snapshots).c_str(),
        human_bytes(state).c_str(), human_bytes(state).c_str());
  }
  if (n_local > 0) {
    const double aware = c.kv_bytes_window_aware(2.0, a.n_ctx);
    std::printf("           with a window-aware cache: KV (f16) %s, total %s\n", human_bytes(aware).c_str(),
                human_bytes(static_cast<double>(weight_bytes) + aware + act).c_str());
  }
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  auto* cmd = app.add_subcommand("inspect", "show a model's metadata, tensors, KV bytes per token and memory needs");
  cmd->add_option("model", a->model, "GGUF model file")->required();
  cmd->add_option("-c,--ctx-size", a->n_ctx, "context length for the memory estimate")->capture_default_str();
  cmd->add_flag("--tensors", a->tensors, "list every tensor");
  add_data_dir_option(*cmd, a->data_dir);
  cmd->callback([a] {
    if (int rc = run_inspect(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

// kvchat-cli chat: an interactive conversation that reuses its KV cache across turns.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/cli/cli_engine.h"
#include "app/common/chat_turn.h"
#include "app/common/chat_window.h"
#include "app/common/reasoning_marker.h"
#include "core/chat/reasoning.h"
#include "core/model/context_budget.h"

namespace kvc::cli {

namespace {

struct ChatArgs {
  ModelOptions model;
  std::string system;
  std::string kv_type = "f16";
  sampling::GenerateOptions generation;
  bool summary = false;
};

// What the turns cost, for --summary: new tokens (message segment + answer) against the prompt
// tokens computed; recomputed = computed less the new message (what the cache did not serve).
struct TurnTotals {
  int64_t n_turns = 0, n_cuts = 0, n_message = 0, n_answer = 0, n_computed = 0, n_recomputed = 0;

  void add(int64_t message, int64_t answer, int64_t computed, bool cut) {
    ++n_turns;
    n_cuts += cut;
    n_message += message;
    n_answer += answer;
    n_computed += computed;
    n_recomputed += std::max<int64_t>(0, computed - message);
  }
  void print() const {
    const double n = static_cast<double>(std::max<int64_t>(n_turns, 1));
    const double fresh = static_cast<double>(n_message + n_answer) / n;
    const double recomputed = static_cast<double>(n_recomputed) / n;
    std::printf(
        "summary: %lld turns, %lld context cuts | new tokens per turn %.1f (message %.1f + answer %.1f) | "
        "prompt tokens computed per turn %.1f | recomputed per turn %.1f (%.2fx new)\n",
        static_cast<long long>(n_turns), static_cast<long long>(n_cuts), fresh, static_cast<double>(n_message) / n,
        static_cast<double>(n_answer) / n, static_cast<double>(n_computed) / n, recomputed,
        fresh > 0 ? recomputed / fresh : 0.0);
  }
};

constexpr const char* k_help =
    "Type a message and press Enter. Commands: /reset (new conversation), /stats, /exit (or Ctrl-D).\n";

int run_chat(ChatArgs a) {
  const bool demo = a.model.model.empty();
  auto kv_format = parse_kv_type("--kv-type", a.kv_type);
  if (!kv_format.ok()) return report(kv_format.error());
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  const tokenizer::Tokenizer& tok = m.tokenizer();
  const chat::ChatTemplate& tmpl = m.chat_template();
  auto engine = CliEngine::create(m, context_length(a.model, m), a.model.n_batch, *kv_format);
  if (!engine.ok()) return report(engine.error());

  const bool tty = ::isatty(STDIN_FILENO) != 0;
  const bool out_tty = ::isatty(STDOUT_FILENO) != 0;
  std::fprintf(
      stderr, "kvchat: %s | chat template: %s | context %lld (trained %lld; KV %s in %s, --ctx-memory %lld MiB) | %s\n",
      m.path().c_str(), tmpl.describe().c_str(), static_cast<long long>(engine->n_ctx()),
      static_cast<long long>(m.config().n_ctx_train),
      human_bytes(m.config().kv_bytes_per_token(*kv_format) * static_cast<double>(engine->n_ctx())).c_str(),
      std::string(kv::kv_format_name(*kv_format)).c_str(), static_cast<long long>(a.model.ctx_memory_mib),
      std::string(m.backend().name()).c_str());
  if (demo) {
    std::fprintf(
        stderr,
        "This is the built-in demo model: random weights, so its replies are gibberish. It shows the\n"
        "engine and the KV cache at work. For real answers open a GGUF model: kvchat-cli chat -m MODEL.gguf\n");
  }
  if (tty) std::fprintf(stderr, "%s", k_help);

  engine::RequestOptions opt = a.generation;
  opt.stop_strings = tmpl.stop_strings();
  chat::WindowPolicy policy;
  policy.n_ctx = engine->n_ctx();
  policy.n_reserve = chat::answer_reserve(policy.n_ctx, opt.max_tokens);
  struct Stored {
    std::string role, text;
    std::vector<int32_t> tokens;  // the stream's tokens of this message (source of truth)
  };
  std::vector<Stored> stored;   // the conversation, never truncated
  size_t cut = 0;               // the model's view begins at stored[cut]
  int64_t conversation_id = 1;  // the engine's sequence for it; /reset starts another
  TurnTotals totals;
  std::string line;
  for (;;) {
    if (tty) std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      stored.clear();
      cut = 0;
      ++conversation_id;
      std::fprintf(stderr, "(new conversation)\n");
      continue;
    }
    if (line == "/stats") {
      int64_t n = 0;
      for (const Stored& s : stored) n += static_cast<int64_t>(s.tokens.size());
      std::fprintf(stderr, "conversation: %zu messages, %lld tokens; context %lld%s%s\n", stored.size(),
                   static_cast<long long>(n), static_cast<long long>(engine->n_ctx()), cut > 0 ? "; " : "",
                   chat::outside_context_note(static_cast<int64_t>(cut)).c_str());
      continue;
    }
    if (line.empty()) continue;
    // Only the new segment is rendered and tokenized; the history's tokens are reused as is.
    std::vector<chat::ChatMessage> history;
    for (const Stored& s : stored) history.emplace_back(s.role, s.text);
    auto seg = app::build_user_turn(tok, tmpl, a.system, history, line);
    if (!seg.ok()) {
      report(seg.error());
      continue;
    }
    // The template shows the last reply without its reasoning: so does the stream (the text keeps it).
    if (seg->reply_tokens) stored.back().tokens = *seg->reply_tokens;
    std::vector<app::StreamMessage> messages;
    for (const Stored& s : stored) messages.push_back({s.role, s.text, s.tokens});
    messages.push_back({"user", line, seg->tokens});
    auto window = app::plan_chat_window(tok, tmpl, a.system, messages, policy, cut);
    if (!window.ok()) {
      report(window.error());
      continue;
    }
    if (window->moved)
      std::fprintf(stderr, "(%s)\n", chat::outside_context_note(static_cast<int64_t>(window->first)).c_str());
    // The reply's opening (DeepSeek-R1's "<think>\n") ends the prompt and starts the reply's tokens.
    std::vector<int32_t> prompt = window->prompt;
    prompt.insert(prompt.end(), seg->opening_tokens.begin(), seg->opening_tokens.end());
    // Reasoning is marked: dimmed on a terminal, "[reasoning] " lines in a pipe.
    const std::string prompt_end = seg->text + seg->opening_text;
    const std::string_view seg_text = std::string_view(prompt_end).substr(0, prompt_end.find_last_not_of('\n') + 1);
    const bool starts_open = seg_text.ends_with(chat::k_think_open);
    app::ReasoningMarker marker(out_tty, starts_open);
    auto r = engine->run(conversation_id, prompt, opt, [&marker](std::string_view piece) {
      const std::string marked = marker.feed(piece);
      std::fwrite(marked.data(), 1, marked.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    if (!r.ok()) {
      report(r.error());
      return 1;
    }
    const std::string rest = marker.finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    cut = window->first;
    stored.push_back({"user", line, seg->tokens});
    std::vector<int32_t> reply_tokens = seg->opening_tokens;
    reply_tokens.insert(reply_tokens.end(), r->tokens.begin(), r->tokens.end());
    stored.push_back({"assistant", r->text, std::move(reply_tokens)});
    // An end-of-turn token is not in the stream; the next segment starts with the template's
    // closing text instead (build_user_turn), so the stream stays identical to a full render.
    const auto n_prompt = static_cast<int64_t>(prompt.size());
    totals.add(static_cast<int64_t>(seg->tokens.size() + seg->opening_tokens.size()),
               static_cast<int64_t>(r->tokens.size()), n_prompt - r->prefix.n_cached, window->moved);
    if (!a.model.quiet) {
      std::fprintf(stderr,
                   "[%zu tokens | TTFT %.0f ms | %.1f tok/s | prompt %lld tokens, %lld from cache (T0 %lld, T1 %lld, "
                   "T2 %lld), %lld computed]\n",
                   r->tokens.size(), r->ttft_ms, decode_tokens_per_s(*r), static_cast<long long>(n_prompt),
                   static_cast<long long>(r->prefix.n_cached), static_cast<long long>(r->prefix.n_from_tier[0]),
                   static_cast<long long>(r->prefix.n_from_tier[1]), static_cast<long long>(r->prefix.n_from_tier[2]),
                   static_cast<long long>(n_prompt - r->prefix.n_cached));
    }
  }
  if (a.summary) totals.print();
  return 0;
}

}  // namespace

void register_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "chat interactively; the KV cache is reused across turns");
  add_model_options(*cmd, a->model, false);
  cmd->add_option("--system", a->system, "system prompt");
  add_kv_type_option(*cmd, a->kv_type);
  add_generate_options(*cmd, a->generation, "most tokens per reply; -1 = until the end of the reply");
  cmd->add_flag("--summary", a->summary,
                "at the end, print what the turns cost on stdout: new tokens against prompt tokens computed per turn");
  cmd->callback([a] {
    if (int rc = run_chat(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

// kvchat-cli chat: an interactive conversation that reuses its KV cache across turns.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "app/cli/cli_common.h"
#include "app/common/chat_turn.h"
#include "app/cli/cli_engine.h"

namespace kvc::cli {

namespace {

struct ChatArgs {
  ModelOptions model;
  std::string system;
  int64_t n_predict = 256;
  sampling::SamplingParams sampling;
};

constexpr const char* k_help =
    "Type a message and press Enter. Commands: /reset (new conversation), /stats, /exit (or Ctrl-D).\n";

int run_chat(ChatArgs a) {
  const bool demo = a.model.model.empty();
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  const tokenizer::Tokenizer& tok = m.tokenizer();
  const chat::ChatTemplate& tmpl = m.chat_template();
  auto engine = CliEngine::create(m, context_length(a.model, m), a.model.n_batch);
  if (!engine.ok()) return report(engine.error());

  const bool tty = ::isatty(STDIN_FILENO) != 0;
  std::fprintf(stderr, "kvchat: %s | chat template: %s | context %lld | %s\n", m.path().c_str(),
               tmpl.describe().c_str(), static_cast<long long>(engine->n_ctx()),
               std::string(m.backend().name()).c_str());
  if (demo) {
    std::fprintf(stderr,
                 "This is the built-in demo model: random weights, so its replies are gibberish. It shows the\n"
                 "engine and the KV cache at work. For real answers open a GGUF model: kvchat-cli chat -m MODEL.gguf\n");
  }
  if (tty) std::fprintf(stderr, "%s", k_help);

  engine::RequestOptions opt;
  opt.max_tokens = a.n_predict;
  opt.sampling = a.sampling;
  opt.stop_strings = tmpl.stop_strings();
  std::vector<int32_t> conversation;  // the append-only token stream: the source of truth
  int64_t conversation_id = 1;        // the engine's sequence for it; /reset starts another
  std::vector<chat::ChatMessage> history;  // its messages, replies as generated (for the template)
  std::string line;
  for (;;) {
    if (tty) std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      conversation.clear();
      ++conversation_id;
      history.clear();
      std::fprintf(stderr, "(new conversation)\n");
      continue;
    }
    if (line == "/stats") {
      std::fprintf(stderr, "conversation: %zu tokens of %lld\n", conversation.size(), static_cast<long long>(engine->n_ctx()));
      continue;
    }
    if (line.empty()) continue;
    // Only the new segment is rendered and tokenized; the history's tokens are reused as is.
    auto seg = app::build_user_turn(tok, tmpl, a.system, history, line);
    if (!seg.ok()) {
      report(seg.error());
      continue;
    }
    std::vector<int32_t> prompt = conversation;
    prompt.insert(prompt.end(), seg->tokens.begin(), seg->tokens.end());
    auto r = engine->run(conversation_id, prompt, opt, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    if (!r.ok()) {
      report(r.error());
      if (static_cast<int64_t>(prompt.size()) >= engine->n_ctx()) {
        std::fprintf(stderr, "(the conversation no longer fits the context; /reset starts a new one)\n");
        continue;
      }
      return 1;
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
    conversation = prompt;
    conversation.insert(conversation.end(), r->tokens.begin(), r->tokens.end());
    history.emplace_back("user", line);
    history.emplace_back("assistant", r->text);
    // An end-of-turn token is not in the stream; the next segment starts with the template's
    // closing text instead (build_user_turn), so the stream stays identical to a full render.
    if (!a.model.quiet) {
      const auto n_prompt = static_cast<int64_t>(prompt.size());
      std::fprintf(stderr,
                   "[%zu tokens | TTFT %.0f ms | %.1f tok/s | prompt %lld tokens, %lld from cache (T0 %lld, T1 %lld, "
                   "T2 %lld), %lld computed]\n",
                   r->tokens.size(), r->ttft_ms, decode_tokens_per_s(*r), static_cast<long long>(n_prompt),
                   static_cast<long long>(r->prefix.n_cached),
                   static_cast<long long>(r->prefix.n_from_tier[0]), static_cast<long long>(r->prefix.n_from_tier[1]),
                   static_cast<long long>(r->prefix.n_from_tier[2]),
                   static_cast<long long>(n_prompt - r->prefix.n_cached));
    }
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  a->sampling.seed = 42;
  auto* cmd = app.add_subcommand("chat", "chat interactively; the KV cache is reused across turns");
  add_model_options(*cmd, a->model, false);
  cmd->add_option("--system", a->system, "system prompt");
  cmd->add_option("-n,--n-predict", a->n_predict, "most tokens per reply")->capture_default_str();
  add_sampling_options(*cmd, a->sampling);
  cmd->callback([a] {
    if (int rc = run_chat(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

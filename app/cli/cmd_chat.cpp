// kvchat-cli chat: an interactive conversation that reuses its KV cache across turns, saved in the data directory.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "app/cli/chat_saver.h"
#include "app/cli/cli_common.h"
#include "app/cli/cli_engine.h"
#include "app/common/chat_turn.h"
#include "app/common/chat_window.h"
#include "app/common/reasoning_marker.h"
#include "core/chat/reasoning.h"
#include "core/model/context_budget.h"
#include "storage/data_dir.h"

namespace kvc::cli {

namespace {

struct ChatArgs {
  ModelOptions model;
  std::string system;
  std::string kv_type = "f16";
  sampling::GenerateOptions generation;
  bool summary = false;
  int64_t resume = 0;  // --resume: a saved conversation to go on with
  bool no_save = false;
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

// Where the chat is saved, or why it is not: --no-save, or the data directory cannot take it
// (held by the app, read-only). A failed write later stops the saving, with a line saying so.
std::unique_ptr<ChatSaver> open_saver(const ChatArgs& a, Error& refused) {
  if (a.no_save) return nullptr;
  const auto dir = storage::resolve_data_dir(a.model.data_dir);
  auto saver = ChatSaver::open(dir);
  if (!saver) {
    refused = saver.error();
    return nullptr;
  }
  if (!(*saver)->notice().empty()) std::fprintf(stderr, "kvchat-cli: %s\n", (*saver)->notice().c_str());
  return std::move(*saver);
}

// A write the store refused: said once, and the chat goes on in memory, no longer saved.
void stop_saving(std::unique_ptr<ChatSaver>& saver, const Error& e) {
  std::fprintf(stderr,
               "kvchat-cli: %s\nkvchat-cli: from here this chat is not saved (it goes on in memory); conversation "
               "%lld keeps what was saved before.\n",
               e.message.c_str(), static_cast<long long>(saver->conversation()));
  saver.reset();
}

int run_chat(ChatArgs a) {
  const bool demo = a.model.model.empty();
  // The data directory first: a chat that cannot be saved says so before the model loads.
  Error refused;
  std::unique_ptr<ChatSaver> saver = open_saver(a, refused);
  if (!saver && !a.no_save) {
    if (a.resume != 0) return report(refused);
    std::fprintf(stderr,
                 "kvchat-cli: %s\nkvchat-cli: this chat is not saved (it stays in memory; --no-save says so).\n",
                 refused.message.c_str());
  }
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
  if (saver) {
    std::fprintf(stderr, "kvchat: saved in %s (kvchat-cli export lists it; --no-save keeps a chat in memory)\n",
                 (storage::resolve_data_dir(a.model.data_dir) / "kvchat.db").c_str());
  }
  if (tty) std::fprintf(stderr, "%s", k_help);

  engine::RequestOptions opt = a.generation;
  opt.stop_strings = tmpl.stop_strings();
  chat::WindowPolicy policy;
  policy.n_ctx = engine->n_ctx();
  policy.n_reserve = chat::answer_reserve(policy.n_ctx, opt.max_tokens);
  std::vector<ChatLine> stored;   // the conversation, never truncated; tokens are the stream's (source of truth)
  std::optional<size_t> cut = 0;  // the model's view begins at stored[cut]; nullopt: replay the policy
  int64_t conversation_id = 1;    // the engine's sequence for it; /reset starts another
  if (a.resume != 0) {
    auto r = saver->resume(a.resume, m.path(), tok);
    if (!r.ok()) return report(r.error());
    if (!a.system.empty() && a.system != r->conversation.settings.system_prompt)
      std::fprintf(stderr, "kvchat-cli: --system is ignored: a resumed conversation keeps its own system prompt\n");
    a.system = r->conversation.settings.system_prompt;
    stored = std::move(r->lines);
    cut = r->cut;
    std::fprintf(stderr, "(conversation %lld, \"%s\": %zu messages; the next one goes on from its last)\n",
                 static_cast<long long>(a.resume), r->conversation.title.c_str(), stored.size());
  }
  storage::ConversationSettings settings;  // a new conversation's, as the app stores them
  settings.system_prompt = a.system;
  settings.model_path = m.path();
  settings.model_name = m.config().name.empty() ? std::filesystem::path(m.path()).filename().string() : m.config().name;
  settings.generation = a.generation;
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
      if (saver) saver->new_conversation();
      std::fprintf(stderr, "(new conversation)\n");
      continue;
    }
    if (line == "/stats") {
      int64_t n = 0;
      for (const ChatLine& s : stored) n += static_cast<int64_t>(s.tokens.size());
      const int64_t n_outside = static_cast<int64_t>(cut.value_or(0));
      std::fprintf(stderr, "conversation: %zu messages, %lld tokens; context %lld%s%s\n", stored.size(),
                   static_cast<long long>(n), static_cast<long long>(engine->n_ctx()), n_outside > 0 ? "; " : "",
                   chat::outside_context_note(n_outside).c_str());
      continue;
    }
    if (line.empty()) continue;
    // A message that alone cannot fit the context is refused before anything is saved.
    if (auto fits = app::check_message_fits(tok, tmpl, a.system, line, engine->n_ctx()); !fits.ok()) {
      report(fits.error());
      continue;
    }
    // Only the new segment is rendered and tokenized; the history's tokens are reused as is.
    std::vector<chat::ChatMessage> history;
    for (const ChatLine& s : stored) history.emplace_back(s.role, s.text);
    auto seg = app::build_user_turn(tok, tmpl, a.system, history, line);
    if (!seg.ok()) {
      report(seg.error());
      continue;
    }
    // The template shows the last reply without its reasoning: so does the stream (the text keeps it).
    if (seg->reply_tokens) {
      stored.back().tokens = *seg->reply_tokens;
      if (saver && stored.back().id != 0) {
        if (Status st = saver->set_tokens(stored.back().id, stored.back().tokens); !st.ok())
          stop_saving(saver, st.error());
      }
    }
    std::vector<app::StreamMessage> messages;
    for (const ChatLine& s : stored) messages.push_back({s.role, s.text, s.tokens});
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
    // gpt-oss's channels are shown as the reasoning and the answer they hold, marked alike.
    const bool harmony = tmpl.family() == chat::ChatTemplate::Family::harmony;
    chat::ReasoningStream channels;
    bool in_analysis = false;
    const auto marked_delta = [&](const chat::ReasoningStream::Delta& d) {
      std::string text;
      if (!d.reasoning.empty()) {
        if (!in_analysis) text += std::string(chat::k_think_open) + "\n";
        in_analysis = true;
        text += d.reasoning;
      }
      if (!d.answer.empty()) {
        if (in_analysis) text += "\n" + std::string(chat::k_think_close) + "\n\n";
        in_analysis = false;
        text += d.answer;
      }
      return text;
    };
    const auto shown = [&](std::string_view piece) {
      return harmony ? marked_delta(channels.feed(piece)) : std::string(piece);
    };
    // The question is saved before its answer is generated, and the answer as it streams.
    int64_t user_id = 0;
    if (saver) {
      auto id = saver->add_user(line, seg->tokens, settings);
      Status st = id.ok() ? saver->begin_answer() : Status(id.error());
      if (st.ok()) {
        user_id = *id;
      } else {
        stop_saving(saver, st.error());
      }
    }
    auto r = engine->run(conversation_id, prompt, opt, [&](std::string_view piece) {
      if (saver) {
        if (Status st = saver->stream(piece); !st.ok()) stop_saving(saver, st.error());
      }
      const std::string marked = marker.feed(shown(piece));
      std::fwrite(marked.data(), 1, marked.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    if (!r.ok()) {
      report(r.error());
      return 1;
    }
    // A reply that ends in "<" or "<|" held it back as a marker's possible start: it is text.
    const std::string rest = (harmony ? marker.feed(marked_delta(channels.finish())) : std::string()) + marker.finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    cut = window->first;
    stored.push_back({"user", line, seg->tokens, user_id});
    std::vector<int32_t> reply_tokens = seg->opening_tokens;
    reply_tokens.insert(reply_tokens.end(), r->tokens.begin(), r->tokens.end());
    int64_t answer_id = 0;
    if (saver) {
      auto id = saver->end_answer(reply_tokens);
      if (id.ok()) {
        answer_id = *id;
        if (window->moved) {
          const Status st = saver->set_cut(window->first == 0 ? 0 : stored[window->first].id);
          if (!st.ok()) stop_saving(saver, st.error());
        }
      } else {
        stop_saving(saver, id.error());
      }
    }
    stored.push_back({"assistant", r->text, std::move(reply_tokens), answer_id});
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
  auto* cmd = app.add_subcommand(
      "chat",
      "chat interactively; the KV cache is reused across turns, and the conversation is saved in the data "
      "directory (--resume ID goes on with it, --no-save keeps it in memory)");
  add_model_options(*cmd, a->model, false);
  cmd->add_option("--system", a->system, "system prompt");
  add_kv_type_option(*cmd, a->kv_type);
  add_generate_options(*cmd, a->generation, "most tokens per reply; -1 = until the end of the reply");
  auto* resume =
      cmd->add_option("--resume", a->resume,
                      "go on with saved conversation ID (kvchat-cli export lists them; the app's too, same model file)")
          ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-save", a->no_save,
                "keep this chat in memory only (by default it is saved in the data directory's kvchat.db, as the "
                "app saves its own, unless another kvchat holds that directory)")
      ->excludes(resume);
  cmd->add_flag("--summary", a->summary,
                "at the end, print what the turns cost on stdout: new tokens against prompt tokens computed per turn");
  cmd->callback([a] {
    if (int rc = run_chat(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

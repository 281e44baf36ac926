// The real kvchat app under Xvfb past the end of the context: 60 turns on a 512-token model run to the end, the chat
// shows where the model's view begins, and the cut survives a restart.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/chat/context_window.h"
#include "storage/conversation_store.h"
#include "support/gui_support.h"
#include "support/test_support.h"

using nlohmann::json;

namespace {

// Long enough for two whole KV blocks: at a cut they still hit.
const char* k_system =
    "You are a storyteller. You tell short, happy stories about animals, children and their friends.";

using kvc::test::gui_unavailable;
using kvc::test::run_command;

// The app on `model` with a script file, under Xvfb (as tests/ui/test_gui_smoke.cpp runs it).
int run_app(const std::string& model, const std::string& data_dir, const std::string& script, std::string& output) {
  std::string cmd = kvc::test::gui_command(400);
  // Appended piece by piece: GCC 12 misreads "literal" + std::string&& here (-Wrestrict).
  for (const std::string& piece :
       {std::string(" -m '"), model, std::string("' -t 2 --data-dir '"), data_dir, std::string("' --script '"), script,
        std::string("' --screenshot-dir '"), data_dir, std::string("/shots'")}) {
    cmd.append(piece);
  }
  return run_command(cmd, output);
}

json step_assert(const std::string& state, const std::string& op, json value) {
  return json{{"do", "assert"}, {"state", state}, {"op", op}, {"value", std::move(value)}};
}

json send(const std::string& text) {
  return json::array({json{{"do", "type"}, {"widget", "chat.input"}, {"text", text}},
                      json{{"do", "click"}, {"widget", "chat.send"}}, json{{"do", "wait_idle"}, {"timeout_s", 120}}});
}

void write_script(const std::string& path, const json& steps) { std::ofstream(path) << json{{"steps", steps}}.dump(1); }

}  // namespace

TEST_CASE("kvchat GUI: 60 turns on a 512-token context run to the end, with the cut marker, kept across a restart",
          "[ui][e2e]") {
  if (auto why = gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const std::string model = tmp.file("ctx512.gguf");
  auto mk = kvc::test::cli(
      "mkmodel -q --ctx 512 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 --vocab-from " +
          kvc::test::quoted(kvc::test::model_path("stories260K.gguf")) + " -o " + kvc::test::quoted(model),
      tmp);
  REQUIRE(mk.exit_code == 0);
  std::vector<std::string> lines;
  {
    std::istringstream in(kvc::test::read_file(kvc::test::data_dir() / "conversations/sixty-turns.txt"));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  REQUIRE(lines.size() == 60);

  json steps = json::array(
      {json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 30}},
       json{{"do", "key"}, {"key", "ctrl+n"}}, json{{"do", "wait_idle"}, {"timeout_s", 30}},
       json{{"do", "command"}, {"name", "set_chat_settings"}, {"max_tokens", 32}, {"system_prompt", k_system}},
       json{{"do", "wait_idle"}, {"timeout_s", 30}}, step_assert("model_n_ctx", "==", 512),
       step_assert("n_outside_context", "==", 0), step_assert("context_marker", "==", "")});
  for (size_t i = 0; i < lines.size(); ++i) {
    for (auto& s : send(lines[i])) steps.push_back(s);
    steps.push_back(step_assert("error", "==", ""));
    steps.push_back(step_assert("n_assistant_messages", "==", static_cast<int>(i + 1)));
    steps.push_back(step_assert("last_prompt_tokens", "<=", 512));
    if (i == 30) steps.push_back(step_assert("n_outside_context", ">", 0));
  }
  steps.push_back(step_assert("n_user_messages", "==", 60));
  steps.push_back(step_assert("n_outside_context", ">=", 20));
  steps.push_back(step_assert("context_marker", "contains", "earlier messages are outside the model's context"));
  steps.push_back(json{{"do", "frames"}, {"n", 5}});
  steps.push_back(json{{"do", "screenshot"}, {"name", "overflow"}, {"window", "Chat"}});
  steps.push_back(json{{"do", "quit"}});
  const std::string data = tmp.file("data");
  write_script(tmp.file("sixty.json"), steps);
  std::string out;
  int rc = run_app(model, data, tmp.file("sixty.json"), out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);

  // Storage keeps every message; the conversation records where the model's view begins.
  int64_t n_outside = 0;
  {
    auto store = kvc::storage::ConversationStore::open_in(data);
    REQUIRE(store.ok());
    auto convs = (*store)->list_conversations(0, 10);
    REQUIRE(convs.ok());
    REQUIRE(!convs->empty());
    const kvc::storage::Conversation& c = convs->front();  // the most recent: ours
    auto path = (*store)->path_to(c.active_leaf);
    REQUIRE(path.ok());
    REQUIRE(path->size() == 120);
    for (size_t i = 0; i < 60; ++i) CHECK((*path)[2 * i].text == lines[i]);
    REQUIRE(c.context_cut != 0);
    for (size_t i = 0; i < path->size(); ++i) {
      if ((*path)[i].id == c.context_cut) n_outside = static_cast<int64_t>(i);
    }
    CHECK(n_outside >= 20);
    CHECK((*path)[static_cast<size_t>(n_outside)].role == kvc::storage::Role::user);
  }

  // A restart shows the same cut before any turn, and the next turn finds its window on disk.
  json again =
      json::array({json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 30}},
                   step_assert("n_messages", "==", 120), step_assert("n_outside_context", "==", n_outside),
                   step_assert("context_marker", "==", kvc::chat::outside_context_note(n_outside))});
  for (auto& s : send("One more story, please.")) again.push_back(s);
  again.push_back(step_assert("error", "==", ""));
  again.push_back(step_assert("n_assistant_messages", "==", 61));
  again.push_back(step_assert("last_prompt_from_t2", ">=", 16));
  // A smaller KV budget (Engine > Tier budgets) shrinks the context to 256 tokens (64 KiB at
  // 256 bytes a token): the next turn moves the cut and still runs.
  again.push_back(json{{"do", "command"}, {"name", "set_tier_budgets"}, {"ctx_kv_bytes", 65536}});
  again.push_back(json{{"do", "wait_idle"}, {"timeout_s", 60}});
  again.push_back(step_assert("model_n_ctx", "==", 256));
  for (auto& s : send("And a short one.")) again.push_back(s);
  again.push_back(step_assert("error", "==", ""));
  again.push_back(step_assert("n_assistant_messages", "==", 62));
  again.push_back(step_assert("last_prompt_tokens", "<=", 256));
  again.push_back(step_assert("n_outside_context", ">", n_outside));
  again.push_back(json{{"do", "quit"}});
  write_script(tmp.file("again.json"), again);
  rc = run_app(model, data, tmp.file("again.json"), out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
}

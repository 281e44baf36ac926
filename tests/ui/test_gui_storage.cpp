// The real kvchat app under Xvfb when a message cannot be kept: one too long for the model's context comes back
// to the input box with the reason (the Chat window restores AppSnapshot::unsent), and a read-only data directory
// (a bind mount in a forked child's mount namespace, tests/support/mount_support.h) shows its conversations and a
// notice that stays, with Send off and the typed text left in the box.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "storage/conversation_store.h"
#include "support/gui_support.h"
#include "support/mount_support.h"
#include "support/test_support.h"

using nlohmann::json;

namespace {

json assert_state(const std::string& state, const std::string& op, json value) {
  return json{{"do", "assert"}, {"state", state}, {"op", op}, {"value", std::move(value)}};
}

std::string app_command(const std::string& model, const std::string& data, const std::string& script,
                        const std::string& extra = "") {
  std::string cmd = kvc::test::gui_command(180);
  for (const std::string& piece : {std::string(" -m '"), model, std::string("' -t 2 --data-dir '"), data,
                                   std::string("' --script '"), script, std::string("'"), extra}) {
    cmd.append(piece);
  }
  return cmd;
}

void write_script(const std::string& path, const json& steps) { std::ofstream(path) << json{{"steps", steps}}.dump(1); }

}  // namespace

TEST_CASE("kvchat GUI: a message too long for the context comes back to the input box with its length and the limit",
          "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  std::string long_text;
  for (int i = 0; i < 60; ++i) long_text += "the cat sat on the mat ";
  const json steps = json::array({
      json{{"do", "wait_model"}, {"timeout_s", 120}},
      json{{"do", "wait_idle"}, {"timeout_s", 30}},
      json{{"do", "type"}, {"widget", "chat.input"}, {"text", long_text}},
      json{{"do", "click"}, {"widget", "chat.send"}},
      json{{"do", "wait_idle"}, {"timeout_s", 60}},
      json{{"do", "frames"}, {"n", 3}},
      assert_state("chat_input", "==", long_text),
      assert_state("error", "contains", "tokens with the system prompt, more than the context of 128 tokens"),
      assert_state("error", "contains", "it is back in the input box"),
      assert_state("n_messages", "==", 0),
      json{{"do", "type"}, {"widget", "chat.input"}, {"text", "Once upon a time"}},
      json{{"do", "click"}, {"widget", "chat.send"}},
      json{{"do", "wait_idle"}, {"timeout_s", 60}},
      json{{"do", "frames"}, {"n", 3}},
      assert_state("n_messages", "==", 2),
      assert_state("error", "==", ""),
      assert_state("chat_input", "==", ""),
      json{{"do", "quit"}},
  });
  write_script(tmp.file("long.json"), steps);
  std::string out;
  const int rc = kvc::test::run_command(
      app_command(kvc::test::model_path("stories260K.gguf"), tmp.file("data"), tmp.file("long.json"), " -c 128"), out);
  INFO(out);
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
}

TEST_CASE(
    "kvchat GUI: a read-only data directory shows its conversations and a notice that stays, Send is off and "
    "the typed text stays",
    "[ui][e2e]") {
  if (auto why = kvc::test::gui_unavailable()) KVC_SKIP(*why);
  kvc::test::TempDir tmp;
  const auto data = tmp.path() / "data";
  {
    auto store = kvc::storage::ConversationStore::open_in(data);
    REQUIRE(store.ok());
    for (const std::string title : {"Rivers", "Mountains"}) {
      auto c = (*store)->create_conversation(title, {});
      REQUIRE(c.ok());
      auto u = (*store)->append_message(*c, 0, kvc::storage::Role::user, "Tell me about " + title, {});
      REQUIRE(u.ok());
      REQUIRE((*store)->append_message(*c, *u, kvc::storage::Role::assistant, title + " are old.", {}).ok());
    }
  }
  const std::string before = kvc::test::read_file(data / "kvchat.db");
  const json steps = json::array({
      json{{"do", "wait_model"}, {"timeout_s", 120}},
      json{{"do", "wait_idle"}, {"timeout_s", 30}},
      assert_state("n_conversations", "==", 2),
      assert_state("n_messages", "==", 2),
      assert_state("storage_notice", "contains", "Read-only: the data directory"),
      assert_state("storage_notice", "contains", "read-only file system"),
      assert_state("error", "==", ""),
      json{{"do", "type"}, {"widget", "chat.input"}, {"text", "typed on a read-only disk"}},
      json{{"do", "click"}, {"widget", "chat.send"}},
      json{{"do", "key"}, {"key", "ctrl+enter"}},
      json{{"do", "wait_idle"}, {"timeout_s", 30}},
      json{{"do", "frames"}, {"n", 3}},
      assert_state("chat_input", "==", "typed on a read-only disk"),
      assert_state("n_messages", "==", 2),
      assert_state("storage_notice", "contains", "nothing new can be saved"),
      json{{"do", "key"}, {"key", "ctrl+n"}},  // refused by the store: an error, the notice stays
      json{{"do", "wait_idle"}, {"timeout_s", 30}},
      assert_state("error", "contains", "read-only"),
      assert_state("storage_notice", "contains", "nothing new can be saved"),
      json{{"do", "quit"}},
  });
  write_script(tmp.file("ro.json"), steps);
  const std::string cmd = app_command(kvc::test::model_path("stories260K.gguf"), data.string(), tmp.file("ro.json")) +
                          " > '" + tmp.file("out.txt") + "' 2>&1";
  const kvc::test::ChildReport rep(tmp.path() / "report.txt");
  const int rc = kvc::test::run_in_child([&] {
    if (auto why = kvc::test::enter_mount_namespace()) {
      rep.line("skip", *why);
      return 0;
    }
    if (auto why = kvc::test::bind_read_only(data)) {
      rep.line("skip", *why);
      return 0;
    }
    const int status = std::system(cmd.c_str());
    rep.line("status", std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    return 0;
  });
  const std::string out =
      kvc::test::read_file(tmp.path() / "report.txt") +
      (std::filesystem::exists(tmp.file("out.txt")) ? kvc::test::read_file(tmp.file("out.txt")) : "");
  INFO(out);
  if (!rep.first("skip").empty()) KVC_SKIP("no read-only mount of our own: " << rep.first("skip"));
  REQUIRE(rc == 0);
  CHECK(out.find("script passed") != std::string::npos);
  CHECK(kvc::test::read_file(data / "kvchat.db") == before);
}

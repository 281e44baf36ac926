// The app's controller when storage refuses it, on real mounts (tests/support/mount_support.h): a
// tmpfs filled to the brim and a read-only bind mount of a data directory, each in a forked
// child's own mount namespace; and a message too long for the model's context. Nothing the user
// typed is lost: a message that is not stored comes back to the input box (AppSnapshot::unsent)
// with an error that says why, and no row of it is left; an answer's end the disk refused is
// written once the disk has room; a read-only directory shows its conversations and says, for as
// long as it holds, that nothing new can be saved.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "app/gui/chat_controller.h"
#include "storage/conversation_store.h"
#include "support/controller_support.h"
#include "support/kill_support.h"
#include "support/mount_support.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// settle() for a forked child, where no Catch assertion may run: false on a failed model or a timeout.
bool settled(app::ChatController& c, int timeout_s = 120) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    auto s = c.snapshot();
    if (s->model.status == ui::ModelStatus::ready && !c.busy() && !s->chat.generating) return true;
    if (s->model.status == ui::ModelStatus::failed || std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A child that cannot make its mounts says why; the parent skips with it.
int skip(const test::ChildReport& rep, const std::string& why) {
  rep.line("skip", why);
  return 0;
}

app::ChatController::Options options(const std::filesystem::path& data, const std::string& model) {
  app::ChatController::Options opt;
  opt.data_dir = data.string();
  opt.model_path = model;
  opt.n_threads = 1;
  opt.n_ctx = 512;
  return opt;
}

void short_answers(app::ChatController& c) {
  sampling::GenerateOptions g;
  g.max_tokens = 8;
  c.update_settings("", g);
}

// The most recent conversation's active path as "role: text" lines, read from the file.
std::vector<std::string> saved_path(const std::filesystem::path& data) {
  std::vector<std::string> out;
  auto store = storage::ConversationStore::open_read_only(data / "kvchat.db");
  if (!store) return {"cannot open: " + store.error().message};
  auto list = (*store)->list_conversations(0, 1);
  if (!list || list->empty() || list->front().active_leaf == 0) return out;
  auto path = (*store)->path_to(list->front().active_leaf);
  if (!path) return {"cannot read: " + path.error().message};
  for (const auto& m : *path) out.push_back(std::string(storage::to_string(m.role)) + ": " + m.text);
  return out;
}

}  // namespace

TEST_CASE(
    "app on a full disk: a message the store refuses comes back to the input box, no row of it is kept, and "
    "the next one goes once there is room",
    "[app][storage]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  const auto mnt = tmp.path() / "mnt";
  std::filesystem::create_directories(mnt);
  const test::ChildReport rep(tmp.path() / "report.txt");
  const int rc = test::run_in_child([&] {
    if (auto why = test::enter_mount_namespace()) return skip(rep, *why);
    if (auto why = test::mount_tmpfs(mnt, 8 << 20)) return skip(rep, *why);
    {
      app::ChatController c(options(mnt / "data", model));
      if (!settled(c)) return 10;
      short_answers(c);
      c.send("the first message");
      if (!settled(c) || c.snapshot()->chat.messages.size() != 2) return 11;
      const auto ballast = test::fill_to_the_brim(mnt);
      for (int i = 0; i < 3; ++i) {
        c.send("a message for a full disk " + std::to_string(i));
        if (!settled(c)) return 12;
        const auto s = c.snapshot();
        rep.line("unsent", std::to_string(s->unsent.serial) + " " + s->unsent.text);
        rep.line("refused", s->error);
        rep.line("shown", std::to_string(s->chat.messages.size()));
      }
      std::filesystem::remove(ballast);
      c.send("after the disk has room");
      if (!settled(c)) return 13;
      const auto s = c.snapshot();
      rep.line("after_error", s->error);
      rep.line("after_shown", std::to_string(s->chat.messages.size()));
    }
    for (const std::string& line : saved_path(mnt / "data")) rep.line("saved", line);
    rep.line("integrity", test::integrity(mnt / "data" / "kvchat.db"));
    return 0;
  });
  INFO(test::read_file(rep.path()));
  if (!rep.first("skip").empty()) KVC_SKIP("no tmpfs of our own: " << rep.first("skip"));
  REQUIRE(rc == 0);
  const auto unsent = rep.all("unsent");
  REQUIRE(unsent.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(unsent[static_cast<size_t>(i)] ==
          std::to_string(i + 1) + " a message for a full disk " + std::to_string(i));  // each handed back, once
    CHECK_THAT(rep.all("refused")[static_cast<size_t>(i)],
               Catch::Contains("the disk is full; free space") && Catch::Contains("it is back in the input box"));
    CHECK(rep.all("shown")[static_cast<size_t>(i)] == "2");
  }
  CHECK(rep.first("after_error").empty());  // the message went: the refusal no longer stands
  CHECK(rep.first("after_shown") == "4");
  const auto saved = rep.all("saved");
  REQUIRE(saved.size() == 4);
  CHECK(saved[0] == "user: the first message");
  CHECK(saved[1].rfind("assistant: ", 0) == 0);
  CHECK(saved[2] == "user: after the disk has room");  // nothing of the refused ones
  CHECK(rep.first("integrity") == "ok");
}

TEST_CASE("app on a full disk mid-answer: the answer's end waits in memory and is written once there is room",
          "[app][storage]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  const auto mnt = tmp.path() / "mnt";
  std::filesystem::create_directories(mnt);
  std::string answer;
  for (int i = 0; answer.size() < 4000; ++i) answer += "Sentence " + std::to_string(i) + " of a long answer. ";
  const test::ChildReport rep(tmp.path() / "report.txt");
  const int rc = test::run_in_child([&] {
    if (auto why = test::enter_mount_namespace()) return skip(rep, *why);
    if (auto why = test::mount_tmpfs(mnt, 8 << 20)) return skip(rep, *why);
    const auto data = mnt / "data";
    auto opt = options(data, model);
    opt.replay_answer = answer;  // ~1.5 KB a second (replay_turn_runner.h): the disk fills mid-answer
    app::ChatController c(opt);
    if (!settled(c)) return 20;
    c.send("Tell me a long story.");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {  // until some of the answer is on screen, and so on disk (written every 250 ms)
      auto s = c.snapshot();
      if (s->chat.generating && s->chat.messages.size() == 2 && s->chat.messages.back().text.size() > 600) break;
      if (std::chrono::steady_clock::now() > deadline) return 21;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const auto ballast = test::fill_to_the_brim(mnt);
    if (!settled(c)) return 22;
    auto s = c.snapshot();
    rep.line("error", s->error);
    rep.line("shown_whole", s->chat.messages.back().text == answer ? "yes" : "no");
    auto seen = storage::ConversationStore::open_read_only(data / "kvchat.db");
    if (!seen) return 23;
    auto list = (*seen)->list_conversations(0, 1);
    if (!list || list->empty()) return 24;
    const int64_t answer_id = list->front().active_leaf;
    auto m = (*seen)->message(answer_id);
    if (!m) return 25;
    rep.line("full_disk_saved", std::to_string(m->text.size()) + " " + storage::to_string(m->state));
    std::filesystem::remove(ballast);
    // The worker writes it when idle (every 2 s) once the disk takes it.
    for (int i = 0; i < 200; ++i) {
      m = (*seen)->message(answer_id);
      if (m && m->state == storage::MessageState::complete) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!m) return 26;
    rep.line("room_saved", std::string(m->text == answer ? "whole" : "not whole") + " " + storage::to_string(m->state) +
                               " " + std::to_string(m->tokens.size()));
    return 0;
  });
  INFO(test::read_file(rep.path()));
  if (!rep.first("skip").empty()) KVC_SKIP("no tmpfs of our own: " << rep.first("skip"));
  REQUIRE(rc == 0);
  CHECK_THAT(rep.first("error"), Catch::Contains("the disk is full") && Catch::Contains("written once it has room"));
  CHECK(rep.first("shown_whole") == "yes");
  // On the full disk: part of it, still open.
  const std::string full = rep.first("full_disk_saved");
  CHECK(full.find(" streaming") != std::string::npos);
  CHECK(std::stoul(full) < answer.size());
  // With room again: whole, finished, with its ids.
  const std::string room = rep.first("room_saved");
  CHECK(room.rfind("whole complete ", 0) == 0);
  CHECK(room != "whole complete 0");
}

TEST_CASE(
    "app on a read-only data directory: every conversation shown, a notice that stays, sending off and the "
    "typed text kept",
    "[app][storage]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  const auto data = tmp.path() / "data";
  {  // Two conversations written by an earlier run.
    auto store = storage::ConversationStore::open_in(data);
    REQUIRE(store.ok());
    for (const std::string title : {"Rivers", "Mountains"}) {
      auto c = (*store)->create_conversation(title, {});
      REQUIRE(c.ok());
      auto u =
          (*store)->append_message(*c, 0, storage::Role::user, "Tell me about " + title, std::vector<int32_t>{1, 2, 3});
      REQUIRE(u.ok());
      auto a = (*store)->begin_assistant_message(*c, *u);
      REQUIRE(a.ok());
      REQUIRE((*store)->append_streamed(*a, title + " are long.", std::vector<int32_t>{4, 5}).ok());
      REQUIRE((*store)->finish_message(*a).ok());
    }
  }
  const std::string before = test::read_file(data / "kvchat.db");
  const test::ChildReport rep(tmp.path() / "report.txt");
  const int rc = test::run_in_child([&] {
    if (auto why = test::enter_mount_namespace()) return skip(rep, *why);
    if (auto why = test::bind_read_only(data)) return skip(rep, *why);
    app::ChatController c(options(data, model));
    if (!settled(c)) return 30;
    auto s = c.snapshot();
    rep.line("n_conversations", std::to_string(s->conversations.size()));
    rep.line("shown", std::to_string(s->chat.messages.size()) + " " + s->chat.title);
    rep.line("notice", s->storage_notice);
    rep.line("start_error", s->error);
    c.search("Rivers");
    if (!settled(c)) return 31;
    rep.line("n_found", std::to_string(c.snapshot()->search_results.size()));
    c.send("typed on a read-only disk");
    if (!settled(c)) return 32;
    s = c.snapshot();
    rep.line("unsent", std::to_string(s->unsent.serial) + " " + s->unsent.text);
    rep.line("refused", s->error);
    rep.line("notice_after", s->storage_notice);
    rep.line("shown_after", std::to_string(s->chat.messages.size()));
    return 0;
  });
  INFO(test::read_file(rep.path()));
  if (!rep.first("skip").empty()) KVC_SKIP("no read-only mount of our own: " << rep.first("skip"));
  REQUIRE(rc == 0);
  CHECK(rep.first("n_conversations") == "2");
  CHECK(rep.first("shown") == "2 Mountains");  // the most recent, opened with its messages
  const std::string notice = rep.first("notice");
  CHECK_THAT(notice, Catch::Contains("Read-only") && Catch::Contains("read-only file system") &&
                         Catch::Contains("nothing new can be saved") && Catch::Contains("--data-dir"));
  CHECK(rep.first("start_error").empty());  // nothing else to report: the notice says it all
  CHECK(rep.first("n_found") != "0");
  CHECK(rep.first("unsent") == "1 typed on a read-only disk");
  CHECK_THAT(rep.first("refused"), Catch::Contains("Read-only") && Catch::Contains("back in the input box"));
  CHECK(rep.first("notice_after") == notice);  // still there, whatever error came since
  CHECK(rep.first("shown_after") == "2");
  CHECK(test::read_file(data / "kvchat.db") == before);
}

TEST_CASE("app: a message too long for the model's context is refused before it is stored, and handed back",
          "[app][storage]") {
  test::TempDir tmp;
  auto opt = options(tmp.path() / "data", test::model_path("stories260K.gguf"));
  opt.n_ctx = 128;
  std::string long_text;
  for (int i = 0; i < 60; ++i) long_text += "the cat sat on the mat ";
  app::ChatController c(opt);
  test::settle(c);
  short_answers(c);
  test::settle(c);
  c.send(long_text);
  test::settle(c);
  auto s = c.snapshot();
  CHECK(s->unsent.serial == 1);
  CHECK(s->unsent.text == long_text);
  CHECK_THAT(s->error,
             Catch::Matches(".*this message takes (at least )?[0-9]+ tokens with the system prompt, more than the "
                            "context of 128 tokens.*") &&
                 Catch::Contains("back in the input box"));
  CHECK(s->chat.messages.empty());
  c.send("a short one");
  test::settle(c);
  s = c.snapshot();
  CHECK(s->error.empty());
  REQUIRE(s->chat.messages.size() == 2);
  CHECK(s->chat.messages.front().text == "a short one");  // the long one was never stored
  // Megabytes are known too long by their length (Tokenizer::max_bytes_per_token), before the
  // template renders them or the tokenizer runs.
  c.send(std::string(3'000'000, 'a'));
  test::settle(c);
  s = c.snapshot();
  CHECK_THAT(s->error, Catch::Contains("takes at least") && Catch::Contains("(it is 3000000 bytes)"));
  CHECK(s->unsent.text.size() == 3'000'000);
}

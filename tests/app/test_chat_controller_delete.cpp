// The app's delete path itself (ChatController::delete_conversation on its worker thread, the
// real store, engine runner and disk tier): deleting a conversation releases the disk blocks
// only it reached, and the other conversation's history still comes back whole.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "app/gui/chat_controller.h"
#include "core/backend/backend.h"
#include "core/kv/stream_keys.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "storage/conversation_store.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// Waits until the controller has a model, runs nothing and has published that.
std::shared_ptr<const ui::AppSnapshot> settle(app::ChatController& c) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  for (;;) {
    auto s = c.snapshot();
    if (s->model.status == ui::ModelStatus::ready && !c.busy() && !s->chat.generating) return s;
    REQUIRE(s->model.status != ui::ModelStatus::failed);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int64_t id_of(const ui::AppSnapshot& s, const std::string& title) {
  for (const auto& c : s.conversations) {
    if (c.title.rfind(title, 0) == 0) return c.id;
  }
  FAIL("no conversation titled " << title);
  return 0;
}

}  // namespace

TEST_CASE("app delete: the controller's delete releases the conversation's private disk blocks", "[app][e2e]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  app::ChatController::Options opt;
  opt.data_dir = tmp.file("data");
  opt.model_path = model;
  opt.n_threads = 2;
  opt.n_ctx = 512;
  const std::string a_text = "Once upon a time there was a little cat who liked to play in the big green garden.";
  const std::string b_text = "A dog and a bird went to the river to look for the sun and the moon together.";
  {
    app::ChatController c(opt);
    settle(c);
    c.send(a_text);
    settle(c);
    c.new_conversation();
    settle(c);
    c.send(b_text);
    settle(c);
  }  // the runner drains its write-behind queue to disk

  // What each conversation's stream reached on disk.
  std::vector<std::vector<int32_t>> a_streams, b_streams;
  {
    auto store = storage::ConversationStore::open_in(tmp.path() / "data");
    REQUIRE(store.ok());
    auto list = (*store)->list_conversations(0, 10);
    REQUIRE(list.ok());
    REQUIRE(list->size() == 2);
    for (const auto& conv : *list) {
      auto streams = (*store)->token_streams(conv.id);
      REQUIRE(streams.ok());
      (conv.title.rfind("A dog", 0) == 0 ? b_streams : a_streams) = *streams;
    }
  }
  REQUIRE((a_streams.size() == 1 && b_streams.size() == 1));
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(model, *be);
  REQUIRE(m.ok());
  auto s = model::Session::create(**m, 64);  // the app's KV layout: F16, blocks of 16
  REQUIRE(s.ok());
  const kv::BlockKey fp = s->cache().fingerprint();
  const auto a_keys = kv::stream_block_keys(fp, 16, a_streams[0]);
  const auto b_keys = kv::stream_block_keys(fp, 16, b_streams[0]);
  const auto private_a = kv::unshared_block_keys(fp, 16, a_streams, b_streams);
  REQUIRE(a_keys.size() >= 2);
  REQUIRE(!private_a.empty());
  {
    auto cold = storage::SqliteColdStore::open(tmp.path() / "data/kv-cache");
    REQUIRE(cold.ok());
    for (const auto& k : a_keys) REQUIRE((*cold)->contains(k));  // the app wrote every full block
    for (const auto& k : b_keys) REQUIRE((*cold)->contains(k));
  }

  {
    app::ChatController c(opt);
    auto snap = settle(c);
    c.delete_conversation(id_of(*snap, "Once upon"));
    snap = settle(c);
    CHECK(snap->conversations.size() == 1);
  }
  auto cold = storage::SqliteColdStore::open(tmp.path() / "data/kv-cache");
  REQUIRE(cold.ok());
  for (const auto& k : private_a) CHECK_FALSE((*cold)->contains(k));
  for (const auto& k : b_keys) CHECK((*cold)->contains(k));  // shared blocks (if any) and B's stay
  (*cold)->check_invariants();
}

TEST_CASE("app delete: an answer given a deleted conversation's id again shows none of the old answer's stats",
          "[app][e2e]") {
  test::TempDir tmp;
  app::ChatController::Options opt;
  opt.data_dir = tmp.file("data");
  opt.model_path = test::model_path("stories260K.gguf");
  opt.n_threads = 2;
  opt.n_ctx = 512;
  // 2,400 bytes in 12-byte pieces 8 ms apart: each answer streams for about 1.6 s.
  std::string answer;
  for (int i = 0; i < 60; ++i) answer += "The cat sat in the sun. ";
  opt.replay_answer = answer;
  app::ChatController c(opt);
  settle(c);
  c.send("Once upon a time there was a cat.");
  auto snap = settle(c);
  REQUIRE(snap->chat.messages.size() == 2);
  const int64_t old_answer = snap->chat.messages.back().id;
  REQUIRE(snap->chat.messages.back().stats.valid);  // this run answered it
  c.delete_conversation(snap->chat.conversation_id);
  snap = settle(c);
  REQUIRE(snap->conversations.empty());  // the tables are empty: SQLite starts the ids again
  c.send("A dog went to the river.");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  for (;;) {
    snap = c.snapshot();
    if (snap->chat.generating && !snap->chat.messages.empty() && snap->chat.messages.back().streaming) break;
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const ui::MessageView& streaming = snap->chat.messages.back();
  CHECK(streaming.id == old_answer);   // the id came again (else there is nothing to inherit)
  CHECK_FALSE(streaming.stats.valid);  // still streaming: no stats yet, none of the old answer's
  CHECK(streaming.interrupted.empty());
  settle(c);
}

// The real app SIGKILLed while it streams a long answer, at random points, in a bounded loop:
// after each kill the databases pass integrity_check, the user's message is stored, the answer
// is there up to the last committed chunk, the cold store serves only blocks whose checksums
// verify (one block is made corrupt each time and must be refused), and the next launch shows
// the answer marked incomplete and serves its next turn's history from the cache.
// CTest runs a few kills (label "kill"); KVC_KILL_COUNT=50 runs the full loop (see BENCHMARKS.md).
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "storage/conversation_store.h"
#include "storage/database.h"
#include "support/gui_support.h"
#include "support/kill_support.h"
#include "support/test_support.h"

using nlohmann::json;
using namespace kvc;

namespace {

// Long enough for a few full KV blocks of prompt: they are what the check after a kill finds.
std::string question(int k) {
  return "Question " + std::to_string(k) +
         ": tell me a very long story about a little cat, a dog and a bird who went to the river together to look "
         "for the sun and the moon, and what they found there when the night came.";
}

json step_assert(const std::string& state, const std::string& op, json value) {
  return json{{"do", "assert"}, {"state", state}, {"op", op}, {"value", std::move(value)}};
}

void add_send(json& steps, const std::string& text, int wait_s) {
  steps.push_back(json{{"do", "type"}, {"widget", "chat.input"}, {"text", text}});
  steps.push_back(json{{"do", "click"}, {"widget", "chat.send"}});
  steps.push_back(json{{"do", "wait_idle"}, {"timeout_s", wait_s}});
}

void set_max_tokens(json& steps, int n) {
  steps.push_back(json{{"do", "command"}, {"name", "set_chat_settings"}, {"max_tokens", n}});
  steps.push_back(json{{"do", "wait_idle"}, {"timeout_s", 30}});
}

// Launch `k`: after a kill (k > 0) the previous answer must show as incomplete and a short turn
// after it must find its history in the cache; then a long answer starts, to be killed.
json launch_script(int k, bool last) {
  json steps =
      json::array({json{{"do", "wait_model"}, {"timeout_s", 120}}, json{{"do", "wait_idle"}, {"timeout_s", 60}}});
  if (k > 0) {
    steps.push_back(step_assert("n_user_messages", ">=", 1));
    steps.push_back(step_assert("last_reply_interrupted", "==", 1));
    set_max_tokens(steps, 4);
    add_send(steps, "check " + std::to_string(k) + ": go on", 120);
    steps.push_back(step_assert("error", "==", ""));
    steps.push_back(step_assert("last_reply_interrupted", "==", 0));
    steps.push_back(step_assert("last_prompt_reused", ">=", 16));
    steps.push_back(json{{"do", "print"}, {"state", "last_prompt_reused"}});
  }
  if (!last) {
    // Each long answer in a conversation of its own: the history of a check stays short, far
    // from the context's end (where the overflow policy would move the window).
    steps.push_back(json{{"do", "key"}, {"key", "ctrl+n"}});
    steps.push_back(json{{"do", "wait_idle"}, {"timeout_s", 30}});
    set_max_tokens(steps, 3000);
    add_send(steps, question(k), 900);
  }
  steps.push_back(json{{"do", "quit"}});
  return json{{"steps", steps}};
}

struct Newest {
  int64_t id = 0;
  std::string state, text;
  bool interrupted = false;
};

// The newest answer to `question` as the dying app's readers see it (read-only, WAL).
std::optional<Newest> newest_answer(const std::filesystem::path& db, const std::string& question) {
  if (!std::filesystem::exists(db)) return std::nullopt;
  auto d = storage::Database::open(db, {.mode = storage::OpenMode::read_only, .busy_timeout_ms = 200});
  if (!d) return std::nullopt;
  auto st = d->prepare(
      "SELECT a.id, a.state, a.text FROM messages a JOIN messages u ON u.id = a.parent_id"
      " WHERE a.role = 'assistant' AND u.text = ? ORDER BY a.id DESC LIMIT 1");
  if (!st) return std::nullopt;
  st->bind(1, std::string_view(question));
  auto row = st->step();
  if (!row || !*row) return std::nullopt;
  return Newest{st->column_int64(0), st->column_text(1), st->column_text(2)};
}

}  // namespace

TEST_CASE("kvchat GUI killed mid-answer: nothing committed is lost, the answer shows as incomplete, the cache serves",
          "[.kill_gui][ui][e2e]") {
  if (auto why = test::gui_unavailable()) KVC_SKIP(*why);
  test::XvfbDisplay x;
  if (x.display().empty()) KVC_SKIP(x.error());
  const int n_kills = test::kill_count(3);
  const std::string model = test::model_path("tiny-gqa-q8_0.gguf");  // random weights: no early end of text
  test::TempDir tmp;
  const std::filesystem::path data = tmp.path() / "data";
  std::mt19937 rng(20261201);
  int n_survived = 0, n_integrity_ok = 0, n_refused_corrupt = 0;
  int64_t last_id = 0;
  for (int k = 0; k <= n_kills; ++k) {
    const bool last = k == n_kills;
    const std::string script = tmp.file("launch-" + std::to_string(k) + ".json");
    std::ofstream(script) << launch_script(k, last).dump(1);
    test::Child app({KVC_GUI_PATH, "-m", model, "-t", "1", "--data-dir", data.string(), "--script", script},
                    {{"DISPLAY", x.display()}}, tmp.file("app-" + std::to_string(k) + ".log"));
    INFO("launch " << k);
    if (last) {
      const int rc = app.wait_exit(300);
      INFO(app.log());
      REQUIRE(rc == 0);
      break;
    }
    // Wait for the long answer to be on disk with some text, then kill at a random point of it.
    std::string seen;
    int64_t answer_id = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
    for (;;) {
      if (!app.running()) FAIL("the app exited before its answer streamed:\n" << app.log());
      if (std::chrono::steady_clock::now() > deadline) FAIL("no answer streamed in time:\n" << app.log());
      auto n = newest_answer(data / "kvchat.db", question(k));
      if (n && n->id > last_id && n->state == "streaming" && !n->text.empty()) {
        answer_id = n->id;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // Within the answer: the app streams as fast as the engine, and 3,000 tokens of this model at
    // one thread take about a second on a quiet machine.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(rng)));
    if (auto n = newest_answer(data / "kvchat.db", question(k)); n && n->id == answer_id)
      seen = n->text;  // committed before the kill
    REQUIRE(app.kill_now());
    ++n_survived;
    last_id = answer_id;

    const std::string conv_ok = test::integrity(data / "kvchat.db");
    const std::string cold_ok = test::integrity(data / "kv-cache" / "kv_cache.db");
    CHECK(conv_ok == "ok");
    CHECK(cold_ok == "ok");
    n_integrity_ok += (conv_ok == "ok") + (cold_ok == "ok");
    {
      auto store = storage::ConversationStore::open(data / "kvchat.db");
      REQUIRE(store.ok());
      auto answer = (*store)->message(answer_id);
      REQUIRE(answer.ok());
      CHECK(answer->state == storage::MessageState::streaming);  // until the next app marks it
      CHECK(answer->text.substr(0, seen.size()) == seen);
      CHECK(!answer->text.empty());
      auto user = (*store)->message(answer->parent_id);
      REQUIRE(user.ok());
      CHECK(user->role == storage::Role::user);
      CHECK(user->text == question(k));
      CHECK(!user->tokens.empty());
    }
    const test::ColdCheck cold = test::check_cold_store(data / "kv-cache", true, rng);
    CHECK(cold.n_blocks > 0);
    CHECK(cold.n_bad_served == 0);
    CHECK(cold.corrupted_refused);
    CHECK(cold.n_refused == 1);
    n_refused_corrupt += static_cast<int>(cold.n_refused);
  }
  WARN("kills survived: " << n_survived << ", integrity checks passed: " << n_integrity_ok
                          << ", corrupt blocks refused: " << n_refused_corrupt);
  CHECK(n_survived == n_kills);
}

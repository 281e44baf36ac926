// Races at the app's controller, randomised and bounded: a "UI" thread sends, stops, deletes
// conversations, changes tier budgets and restarts the engine at random moments while answers
// stream on the worker thread (the real store, engine runner and disk tier). Every kind of step
// runs at least once (the schedule holds each), some stops and deletes land on an answer seen
// streaming; after every step the snapshot is whole; at the end the stores pass their checks,
// every answer is finished and each conversation a delete was issued for is gone (or its id
// was given to a newer one).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "app/gui/chat_controller.h"
#include "core/sampling/generate_options.h"
#include "storage/conversation_store.h"
#include "storage/sqlite_cold_store.h"
#include "support/kill_support.h"
#include "support/sanitizer.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::shared_ptr<const ui::AppSnapshot> settle(app::ChatController& c, int timeout_s = 120) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    auto s = c.snapshot();
    if (s->model.status == ui::ModelStatus::ready && !c.busy() && !s->chat.generating) return s;
    INFO("model " << static_cast<int>(s->model.status) << ", busy " << c.busy() << ", generating " << s->chat.generating
                  << ", error: " << s->error);
    REQUIRE(s->model.status != ui::ModelStatus::failed);
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The first snapshot for which done(snapshot, busy) holds, polled every millisecond (an answer
// of a few tokens streams for tens of milliseconds); it fails past timeout_s.
template <class Done>
std::shared_ptr<const ui::AppSnapshot> wait_for(app::ChatController& c, Done done, int timeout_s = 300) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const bool busy = c.busy();  // before the snapshot: a snapshot after the last task's end
    auto s = c.snapshot();
    if (done(*s, busy)) return s;
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What every snapshot must satisfy, whatever the worker is doing.
void check_snapshot(const ui::AppSnapshot& s) {
  int64_t parent = 0;
  for (size_t i = 0; i < s.chat.messages.size(); ++i) {
    const ui::MessageView& m = s.chat.messages[i];
    REQUIRE(m.id > 0);
    REQUIRE(m.parent_id == parent);  // one branch, root first
    parent = m.id;
    if (m.streaming) {
      REQUIRE(m.role == ui::Role::assistant);
      REQUIRE(i + 1 == s.chat.messages.size());  // only the answer being written streams
      REQUIRE(s.chat.generating);
    }
  }
  if (!s.chat.messages.empty()) REQUIRE(s.chat.conversation_id != 0);
  if (s.chat.conversation_id != 0) {  // the open conversation is in the list
    REQUIRE(std::any_of(s.conversations.begin(), s.conversations.end(),
                        [&](const ui::ConversationSummary& v) { return v.id == s.chat.conversation_id; }));
  }
}

enum class Step { send, stop, remove, budget, restart };

// n_steps steps in a random order: one of each kind, the rest drawn 4:2:1:2:1 (sends, stops,
// deletes, budget changes, restarts), so that a short run (KVC_RACE_STEPS=5) still takes each.
std::vector<Step> schedule(int n_steps, std::mt19937& rng) {
  std::vector<Step> steps = {Step::send, Step::stop, Step::remove, Step::budget, Step::restart};
  std::discrete_distribution<int> kind({4, 2, 1, 2, 1});
  while (static_cast<int>(steps.size()) < n_steps) steps.push_back(static_cast<Step>(kind(rng)));
  std::shuffle(steps.begin(), steps.end(), rng);
  return steps;
}

}  // namespace

TEST_CASE("controller race: stop, delete, tier budgets and engine restarts while answers stream", "[app][race][e2e]") {
  test::TempDir tmp;
  app::ChatController::Options opt;
  opt.data_dir = tmp.file("data");
  opt.model_path = test::model_path("tiny-gqa-q8_0.gguf");
  opt.n_threads = 2;
  opt.n_ctx = 1024;
  std::mt19937 rng(424242);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  int n_sends = 0, n_stops = 0, n_budgets = 0, n_restarts = 0;
  int n_stops_streaming = 0;                         // stops issued while the snapshot showed an answer streaming
  int n_deletes_open = 0;                            // deletes of the conversation open in the snapshot
  int n_deletes_streaming = 0;                       // of those, while its answer streamed
  std::vector<std::pair<int64_t, int64_t>> deleted;  // (conversation id, wall-clock ms the delete was issued)
  KvBudget last_budget;
  // KVC_RACE_STEPS=N: the documented longer run (README, "Building and testing by hand").
  const std::vector<Step> steps = schedule(test::loop_count("KVC_RACE_STEPS", 40, 20), rng);
  const int n_steps = static_cast<int>(steps.size());
  {
    app::ChatController c(opt);
    auto snap = settle(c);
    // Answers of 64 tokens (24 under a sanitizer) still stream across several steps, and what the
    // races leave queued drains within settle()'s limit on a loaded machine. An answer that is
    // to be stopped mid-stream may run 4 times longer.
    sampling::GenerateOptions gen;
    gen.max_tokens = test::under_sanitizer() ? 24 : 64;
    sampling::GenerateOptions long_gen = gen;
    long_gen.max_tokens = 4 * gen.max_tokens;
    for (int step = 0; step < n_steps; ++step) {
      INFO("step " << step);
      snap = c.snapshot();
      check_snapshot(*snap);
      switch (steps[static_cast<size_t>(step)]) {
        case Step::send:
          if (pick(2) == 0) c.new_conversation();
          c.update_settings("", gen);  // the conversation the send goes to (a new one when the open one was deleted)
          c.send("race " + std::to_string(step) + ": once upon a time there was a little cat in a garden");
          ++n_sends;
          break;
        case Step::stop:
          if (n_stops % 2 == 0) {
            // Every other stop lands on an answer seen streaming: a send, then the stop once the
            // snapshot shows its answer (or any) generating; sent again if the turn ended unseen.
            bool stopped = false;
            for (int attempt = 0; attempt < 5 && !stopped; ++attempt) {
              c.update_settings("", long_gen);
              c.send("race " + std::to_string(step) + ": tell me a long story about a dog and a boat");
              ++n_sends;
              snap = wait_for(c, [](const ui::AppSnapshot& s, bool busy) { return s.chat.generating || !busy; });
              check_snapshot(*snap);
              if (!snap->chat.generating) continue;
              c.stop();
              stopped = true;
              ++n_stops_streaming;
            }
          } else {
            c.stop();
          }
          ++n_stops;
          break;
        case Step::remove: {
          if (snap->conversations.empty()) {
            // Nothing listed (all deleted): a new conversation, deleted once the list shows it.
            c.new_conversation();
            snap = wait_for(c, [](const ui::AppSnapshot& s, bool) { return !s.conversations.empty(); });
            check_snapshot(*snap);
          }
          // The open conversation (its answer may be streaming) until one was deleted, then half of
          // the time, else any listed one. The list may be behind the worker: a second delete of
          // the same id is refused ("no conversation with id N"), or deletes a newer conversation
          // given the id again (the check at the end allows both).
          const bool open = snap->chat.conversation_id != 0 && (n_deletes_open == 0 || pick(2) == 0);
          const int64_t id =
              open ? snap->chat.conversation_id
                   : snap->conversations[static_cast<size_t>(pick(static_cast<int>(snap->conversations.size())))].id;
          deleted.emplace_back(id, now_ms());
          c.delete_conversation(id);
          n_deletes_open += open;
          n_deletes_streaming += open && snap->chat.generating;
          break;
        }
        case Step::budget: {
          KvBudget b;
          b.t1_bytes = (int64_t{1} + pick(8)) << 20;
          b.t2_bytes = (int64_t{64} + pick(64)) << 20;
          c.set_tier_budgets(b);
          last_budget = b;
          ++n_budgets;
          break;
        }
        case Step::restart:
          c.restart_engine();
          ++n_restarts;
          break;
      }
      snap = c.snapshot();
      check_snapshot(*snap);
      std::this_thread::sleep_for(std::chrono::milliseconds(pick(60)));
    }
    c.stop();
    snap = settle(c, 300);
    check_snapshot(*snap);
    // The restarts and the budget changes took: the engine runs on the last budgets.
    CHECK(snap->engine.n_restarts == n_restarts);
    CHECK(snap->engine.budgets == last_budget);
    // The app still chats, and its next turn finds a cached prefix.
    c.update_settings("", gen);
    c.send("after the races: tell me about the cat");
    snap = settle(c, 300);
    check_snapshot(*snap);
    REQUIRE(!snap->chat.messages.empty());
    CHECK(snap->chat.messages.back().role == ui::Role::assistant);
    CHECK(!snap->chat.messages.back().streaming);
  }
  WARN("controller race steps: " << n_steps << " (" << n_sends << " sends, " << n_stops << " stops of which "
                                 << n_stops_streaming << " mid-answer, " << deleted.size() << " deletes of which "
                                 << n_deletes_open << " of the open conversation, " << n_deletes_streaming
                                 << " mid-answer, " << n_budgets << " budget changes, " << n_restarts << " restarts)");
  // Each kind the test names ran.
  CHECK(n_sends > 0);
  CHECK(n_stops > 0);
  CHECK(n_stops_streaming > 0);
  CHECK(!deleted.empty());
  CHECK(n_deletes_open > 0);
  CHECK(n_budgets > 0);
  CHECK(n_restarts > 0);
  CHECK(test::integrity(tmp.path() / "data" / "kvchat.db") == "ok");
  CHECK(test::integrity(tmp.path() / "data" / "kv-cache" / "kv_cache.db") == "ok");
  auto store = storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  auto list = (*store)->list_conversations(0, 1000);
  REQUIRE(list.ok());
  // A delete took: a conversation it was issued for is gone, unless its id was given again to one
  // made after the delete was issued (SQLite reuses the largest rowid once it is deleted).
  for (const auto& [id, issued_ms] : deleted) {
    for (const auto& conv : *list) {
      INFO("conversation " << id << ", delete issued at " << issued_ms << " ms");
      if (conv.id == id) CHECK(conv.created_ms >= issued_ms);
    }
  }
  for (const auto& conv : *list) {
    if (conv.active_leaf == 0) continue;
    auto path = (*store)->path_to(conv.active_leaf);
    REQUIRE(path.ok());
    for (size_t i = 0; i < path->size(); ++i) {
      const auto& m = (*path)[i];
      CHECK(m.state == storage::MessageState::complete);  // no answer left streaming by a clean run
      if (m.role == storage::Role::assistant) CHECK((i > 0 && (*path)[i - 1].role == storage::Role::user));
    }
  }
  auto cold = storage::SqliteColdStore::open(tmp.path() / "data" / "kv-cache");
  REQUIRE(cold.ok());
  (*cold)->check_invariants();
}

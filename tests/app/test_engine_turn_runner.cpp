// EngineTurnRunner: the app's turns on the engine thread stream, reuse history, cancel, and
// resume from the disk tier after the runner (and its RAM tiers) is rebuilt.
#include <catch2/catch.hpp>

#include "app/gui/engine_turn_runner.h"
#include "core/backend/backend.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

model::GenerateOptions greedy(int64_t n) {
  model::GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  o.sampling.repeat_penalty = 1.0f;
  o.stop_at_eog = false;
  return o;
}

std::vector<int32_t> some_tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(1 + (i * 37 + salt * 11) % 500);
  return t;
}

}  // namespace

TEST_CASE("engine turn runner: streams, reuses history, matches a session, cancels, resumes from disk",
          "[app][engine]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("stories260K.gguf"), *be);
  REQUIRE(m.ok());
  test::TempDir dir;
  app::EngineRunnerOptions o;
  o.n_ctx = 256;
  o.budget = {0, int64_t{512} << 20, int64_t{4} << 30, 0};  // T0: two contexts
  o.cold_dir = dir.path() / "kv-cache";

  std::vector<int32_t> stream;  // the conversation's stored token stream
  std::vector<int32_t> second_reply;
  std::vector<int32_t> before_second, second_message;  // turn 2's history and message
  {
    auto r = app::EngineTurnRunner::create(**m, o);
    REQUIRE(r.ok());
    app::EngineTurnRunner& runner = **r;

    app::TurnRequest t1{5, {}, some_tokens(40, 1), greedy(16), {}, {}};
    std::string streamed;
    auto a1 = runner.run(t1, [&](const app::TurnDelta& d) {
      streamed += d.text;
      return true;
    });
    REQUIRE(a1.ok());
    CHECK(a1->tokens.size() == 16);
    CHECK(streamed == a1->text);
    CHECK(a1->stats.n_prompt == 40);
    CHECK(a1->stats.n_prompt_reused == 0);
    stream = t1.segment;
    stream.insert(stream.end(), a1->tokens.begin(), a1->tokens.end());

    app::TurnRequest t2{5, stream, some_tokens(10, 2), greedy(12), {}, {}};
    before_second = t2.history;
    second_message = t2.segment;
    auto a2 = runner.run(t2, [](const app::TurnDelta&) { return true; });
    REQUIRE(a2.ok());
    // Everything but the last sampled token (never evaluated) comes from the cache.
    CHECK(a2->stats.n_prompt_reused >= static_cast<int64_t>(stream.size()) - 1);
    CHECK(a2->stats.n_from_tier[0] == a2->stats.n_prompt_reused);
    // The same tokens on a fresh session give the same greedy reply.
    std::vector<int32_t> prompt2 = stream;
    prompt2.insert(prompt2.end(), t2.segment.begin(), t2.segment.end());
    auto s = model::Session::create(**m, 256);
    REQUIRE(s.ok());
    auto solo = model::generate(*s, prompt2, greedy(12));
    REQUIRE(solo.ok());
    CHECK(a2->tokens == solo->tokens);
    stream = prompt2;
    stream.insert(stream.end(), a2->tokens.begin(), a2->tokens.end());
    second_reply = a2->tokens;

    // Returning false from the stream callback stops the turn (here at its first text). The
    // engine goes on while this thread wakes for that text, and stories260K can fill the whole
    // 256-token context first on a loaded machine (236 tokens take ~30 ms here), so a turn that
    // ended on a full context is asked again, on a new conversation, up to 8 times.
    int attempts = 0;
    Result<app::TurnResult> cancelled = make_error(ErrorCode::internal, "not run");
    do {
      int n_deltas = 0;
      cancelled =
          runner.run({100 + attempts, {}, some_tokens(20, 3), greedy(2000), {}, {}}, [&](const app::TurnDelta& d) {
            ++n_deltas;
            return d.text.empty();
          });
      REQUIRE(cancelled.ok());
      CHECK(n_deltas >= 1);
      ++attempts;
    } while (cancelled->stats.stop_reason == model::to_string(model::StopReason::context_full) && attempts < 8);
    INFO("attempts: " << attempts);
    CHECK(cancelled->stats.stop_reason == model::to_string(model::StopReason::cancelled));
    CHECK(cancelled->tokens.size() < 236);

    ui::MemoryState ms;
    runner.fill_memory(ms);
    REQUIRE(ms.tiers.size() == 3);
    CHECK(ms.tiers[0].used_bytes > 0);
    CHECK(ms.tier_warning.empty());
  }
  // A new runner over the same directory: only the disk tier survived.
  auto r = app::EngineTurnRunner::create(**m, o);
  REQUIRE(r.ok());
  app::EngineTurnRunner& runner = **r;
  runner.prefetch(5, stream);
  auto a3 = runner.run({5, stream, some_tokens(8, 4), greedy(4), {}, {}}, [](const app::TurnDelta&) { return true; });
  REQUIRE(a3.ok());
  const int64_t full_blocks = static_cast<int64_t>(stream.size()) / 16 * 16;
  CHECK(a3->stats.n_from_tier[2] >= full_blocks);  // every full block of the history, from disk
  CHECK(a3->stats.n_prompt_reused >= full_blocks);
  ui::MemoryState ms;
  runner.fill_memory(ms);
  REQUIRE(ms.tiers.size() == 3);
  CHECK(ms.tiers[2].used_bytes > 0);
  // Turn 2 asked again over the restored history (a regenerate after the restart): the blocks
  // read back from disk give the reply computed before the restart, token for token.
  auto again =
      runner.run({5, before_second, second_message, greedy(12), {}, {}}, [](const app::TurnDelta&) { return true; });
  REQUIRE(again.ok());
  CHECK(again->stats.n_from_tier[2] + again->stats.n_from_tier[1] + again->stats.n_from_tier[0] >=
        static_cast<int64_t>(before_second.size()) / 16 * 16);
  CHECK(again->tokens == second_reply);
}

TEST_CASE("engine turn runner: a Gemma model's memory picture has each KV group, owned by the conversation",
          "[app][engine]") {
  auto be = backend::make_cpu_backend(2);
  // tiny-gemma3-f16: 5 local layers (window 64) and 1 global; blocks of 16 tokens.
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  app::EngineRunnerOptions o;
  o.n_ctx = 512;
  auto r = app::EngineTurnRunner::create(**m, o);
  REQUIRE(r.ok());
  app::EngineTurnRunner& runner = **r;
  std::vector<int32_t> history;
  for (int turn = 0; turn < 2; ++turn) {  // two turns: the second extends the stream's keys
    auto a = runner.run({9, history, some_tokens(150, turn), greedy(10), {}, {}},
                        [](const app::TurnDelta&) { return true; });
    REQUIRE(a.ok());
    const std::vector<int32_t> msg = some_tokens(150, turn);
    history.insert(history.end(), msg.begin(), msg.end());
    history.insert(history.end(), a->tokens.begin(), a->tokens.end());
  }
  ui::MemoryState ms;
  runner.fill_memory(ms);
  const ui::KvPicture& global = ms.kv;
  REQUIRE(global.more_groups.size() == 1);
  const ui::KvPicture& local = global.more_groups[0];
  CHECK(global.n_layers == 1);
  CHECK(global.window == 0);
  CHECK(local.group == 1);
  CHECK(local.n_layers == 5);
  CHECK(local.window == 64);
  CHECK(local.block_bytes == 5 * global.block_bytes);
  // Both groups hold the conversation's full blocks, attributed to it through each group's chain.
  const auto n_full = static_cast<int64_t>(history.size()) / 16;
  for (const ui::KvPicture* g : {&global, &local}) {
    int64_t n_owned = 0;
    for (const kv::KvBlockView& b : g->blocks) n_owned += !b.is_private && b.owner_id == 9;
    CHECK(n_owned >= n_full - 1);
    CHECK(g->group_used_blocks[0] > 0);
    REQUIRE(!g->shares.empty());
    CHECK(g->shares[0].owner == 9);
  }
  CHECK(global.used_bytes[0] == global.group_used_bytes[0] + local.group_used_bytes[0]);
}

TEST_CASE("engine turn runner: the memory state lists every KV group with its kind and bytes per token",
          "[app][engine]") {
  auto be = backend::make_cpu_backend(1);
  auto m = model::Model::load(test::model_path("tiny-gemma3-f16.gguf"), *be);
  REQUIRE(m.ok());
  app::EngineRunnerOptions o;
  o.n_ctx = 256;
  auto r = app::EngineTurnRunner::create(**m, o);
  REQUIRE(r.ok());
  ui::MemoryState ms;
  (*r)->fill_memory(ms);
  REQUIRE(ms.kv_groups.size() == 2);
  CHECK(ms.kv_groups[0].kind == "full");
  CHECK(ms.kv_groups[0].n_layers == 1);
  CHECK(ms.kv_groups[1].kind == "window");
  CHECK(ms.kv_groups[1].window == 64);
  CHECK(ms.kv_groups[1].n_layers == 5);
  // F16 K and V of 2 KV heads of 64 per layer: 512 bytes per token and layer.
  CHECK(ms.kv_groups[0].bytes_per_token == 512.0);
  CHECK(ms.kv_groups[1].bytes_per_token == 5 * 512.0);
  CHECK(ms.kv_bytes_per_token == 6 * 512.0);
}

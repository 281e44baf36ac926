// Restart: a conversation reopened over the disk tier recomputes no history and answers the same.
#include <catch2/catch.hpp>

#include "core/backend/backend.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;

TEST_CASE("restart: a 1,200-token history resumes from the disk tier with identical output", "[storage][e2e]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gqa-q8_0.gguf"), *be);
  REQUIRE(m.ok());
  std::vector<int32_t> history = {1};
  for (int i = 1; i < 1200; ++i) history.push_back(3 + (i * 7919) % 31000);
  const std::vector<int32_t> message = {450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366};
  model::GenerateOptions greedy;
  greedy.max_tokens = 16;
  greedy.sampling.temperature = 0;
  greedy.sampling.repeat_penalty = 1.0f;
  greedy.stop_at_eog = false;

  std::vector<int32_t> stream;  // the conversation's stored token stream after turn 1
  std::vector<int32_t> uninterrupted;
  {
    auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
    REQUIRE(cold.ok());
    model::SessionOptions o;
    o.n_ctx = 1400;
    o.cold = cold->get();
    auto s = model::Session::create(**m, o);
    REQUIRE(s.ok());
    auto turn1 = model::generate(*s, history, greedy);
    REQUIRE(turn1.ok());
    stream = history;
    stream.insert(stream.end(), turn1->tokens.begin(), turn1->tokens.end());
    auto prompt = stream;
    prompt.insert(prompt.end(), message.begin(), message.end());
    auto turn2 = model::generate(*s, prompt, greedy);
    REQUIRE(turn2.ok());
    uninterrupted = turn2->tokens;
  }  // everything closed: the store drains its queue to disk

  auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
  REQUIRE(cold.ok());
  REQUIRE((*cold)->stats().n_blocks >= static_cast<int64_t>(stream.size() / 16));
  model::SessionOptions o;
  o.n_ctx = 1400;
  o.cold = cold->get();
  auto s = model::Session::create(**m, o);
  REQUIRE(s.ok());
  auto prompt = stream;
  prompt.insert(prompt.end(), message.begin(), message.end());
  auto resumed = model::generate(*s, prompt, greedy);
  REQUIRE(resumed.ok());
  // 1,200 + 16 tokens are 76 full blocks, all read back from disk: only the message is computed.
  CHECK(stream.size() == 1216);
  CHECK(resumed->prefix.n_from_tier[2] == 1216);
  CHECK(resumed->prefix.n_cached == 1216);
  CHECK(resumed->prefix.n_recomputed_bad == 0);
  CHECK(s->cache().counters().n_promotions[2][0] == 76);
  CHECK(resumed->tokens == uninterrupted);
}

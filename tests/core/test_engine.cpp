// Engine: continuous batching under a tight T0 budget gives each conversation its solo output.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/backend/backend.h"
#include "core/engine/engine.h"
#include "core/kv/kv_metrics.h"
#include "core/kv/stream_keys.h"
#include "core/kv/trace_export.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

struct Fixture : test::LoadedModel {
  std::unique_ptr<kv::KvCache> cache(int64_t t0_blocks, int64_t t1_blocks, kv::ColdStore* cold = nullptr) {
    auto layout = kernels::make_kv_block_layout(
        static_cast<int>(m->config().n_layer), static_cast<int>(m->config().n_head_kv),
        static_cast<int>(m->config().head_dim), 16, kernels::KvType::f16, kernels::KvType::f16);
    REQUIRE(layout);
    kv::KvCacheConfig c;
    c.layout = *layout;
    c.t0_bytes = t0_blocks * layout->block_bytes;
    c.t1_bytes = t1_blocks * layout->block_bytes;
    c.fingerprint = model::kv_fingerprint(*m, *layout);
    auto r = kv::KvCache::create(c, *be, cold);
    REQUIRE(r.ok());
    return std::move(*r);
  }
};

engine::RequestOptions greedy(int64_t n) {
  engine::RequestOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  o.sampling.repeat_penalty = 1.0f;
  o.stop_at_eog = false;
  return o;
}

std::vector<int32_t> conversation_prompt(const std::vector<int32_t>& system, int c) {
  std::vector<int32_t> p = system;
  for (int i = 0; i < 24; ++i) p.push_back(100 + (c * 977 + i * 131) % 30000);
  return p;
}

std::vector<int32_t> solo(const model::Model& m, const std::vector<int32_t>& prompt, int64_t n) {
  auto s = model::Session::create(m, 256);
  REQUIRE(s.ok());
  model::GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  o.sampling.repeat_penalty = 1.0f;
  o.stop_at_eog = false;
  auto r = model::generate(*s, prompt, o);
  REQUIRE(r.ok());
  return r->tokens;
}

}  // namespace

TEST_CASE("engine: 8 conversations under a T0 budget for 2 match their solo outputs", "[core][engine]") {
  Fixture f;
  const std::vector<int32_t> system = {1,   450, 4996,  17354, 1701,  29916, 432, 17204,
                                       975, 278, 17366, 11203, 29889, 18914, 260, 4285};
  constexpr int64_t n_gen = 24;
  // Each conversation: 16 system + 24 own tokens + 24 generated = 64 tokens = 4 blocks, and
  // admission asks for one more. T0 holds 11 blocks: two conversations at a time.
  auto cache = f.cache(11, 64);
  engine::EngineOptions eo;
  eo.token_budget = 64;
  eo.max_running = 8;
  engine::Engine eng(*f.m, *cache, eo);
  std::vector<engine::RequestId> ids;
  std::vector<std::vector<int32_t>> want;
  for (int c = 0; c < 8; ++c) {
    const auto prompt = conversation_prompt(system, c);
    want.push_back(solo(*f.m, prompt, n_gen));
    ids.push_back(eng.submit({c + 1, prompt, greedy(n_gen), {}, {}}));
  }
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  for (int c = 0; c < 8; ++c) {
    auto r = eng.result(ids[static_cast<size_t>(c)]);
    REQUIRE(r);
    INFO("conversation " << c << ": " << r->error.message);
    REQUIRE(r->state == engine::RequestState::finished);
    CHECK(r->reason == model::StopReason::max_tokens);
    CHECK(r->tokens == want[static_cast<size_t>(c)]);
  }
  const auto st = eng.stats();
  CHECK(st.n_preemptions > 0);   // the budget really was too small for all at once
  CHECK(st.max_batch_rows > 1);  // several sequences shared forward passes
  CHECK(cache->counters().n_alloc_failures > 0);
  REQUIRE(cache->check_invariants().ok());
}

TEST_CASE("engine: a shared system prompt is computed once", "[core][engine]") {
  Fixture f;
  std::vector<int32_t> system;
  for (int i = 0; i < 48; ++i) system.push_back(1 + (i * 7919) % 31000);
  auto cache = f.cache(64, 0);
  engine::Engine eng(*f.m, *cache);
  const auto first = eng.submit({1, conversation_prompt(system, 1), greedy(4), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  const auto second = eng.submit({2, conversation_prompt(system, 2), greedy(4), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  CHECK(eng.result(first)->prefix.n_cached == 0);
  CHECK(eng.result(second)->prefix.n_cached == 48);  // the system prompt's 3 blocks
}

TEST_CASE("engine: a request that can never fit fails clearly, cancel stops a request", "[core][engine]") {
  Fixture f;
  auto cache = f.cache(4, 0);
  engine::Engine eng(*f.m, *cache);
  std::vector<int32_t> long_prompt(200, 5);
  const auto big = eng.submit({0, long_prompt, greedy(8), {}, {}});
  const auto bad = eng.submit({0, {1, 99999}, greedy(8), {}, {}});
  const auto ok = eng.submit({0, {1, 2, 3}, greedy(1000), {}, {}});
  const auto fills = eng.submit({0, {1, 2, 4}, greedy(1000), {}, {}});
  for (int i = 0; i < 3; ++i) eng.step();
  eng.cancel(ok);
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  CHECK(eng.result(big)->state == engine::RequestState::failed);
  CHECK_THAT(eng.result(big)->error.message, Catch::Contains("KV blocks"));
  CHECK(eng.result(bad)->state == engine::RequestState::failed);
  CHECK_THAT(eng.result(bad)->error.message, Catch::Contains("vocabulary"));
  CHECK(eng.result(ok)->state == engine::RequestState::cancelled);
  CHECK(eng.result(ok)->tokens.size() < 1000);
  // Alone in 4 blocks, a reply longer than the pool ends with "context full".
  CHECK(eng.result(fills)->state == engine::RequestState::finished);
  CHECK(eng.result(fills)->reason == model::StopReason::context_full);
  CHECK(eng.result(fills)->tokens.size() >= 40);
  REQUIRE(cache->check_invariants().ok());
}

TEST_CASE("engine: the engine thread serves requests submitted from another thread", "[core][engine]") {
  Fixture f;
  auto cache = f.cache(64, 0);
  engine::Engine eng(*f.m, *cache);
  eng.start();
  std::string streamed;
  const auto id = eng.submit({7,
                              {1, 450, 4996},
                              greedy(12),
                              [&](std::string_view t) {
                                streamed += t;
                                return true;
                              },
                              {}});
  for (int i = 0; i < 2000 && eng.result(id)->state != engine::RequestState::finished; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  eng.stop();
  const auto r = eng.result(id);
  REQUIRE(r->state == engine::RequestState::finished);
  CHECK(r->tokens.size() == 12);
  CHECK(streamed == r->text);
  CHECK(r->ttft_ms > 0);
}

TEST_CASE("engine: events describe each turn and export to a Chrome trace", "[core][engine]") {
  Fixture f;
  auto cache = f.cache(64, 16);
  kv::KvEventLog log(1 << 14);
  engine::EngineOptions eo;
  eo.events = &log;
  engine::Engine eng(*f.m, *cache, eo);
  std::vector<int32_t> history;
  for (int i = 0; i < 40; ++i) history.push_back(1 + (i * 7919) % 31000);
  const auto first = eng.submit({1, history, greedy(6), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  auto next = history;
  const auto r1 = eng.result(first);
  next.insert(next.end(), r1->tokens.begin(), r1->tokens.end());
  next.insert(next.end(), {4242, 4243, 4244});
  const auto second = eng.submit({1, next, greedy(6), {}, {}});
  REQUIRE(eng.run_until_idle().ok());

  std::vector<kv::KvEvent> events;
  const auto read = log.read_since(0, events);
  CHECK(read.n_lost == 0);
  kv::TurnTimeline timeline(0);
  timeline.add(events);
  const kv::RequestMetrics* t1 = timeline.find(first);
  const kv::RequestMetrics* t2 = timeline.find(second);
  REQUIRE((t1 && t2));
  CHECK(t1->finished());
  CHECK(t1->n_missed_tokens == 40 - 0);  // a cold first turn: nothing cached
  CHECK(t2->finished());
  // The second turn reuses the whole first turn from T0 — its blocks and its private tail:
  // 40 prompt tokens and 5 of the 6 replies (the last sampled token was never evaluated).
  CHECK(eng.result(second)->prefix.n_cached == 45);
  CHECK(t2->n_missed_tokens == 4);
  CHECK(t2->n_cached_tokens[0] == 32);  // hits count full shared blocks; the tail is the sequence's own
  CHECK(t2->ttft_ms() > 0);
  CHECK(t2->n_generated_tokens == 6);
  const auto r2 = eng.result(second);
  CHECK(r2->ttft_ms >= r2->prefill_ms);

  const std::string trace = kv::to_chrome_trace_json(events);
  CHECK_THAT(trace,
             Catch::Contains("\"traceEvents\"") && Catch::Contains("\"request 2\"") && Catch::Contains("\"prefill\""));
  const std::string csv = kv::to_csv(events);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == static_cast<long>(events.size()) + 1);
}

TEST_CASE("engine: on_done, unlimited max_tokens up to n_ctx, forget, and the observer", "[core][engine]") {
  Fixture f;
  auto cache = f.cache(64, 0);
  engine::EngineOptions o;
  o.n_ctx = 40;
  int n_observed = 0;
  Status observed_ok;
  o.observer = [&](const kv::KvCache& c, bool) {
    ++n_observed;
    if (Status st = c.check_invariants(); !st.ok()) observed_ok = st;
  };
  engine::Engine eng(*f.m, *cache, o);
  std::vector<engine::RequestResult> done;
  auto on_done = [&](const engine::RequestResult& r) { done.push_back(r); };
  const auto open = eng.submit({3, {1, 450, 4996, 17354, 1701, 29916, 432, 17204}, greedy(-1), {}, on_done});
  const auto too_long = eng.submit({4, std::vector<int32_t>(40, 7), greedy(4), {}, on_done});
  REQUIRE(done.size() == 1);  // the refused request ends at once
  CHECK(done[0].state == engine::RequestState::failed);
  CHECK_THAT(done[0].error.message, Catch::Contains("fills the context of 40"));
  REQUIRE(eng.run_until_idle().ok());
  REQUIRE(done.size() == 2);
  CHECK(done[1].state == engine::RequestState::finished);
  CHECK(done[1].reason == model::StopReason::context_full);
  CHECK(done[1].tokens.size() == 32);  // 8 prompt + 32 generated = n_ctx
  const auto open_result = eng.result(open);
  CHECK(done[1].tokens == open_result->tokens);
  CHECK(n_observed > 0);
  CHECK(observed_ok.ok());
  eng.forget(open);
  eng.forget(too_long);
  CHECK_FALSE(eng.result(open).has_value());
  CHECK_FALSE(eng.result(too_long).has_value());
}

TEST_CASE("engine: prefetch brings a demoted conversation back to T0 and keeps its tier in the stats",
          "[core][engine]") {
  Fixture f;
  auto cache = f.cache(64, 64);
  engine::Engine eng(*f.m, *cache);
  std::vector<int32_t> history;
  for (int i = 0; i < 64; ++i) history.push_back(1 + (i * 4099) % 31000);
  const auto first = eng.submit({9, history, greedy(4), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  std::vector<int32_t> stream = history;
  const auto first_result = eng.result(first);
  stream.insert(stream.end(), first_result->tokens.begin(), first_result->tokens.end());

  cache->demote_all_unpinned(kv::Tier::t1);  // as if other conversations had pushed it out
  const int64_t t0_before = cache->tier_usage(kv::Tier::t0).used_blocks;
  eng.prefetch(9, stream);
  REQUIRE(eng.run_until_idle().ok());
  CHECK(cache->tier_usage(kv::Tier::t0).used_blocks >= t0_before + 4);  // 64 history tokens = 4 blocks

  std::vector<int32_t> next = stream;
  for (int i = 0; i < 5; ++i) next.push_back(300 + i);
  const int64_t promoted_t1 = cache->counters().n_promotions[1][0];
  const auto second = eng.submit({9, next, greedy(4), {}, {}});
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  const auto second_result = eng.result(second);
  const kv::PrefixInfo& p = second_result->prefix;
  CHECK(p.n_cached >= 64);
  CHECK(p.n_from_tier[1] >= 64);  // found on T1 by the prefetch, not counted as a T0 hit
  CHECK(p.n_from_tier[0] + p.n_from_tier[1] + p.n_from_tier[2] == p.n_cached);
  CHECK(cache->counters().n_promotions[1][0] == promoted_t1);  // nothing was left to promote at admission
}

namespace {

// A cold store whose batched reads wait until the test opens the gate: a slow disk.
class GatedColdStore final : public kv::ColdStore {
 public:
  explicit GatedColdStore(int64_t capacity) : inner_(capacity) {}
  bool put(const kv::BlockKey& k, const kv::BlockKey& p, const kv::BlockKey& f, std::span<const uint8_t> b) override {
    return inner_.put(k, p, f, b);
  }
  bool contains(const kv::BlockKey& k) const override { return inner_.contains(k); }
  kv::ColdRead read(const kv::BlockKey& k, std::span<uint8_t> out) override { return inner_.read(k, out); }
  std::vector<kv::ColdRead> read_many(std::span<const kv::BlockKey> keys,
                                      std::span<const std::span<uint8_t>> outs) override {
    std::unique_lock lock(mu_);
    ++n_waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    --n_waiting_;
    return inner_.read_many(keys, outs);
  }
  void release(std::span<const kv::BlockKey> keys) override { inner_.release(keys); }
  kv::ColdStoreStats stats() const override { return inner_.stats(); }
  void flush() override {}

  void set_open(bool open) {
    std::lock_guard lock(mu_);
    open_ = open;
    cv_.notify_all();
  }
  bool wait_for_reader() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return n_waiting_ > 0; });
  }

 private:
  kv::MemoryColdStore inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int n_waiting_ = 0;
};

}  // namespace

TEST_CASE("engine: a history read from disk is staged while other conversations keep decoding", "[core][engine]") {
  Fixture f;
  GatedColdStore cold(int64_t{1} << 30);
  auto made = f.cache(64, 64, &cold);
  kv::KvCache& cache = *made;
  engine::Engine eng(*f.m, cache);

  // Conversation 2's first turn, then everything pushed down to disk.
  std::vector<int32_t> history;
  for (int i = 0; i < 64; ++i) history.push_back(1 + (i * 7001) % 31000);
  const auto first = eng.submit({2, history, greedy(4), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  const auto first_result = eng.result(first);
  std::vector<int32_t> next = history;
  next.insert(next.end(), first_result->tokens.begin(), first_result->tokens.end());
  for (int i = 0; i < 6; ++i) next.push_back(500 + i);
  cache.demote_all_unpinned(kv::Tier::t2);
  REQUIRE(cache.tier_usage(kv::Tier::t0).used_blocks <= 1);  // the parked sequence's private tail

  // Conversation 1 decodes; conversation 2's next turn arrives while the disk is slow.
  const std::vector<int32_t> other = {1, 450, 4996, 17354};
  const auto busy = eng.submit({1, other, greedy(40), {}, {}});
  for (int i = 0; i < 3; ++i) eng.step();
  cold.set_open(false);
  const auto resumed = eng.submit({2, next, greedy(6), {}, {}});
  eng.step();  // starts the read on a worker
  REQUIRE(cold.wait_for_reader());
  const size_t before = eng.result(busy)->tokens.size();
  for (int i = 0; i < 5; ++i) {
    REQUIRE(eng.step());
    REQUIRE(eng.check_invariants().ok());
  }
  CHECK(eng.result(busy)->tokens.size() == before + 5);                // kept decoding
  CHECK(eng.result(resumed)->state == engine::RequestState::waiting);  // still reading
  cold.set_open(true);
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());

  const auto r = eng.result(resumed);
  REQUIRE(r->state == engine::RequestState::finished);
  CHECK(r->prefix.n_from_tier[2] >= 64);  // served from disk (through T1), reported as disk
  CHECK(r->prefix.n_cached >= 64);
  CHECK(r->promote_ms > 0);
  CHECK(eng.stats().n_staged_requests == 1);
  CHECK(eng.stats().n_staged_blocks >= 4);
  CHECK(r->tokens == solo(*f.m, next, 6));
  CHECK(eng.result(busy)->tokens == solo(*f.m, other, 40));
}

TEST_CASE("engine: forgetting a deleted conversation drops its own blocks and keeps the shared ones",
          "[core][engine]") {
  Fixture f;
  kv::MemoryColdStore cold(int64_t{1} << 30);
  auto made = f.cache(64, 16, &cold);
  kv::KvCache& cache = *made;
  engine::Engine eng(*f.m, cache);

  std::vector<int32_t> system;
  for (int i = 0; i < 32; ++i) system.push_back(1 + (i * 613) % 31000);  // 2 shared blocks
  auto stream_of = [&](int conv) {
    std::vector<int32_t> p = system;
    for (int i = 0; i < 40; ++i) p.push_back(100 + (conv * 389 + i * 97) % 30000);
    return p;
  };
  const auto p1 = stream_of(1), p2 = stream_of(2);
  eng.submit({1, p1, greedy(4), {}, {}});
  eng.submit({2, p2, greedy(4), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  cold.flush();

  const std::vector<kv::BlockKey> k1 = kv::stream_block_keys(cache.fingerprint(), 16, p1);
  const std::vector<kv::BlockKey> k2 = kv::stream_block_keys(cache.fingerprint(), 16, p2);
  REQUIRE(k1.size() == 4);
  REQUIRE(k1[0] == k2[0]);
  REQUIRE(k1[1] == k2[1]);
  const std::vector<std::vector<int32_t>> dead = {p1}, live = {p2};
  std::vector<kv::BlockKey> gone = kv::unshared_block_keys(cache.fingerprint(), 16, dead, live);
  REQUIRE(gone.size() == 2);  // conversation 1's own blocks 2 and 3
  const int64_t t0_before = cache.tier_usage(kv::Tier::t0).used_blocks;

  eng.forget_conversation(1, gone);
  REQUIRE(eng.run_until_idle([&] { return eng.check_invariants(); }).ok());
  for (const kv::BlockKey& k : gone) {
    CHECK_FALSE(cache.index().find(k).has_value());
    CHECK_FALSE(cold.contains(k));
  }
  CHECK(cache.index().find(k1[0]).has_value());
  CHECK(cold.contains(k1[1]));
  // Its two blocks and its sequence's private tail left T0.
  CHECK(cache.tier_usage(kv::Tier::t0).used_blocks <= t0_before - 3);

  std::vector<int32_t> next = p2;
  next.push_back(77);
  const auto again = eng.submit({2, next, greedy(2), {}, {}});
  REQUIRE(eng.run_until_idle().ok());
  CHECK(eng.result(again)->prefix.n_cached >= 72);
}

// Races, randomised and bounded: while answers stream on the engine's own thread, another thread
// submits, cancels, forgets (deletes) conversations, prefetches and restarts the engine's thread
// (stop, which lets what is running finish; check_invariants; start) at random moments; the cache's invariants are
// checked on the stepping thread after every step, the engine's after every restart. Run under the tsan and debug
// (ASan) presets as well as in the normal build.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "core/backend/backend.h"
#include "core/engine/engine.h"
#include "core/kv/cold_store.h"
#include "core/kv/stream_keys.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "support/sanitizer.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::unique_ptr<kv::KvCache> make_cache(const model::Model& m, backend::Backend& be, kv::ColdStore* cold) {
  auto layout = kernels::make_kv_block_layout(
      static_cast<int>(m.config().n_layer), static_cast<int>(m.config().n_head_kv),
      static_cast<int>(m.config().head_dim), 16, kernels::KvType::f16, kernels::KvType::f16);
  REQUIRE(layout);
  kv::KvCacheConfig c;
  c.layout = *layout;
  c.t0_bytes = 48 * layout->block_bytes;  // tight: preemption and demotion happen
  c.t1_bytes = 24 * layout->block_bytes;
  c.fingerprint = model::kv_fingerprint(m, *layout);
  auto r = kv::KvCache::create(c, be, cold);
  REQUIRE(r.ok());
  return std::move(*r);
}

std::vector<int32_t> prompt_of(int conv, int turn) {
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(1 + (i * 613) % 31000);  // a shared system prompt
  for (int t = 0; t <= turn; ++t) {
    for (int i = 0; i < 20; ++i) p.push_back(100 + (conv * 389 + t * 53 + i * 97) % 30000);
  }
  return p;
}

}  // namespace

TEST_CASE("engine race: cancel, forget, prefetch and restart from another thread while answers stream",
          "[core][engine][race]") {
  auto be = backend::make_cpu_backend(2);
  auto loaded = model::Model::load(test::model_path("tiny-gqa-q8_0.gguf"), *be);
  REQUIRE(loaded.ok());
  const model::Model& m = **loaded;
  kv::MemoryColdStore cold(int64_t{1} << 30);
  auto cache = make_cache(m, *be, &cold);

  std::atomic<int64_t> n_observed{0};
  std::mutex bad_mu;
  std::string bad;  // the first invariant the observer saw broken
  engine::EngineOptions eo;
  eo.token_budget = 64;
  eo.max_running = 4;
  eo.observer = [&](const kv::KvCache& c, bool) {
    ++n_observed;
    if (Status st = c.check_invariants(); !st.ok()) {
      std::lock_guard lock(bad_mu);
      if (bad.empty()) bad = st.error().message;
    }
  };
  auto eng = std::make_unique<engine::Engine>(m, *cache, eo);
  eng->start();

  std::mt19937 rng(1234567);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  struct Live {
    engine::RequestId id;
    int conv;
    std::shared_ptr<std::atomic<bool>> stop;
    std::shared_ptr<std::atomic<int64_t>> n_pieces;
  };
  std::vector<Live> live;
  std::map<int, int> turns;  // conversation -> turns submitted
  int n_submitted = 0, n_cancelled = 0, n_forgotten = 0, n_restarts = 0, n_prefetches = 0;
  // KVC_RACE_STEPS=N: the documented longer run (README, "Building and testing by hand").
  const int n_steps = test::loop_count("KVC_RACE_STEPS", 80, 40);
  for (int step = 0; step < n_steps; ++step) {
    const int action = pick(10);
    const int conv = 1 + pick(5);
    if (action < 4 || live.empty()) {
      engine::RequestOptions o;
      o.max_tokens = 8 + pick(40);
      o.sampling.temperature = 0;
      o.stop_at_eog = false;
      auto stop = std::make_shared<std::atomic<bool>>(false);
      auto pieces = std::make_shared<std::atomic<int64_t>>(0);
      const auto id = eng->submit({conv,
                                   prompt_of(conv, turns[conv]++ % 3),
                                   o,
                                   [stop, pieces](std::string_view) {
                                     ++*pieces;
                                     return !stop->load();
                                   },
                                   {}});
      live.push_back({id, conv, stop, pieces});
      ++n_submitted;
    } else if (action < 6) {
      Live& l = live[static_cast<size_t>(pick(static_cast<int>(live.size())))];
      if (pick(2)) {
        eng->cancel(l.id);
      } else {
        *l.stop = true;  // the stream's callback says stop
      }
      ++n_cancelled;
    } else if (action < 7) {
      // Delete a conversation: its blocks that no other conversation reaches go.
      std::vector<std::vector<int32_t>> dead, rest;
      for (int t = 0; t < 3; ++t) dead.push_back(prompt_of(conv, t));
      for (int c = 1; c <= 5; ++c) {
        if (c != conv) rest.push_back(prompt_of(c, 2));
      }
      eng->forget_conversation(conv, kv::unshared_block_keys(cache->fingerprint(), 16, dead, rest));
      ++n_forgotten;
    } else if (action < 8) {
      eng->prefetch(conv, prompt_of(conv, 1));
      ++n_prefetches;
    } else if (action < 9) {
      // Engine restart mid-stream: stop() returns once the thread is idle (running requests end
      // first), then the engine is checked whole and started again with the rest queued.
      eng->stop();
      const Status st = eng->check_invariants();
      INFO("step " << step);
      REQUIRE(st.ok());
      REQUIRE(cache->check_invariants().ok());
      eng->start();
      ++n_restarts;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pick(15000)));
    {
      std::lock_guard lock(bad_mu);
      INFO("step " << step);
      REQUIRE(bad.empty());
    }
  }
  // Every request ends: finished, cancelled, or failed with a reason.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (const Live& l : live) {
    for (;;) {
      auto r = eng->result(l.id);
      REQUIRE(r.has_value());
      if (r->state == engine::RequestState::finished || r->state == engine::RequestState::cancelled) break;
      if (r->state == engine::RequestState::failed) {
        CHECK(!r->error.message.empty());
        break;
      }
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  eng->stop();
  CHECK(eng->check_invariants().ok());
  CHECK(cache->check_invariants().ok());
  // A fresh engine on the same cache (a restart of the runner) still answers, from the cache.
  eng.reset();
  engine::Engine again(m, *cache, eo);
  engine::RequestOptions o;
  o.max_tokens = 4;
  o.sampling.temperature = 0;
  o.stop_at_eog = false;
  const auto id = again.submit({9, prompt_of(2, 0), o, {}, {}});
  REQUIRE(again.run_until_idle([&] { return again.check_invariants(); }).ok());
  const auto r = again.result(id);
  REQUIRE(r.has_value());
  CHECK(r->state == engine::RequestState::finished);
  CHECK(r->prefix.n_cached >= 32);  // the shared system prompt, at least
  std::lock_guard lock(bad_mu);
  CHECK(bad.empty());
  CHECK(n_observed.load() > n_steps);
  WARN("race steps: " << n_steps << " (" << n_submitted << " submits, " << n_cancelled << " cancels, " << n_forgotten
                      << " deletes, " << n_prefetches << " prefetches, " << n_restarts << " restarts)");
}

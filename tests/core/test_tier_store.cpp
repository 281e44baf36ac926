// TierStore's contract under a cold store that evicts or refuses blocks the index lists: no hit is promised that cannot
// be served.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/backend/backend.h"
#include "core/kv/cold_store.h"
#include "core/kv/kv_cache.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

struct Fixture : test::LoadedModel {};

using test::tokens_of;

std::vector<float> fresh_logits(const model::Model& m, std::span<const int32_t> tokens) {
  auto s = model::Session::create(m, 256);
  REQUIRE(s.ok());
  auto l = s->evaluate(tokens);
  REQUIRE(l.ok());
  return {l->begin(), l->end()};
}

// The chain keys of the full blocks of `tokens`.
std::vector<kv::BlockKey> chain_of(const kv::KvCache& c, std::span<const int32_t> tokens) {
  std::vector<kv::BlockKey> keys;
  kv::BlockKey k = c.fingerprint();
  const auto B = static_cast<size_t>(c.block_tokens());
  for (size_t p = 0; p + B <= tokens.size(); p += B) keys.push_back(k = kv::chain_key(k, tokens.subspan(p, B)));
  return keys;
}

int64_t sum3(const int64_t (&a)[3]) { return a[0] + a[1] + a[2]; }
int64_t sum3(const std::array<int64_t, 3>& a) { return a[0] + a[1] + a[2]; }

}  // namespace

TEST_CASE(
    "tier store: a cold store that evicts blocks the index lists on T2 is recomputed past them, the counters add up",
    "[core][kv]") {
  Fixture f;
  const auto all = tokens_of(90);  // 5 full blocks, then a tail
  const auto prompt = std::span<const int32_t>(all).first(85);
  const auto want = fresh_logits(*f.m, all);
  model::SessionOptions o;
  o.n_ctx = 256;
  auto probe = model::Session::create(*f.m, o);
  REQUIRE(probe.ok());
  const int64_t bb = probe->cache().layout().block_bytes;
  kv::MemoryColdStore cold(2 * bb + bb / 2);  // room for two blocks: LRU-collects the rest
  o.cold = &cold;
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  kv::KvCache& c = s->cache();
  REQUIRE(s->evaluate(prompt).ok());
  s->clear();
  c.demote_all_unpinned(kv::Tier::t2);
  REQUIRE(c.check_invariants().ok());
  // The index lists every block on T2; the store kept fewer.
  REQUIRE(c.index().stats().n_blocks_on_tier[kv::tier_index(kv::Tier::t2)] == 5);
  REQUIRE(cold.stats().n_blocks < 5);
  REQUIRE(cold.stats().n_collected > 0);
  const std::vector<kv::BlockKey> keys = chain_of(c, prompt);
  int64_t n_servable = 0;  // the leading blocks the store can still serve
  while (n_servable < 5 && cold.contains(keys[static_cast<size_t>(n_servable)])) ++n_servable;
  INFO("servable leading blocks: " << n_servable << " of 5, store holds " << cold.stats().n_blocks);
  REQUIRE(n_servable < 5);

  const kv::KvCounters before = c.counters();
  auto got = s->evaluate(all);
  REQUIRE(got.ok());
  const kv::PrefixInfo& p = s->last_prefix();
  const kv::KvCounters& after = c.counters();
  // Served exactly what the store could give, recomputed the rest, and said so.
  CHECK(p.n_cached == 16 * n_servable);
  CHECK(p.n_from_tier[2] == 16 * n_servable);
  CHECK(sum3(p.n_from_tier) == p.n_cached);
  CHECK(p.n_recomputed_bad == 16);  // the first missing block ends the prefix
  CHECK(s->n_evaluated() == 90 - p.n_cached);
  CHECK(after.n_promotions[2][0] - before.n_promotions[2][0] == n_servable);
  CHECK(after.n_hit_tokens[2] - before.n_hit_tokens[2] == p.n_from_tier[2]);
  CHECK(sum3(after.n_hit_tokens) - sum3(before.n_hit_tokens) == p.n_cached);
  CHECK(after.n_missed_tokens - before.n_missed_tokens == 90 - p.n_cached);
  CHECK(after.n_corrupt_blocks == before.n_corrupt_blocks);  // missing is not corrupt
  {
    double max_diff = 0;
    for (size_t i = 0; i < want.size(); ++i)
      max_diff = std::max(max_diff, std::abs(static_cast<double>((*got)[i]) - static_cast<double>(want[i])));
    CHECK(max_diff == 0.0);
  }
  REQUIRE(c.check_invariants().ok());

  // The missing block is no longer promised: the next lookup (a prefetch) serves what it can
  // and counts nothing it cannot read.
  s->clear();
  c.demote_all_unpinned(kv::Tier::t2);
  const kv::PrefixInfo pre = c.prefetch(prompt);
  CHECK(pre.n_cached == sum3(pre.n_from_tier));
  int64_t n_now = 0;
  while (n_now < 5 && cold.contains(keys[static_cast<size_t>(n_now)])) ++n_now;
  CHECK(pre.n_cached <= 16 * 5);
  CHECK(pre.n_from_tier[2] <= 16 * n_now);
  REQUIRE(c.check_invariants().ok());
}

TEST_CASE("tier store: a cold store that refuses every write never gets a block listed on T2", "[core][kv]") {
  Fixture f;
  const auto all = tokens_of(70, 3);
  const auto prompt = std::span<const int32_t>(all).first(66);  // 4 full blocks, then a tail
  kv::MemoryColdStore cold(64);                                 // smaller than a block: put() refuses everything
  model::SessionOptions o;
  o.n_ctx = 256;
  o.cold = &cold;
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  kv::KvCache& c = s->cache();
  REQUIRE(s->evaluate(prompt).ok());
  CHECK(c.counters().n_cold_writes_queued == 0);  // write-behind was refused, and not reported
  s->clear();
  c.demote_all_unpinned(kv::Tier::t2);
  REQUIRE(c.check_invariants().ok());
  // Demotion to T2 was refused too: the blocks left the cache instead of being listed there.
  CHECK(c.index().stats().n_blocks_on_tier[kv::tier_index(kv::Tier::t2)] == 0);
  CHECK(c.counters().n_demotions[0][2] == 0);
  CHECK(c.counters().n_evictions[0] >= 4);
  CHECK(c.tier_usage(kv::Tier::t0).used_blocks == 0);

  const kv::KvCounters before = c.counters();
  auto got = s->evaluate(all);
  REQUIRE(got.ok());
  const kv::PrefixInfo& p = s->last_prefix();
  CHECK(p.n_cached == 0);
  CHECK(p.n_recomputed_bad == 0);  // nothing was promised, so nothing was lost
  CHECK(c.counters().n_missed_tokens - before.n_missed_tokens == 70);
  CHECK(c.counters().n_promotions[2][0] == before.n_promotions[2][0]);
  REQUIRE(c.check_invariants().ok());
}

TEST_CASE("tier store: blocks a prefetch moves up for a sequence are reported under the tier it found them on, once",
          "[core][kv]") {
  Fixture f;
  const auto all = tokens_of(50, 5);
  const auto prefix = std::span<const int32_t>(all).first(40);  // 2 full blocks + a tail
  kv::MemoryColdStore cold(64 << 20);
  model::SessionOptions o;
  o.n_ctx = 256;
  o.budget.t1_bytes = 8 << 20;
  o.cold = &cold;
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  kv::KvCache& c = s->cache();
  REQUIRE(s->evaluate(prefix).ok());
  s->clear();
  c.demote_all_unpinned(kv::Tier::t2);
  REQUIRE(c.tier_usage(kv::Tier::t0).used_blocks == 0);

  // The prefetch is the lookup, for sequence `id`: its next prepare reports T2, not T0.
  const kv::SeqId id = c.create_sequence();
  const kv::PrefixInfo pre = c.prefetch(prefix, id);
  CHECK(pre.n_from_tier[2] == 32);
  REQUIRE(c.tier_usage(kv::Tier::t0).used_blocks == 2);
  const kv::KvCounters before = c.counters();
  auto p = c.prepare(id, all);
  REQUIRE(p.ok());
  CHECK(p->n_cached == 32);
  CHECK(p->n_from_tier[2] == 32);
  CHECK(p->n_from_tier[0] == 0);
  // The block_hit events say the same, so the counters (and the timelines) agree with it.
  CHECK(c.counters().n_hit_tokens[2] - before.n_hit_tokens[2] == 32);
  CHECK(c.counters().n_promotions[2][0] == before.n_promotions[2][0]);  // nothing left to promote
  REQUIRE(c.check_invariants().ok());
  // Recorded once: the same sequence's next lookup finds them where they are now, on T0.
  c.park(id);
  auto again = c.prepare(id, all);
  REQUIRE(again.ok());
  CHECK(again->n_from_tier[0] == again->n_cached);
  REQUIRE(c.check_invariants().ok());
  c.destroy_sequence(id);
}

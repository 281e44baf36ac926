// A conversation's KV through every place it can live: four turns from T0, a round trip through
// T1, a restart over the same disk store; each turn's logits equal an uncached run's, bit for bit.
#pragma once

#include <catch2/catch.hpp>

#include <span>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/session.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"

namespace kvc::test {

// The 440-token stream of token_stream(440, 1) in turns ending at 100..400, all served from the
// cache (none recomputed); then, with T0 emptied to T1, the 400 again (399 reused, some from T1);
// then a new session over `store` after the first closed: 400 positions from T2, none recomputed.
// F16 KV: every checked row equals uncached_logits'. `store`: a directory for the SQLite store.
// t1_reused: what the whole 400 on T1 reuses (its last token is recomputed): 399, or for a model
// with a recurrent group the last block boundary before it, 384 (399 - t1_reused recomputed).
inline void check_turns_t1_and_restart(const model::Model& m, const std::string& store, int64_t t1_reused = 399) {
  const int64_t n_vocab = m.config().n_vocab;
  const std::vector<int32_t> stream = token_stream(440, 1);
  const std::vector<float> want = uncached_logits(m, stream);
  model::SessionOptions o;
  o.n_ctx = 1024;
  o.n_batch = 16;
  o.budget.t1_bytes = 8 << 20;
  {
    auto cold = storage::SqliteColdStore::open(store);
    REQUIRE(cold.ok());
    o.cold = cold->get();
    auto s = model::Session::create(m, o);
    REQUIRE(s.ok());
    kv::KvCache& kc = s->cache();
    for (size_t n = 100; n <= 400; n += 100) {
      INFO("turn ending at " << n);
      auto l = s->evaluate(std::span(stream).first(n));
      REQUIRE(l.ok());
      CHECK(s->n_reused() == static_cast<int64_t>(n - 100));
      CHECK(s->last_prefix().n_recomputed == 0);
      CHECK(last_row_diff(*l, want, n, n_vocab) == 0.0);
      REQUIRE(kc.check_invariants().ok());
    }
    s->clear();
    kc.demote_all_unpinned(kv::Tier::t1);
    CHECK(kc.tier_usage(kv::Tier::t0, 0).used_blocks == 0);
    auto t1 = s->evaluate(std::span(stream).first(400));
    REQUIRE(t1.ok());
    CHECK(s->n_reused() == t1_reused);
    CHECK(s->last_prefix().n_recomputed == 399 - t1_reused);
    CHECK(s->last_prefix().n_from_tier[1] > 0);
    CHECK(last_row_diff(*t1, want, 400, n_vocab) == 0.0);
    REQUIRE(kc.check_invariants().ok());
  }  // the cache closes (checkpoints of windowed groups at 400), then the store drains to disk
  auto cold = storage::SqliteColdStore::open(store);
  REQUIRE(cold.ok());
  o.cold = cold->get();
  auto s = model::Session::create(m, o);
  REQUIRE(s.ok());
  auto r = s->evaluate(stream);
  REQUIRE(r.ok());
  CHECK(s->n_reused() == 400);
  CHECK(s->last_prefix().n_from_tier[2] == 400);
  CHECK(s->last_prefix().n_recomputed == 0);
  CHECK(last_row_diff(*r, want, stream.size(), n_vocab) == 0.0);
  REQUIRE(s->cache().check_invariants().ok());
}

}  // namespace kvc::test

// KvCache end to end: logits served from cached blocks, on every tier, equal a fresh evaluation.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/backend/backend.h"
#include "core/kv/cold_store.h"
#include "core/kv/kv_format.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

struct Fixture : test::LoadedModel {};

using test::tokens_of;

std::vector<float> fresh_logits(const model::Model& m, std::span<const int32_t> tokens, model::SessionOptions o = {}) {
  o.n_ctx = 256;
  auto s = model::Session::create(m, o);
  REQUIRE(s.ok());
  auto l = s->evaluate(tokens);
  REQUIRE(l.ok());
  return {l->begin(), l->end()};
}

// The forward pass computes each row independently of how the batch is split (the matmul
// kernels' per-row sums do not depend on the token tile), and attention reads the same KV
// bytes whether they were just written or restored: the logits are bit-identical.
void require_same(std::span<const float> got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
  }
  CHECK(max_diff == 0.0);
}

}  // namespace

TEST_CASE("kv cache: a cached prefix on and off block boundaries gives fresh logits", "[core][kv]") {
  Fixture f;
  const auto all = tokens_of(45);
  const auto want = fresh_logits(*f.m, all);
  for (int prefix : {16, 32, 37, 44}) {
    DYNAMIC_SECTION("prefix " << prefix) {
      model::SessionOptions o;
      o.n_ctx = 256;
      auto s = model::Session::create(*f.m, o);
      REQUIRE(s.ok());
      REQUIRE(s->evaluate(std::span<const int32_t>(all).first(static_cast<size_t>(prefix))).ok());
      REQUIRE(s->cache().check_invariants().ok());
      auto got = s->evaluate(all);
      REQUIRE(got.ok());
      CHECK(s->n_reused() == prefix);
      CHECK(s->n_evaluated() == 45 - prefix);
      REQUIRE(s->cache().check_invariants().ok());
      require_same(*got, want);
    }
  }
}

TEST_CASE("kv cache: blocks demoted to T1 and T2 are promoted back bit-exactly", "[core][kv]") {
  Fixture f;
  const auto all = tokens_of(50);
  const auto want = fresh_logits(*f.m, all);
  kv::MemoryColdStore cold(64 << 20);
  model::SessionOptions o;
  o.n_ctx = 256;
  o.budget.t1_bytes = 8 << 20;
  o.cold = &cold;
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  const auto prefix = std::span<const int32_t>(all).first(40);  // 2 full blocks + 8 in a private tail

  SECTION("T1") {
    REQUIRE(s->evaluate(prefix).ok());
    s->clear();  // the conversation is closed: its published blocks stay cached, unpinned
    s->cache().demote_all_unpinned(kv::Tier::t1);
    REQUIRE(s->cache().tier_usage(kv::Tier::t1).used_blocks == 2);
    REQUIRE(s->cache().check_invariants().ok());
    auto got = s->evaluate(all);
    REQUIRE(got.ok());
    CHECK(s->last_prefix().n_from_tier[1] == 32);
    CHECK(s->cache().counters().n_promotions[1][0] == 2);
    REQUIRE(s->cache().check_invariants().ok());
    require_same(*got, want);
  }
  SECTION("T2, and a restart with an empty index") {
    REQUIRE(s->evaluate(prefix).ok());
    s->clear();
    s->cache().demote_all_unpinned(kv::Tier::t2);
    REQUIRE(s->cache().tier_usage(kv::Tier::t0).used_blocks == 0);
    auto got = s->evaluate(all);
    REQUIRE(got.ok());
    CHECK(s->last_prefix().n_from_tier[2] == 32);
    require_same(*got, want);
    // A new cache (a new process) knows nothing but the cold store.
    auto s2 = model::Session::create(*f.m, o);
    REQUIRE(s2.ok());
    auto again = s2->evaluate(all);
    REQUIRE(again.ok());
    CHECK(s2->last_prefix().n_from_tier[2] >= 32);
    REQUIRE(s2->cache().check_invariants().ok());
    require_same(*again, want);
  }
  SECTION("prefetch brings a closed conversation back to T0 before its next turn") {
    REQUIRE(s->evaluate(prefix).ok());
    s->clear();
    s->cache().demote_all_unpinned(kv::Tier::t2);
    REQUIRE(s->cache().tier_usage(kv::Tier::t0).used_blocks == 0);
    const kv::PrefixInfo pre = s->cache().prefetch(prefix);
    CHECK(pre.n_cached == 32);
    CHECK(pre.n_from_tier[2] == 32);
    CHECK(s->cache().tier_usage(kv::Tier::t0).used_blocks == 2);
    REQUIRE(s->cache().check_invariants().ok());
    auto got = s->evaluate(all);
    REQUIRE(got.ok());
    CHECK(s->last_prefix().n_from_tier[0] == 32);
    CHECK(s->last_prefix().n_from_tier[2] == 0);
    require_same(*got, want);
  }
  SECTION("a corrupt T2 block is recomputed, never served") {
    REQUIRE(s->evaluate(prefix).ok());
    s->clear();
    s->cache().demote_all_unpinned(kv::Tier::t2);
    // Corrupt the first block of the chain: everything after it must be recomputed.
    const auto key = kv::chain_key(s->cache().fingerprint(), prefix.first(16));
    REQUIRE(cold.corrupt_for_test(key));
    auto got = s->evaluate(all);
    REQUIRE(got.ok());
    CHECK(s->last_prefix().n_cached == 0);
    CHECK(s->last_prefix().n_recomputed_bad == 16);
    CHECK(s->cache().counters().n_corrupt_blocks == 1);
    CHECK(cold.stats().n_corrupt == 1);
    require_same(*got, want);
  }
}

TEST_CASE("kv cache: branches share the common prefix and copy a diverging block", "[core][kv]") {
  Fixture f;
  const auto a = tokens_of(60, 1);
  auto b = a;
  b[20] = 4242;  // diverges inside block 1 (positions 16..31)
  b.resize(40);
  const auto want_b = fresh_logits(*f.m, b);
  model::SessionOptions o;
  o.n_ctx = 256;
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  REQUIRE(s->evaluate(a).ok());
  REQUIRE(s->cache().check_invariants().ok());
  // A second conversation (a branch edited at token 20) in the same cache.
  auto got = s->evaluate(b);
  REQUIRE(got.ok());
  CHECK(s->n_reused() == 20);  // block 0 shared; block 1 copied, its 4 positions before the edit kept
  REQUIRE(s->cache().check_invariants().ok());
  require_same(*got, want_b);
  // Regenerate: the same prompt again reuses all but the last token.
  auto again = s->evaluate(b);
  REQUIRE(again.ok());
  CHECK(s->n_reused() == 39);
  require_same(*again, want_b);
  // Rewinding inside a shared full block copies it before writing.
  const auto cow_before = s->cache().counters().n_copies_on_write;
  auto shorter = std::vector<int32_t>(b.begin(), b.begin() + 30);
  shorter.push_back(777);
  const auto want_short = fresh_logits(*f.m, shorter);
  auto got_short = s->evaluate(shorter);
  REQUIRE(got_short.ok());
  CHECK(s->cache().counters().n_copies_on_write == cow_before + 1);
  CHECK(s->n_reused() == 30);  // block 0 shared, 14 positions of the copied block 1
  require_same(*got_short, want_short);
  REQUIRE(s->cache().check_invariants().ok());
}

TEST_CASE("kv cache: keys of another KV format never match", "[core][kv]") {
  Fixture f;
  const auto all = tokens_of(40);
  kv::MemoryColdStore cold(64 << 20);
  model::SessionOptions o;
  o.n_ctx = 128;
  o.cold = &cold;
  auto s16 = model::Session::create(*f.m, o);
  REQUIRE(s16.ok());
  REQUIRE(s16->evaluate(all).ok());
  o.k_format = kv::KvFormat::int8;
  o.v_format = kv::KvFormat::int8;
  auto s8 = model::Session::create(*f.m, o);
  REQUIRE(s8.ok());
  CHECK(s8->cache().fingerprint() != s16->cache().fingerprint());
  REQUIRE(s8->evaluate(all).ok());
  CHECK(s8->last_prefix().n_cached == 0);
}

TEST_CASE("kv cache: every K/V format pair has its own fingerprint, and int4 blocks never serve int4h", "[core][kv]") {
  // The rotated formats store the bytes of int8 / int4 (plus int4h's K anchor): only the
  // fingerprint keeps a block of one from being read as the other.
  Fixture f;
  std::vector<kv::BlockKey> seen;
  for (kv::KvFormat k : kv::k_kv_formats) {
    for (kv::KvFormat v : kv::k_kv_formats) {
      model::SessionOptions o;
      o.n_ctx = 64;
      o.k_format = k;
      o.v_format = v;
      auto s = model::Session::create(*f.m, o);
      REQUIRE(s.ok());
      for (const kv::BlockKey& other : seen) CHECK(s->cache().fingerprint() != other);
      seen.push_back(s->cache().fingerprint());
    }
  }
  CHECK(seen.size() == 36);
  const auto all = tokens_of(40);
  kv::MemoryColdStore cold(64 << 20);
  model::SessionOptions o;
  o.n_ctx = 128;
  o.cold = &cold;
  o.k_format = o.v_format = kv::KvFormat::int4;
  auto s4 = model::Session::create(*f.m, o);
  REQUIRE(s4.ok());
  REQUIRE(s4->evaluate(all).ok());
  o.k_format = o.v_format = kv::KvFormat::int4h;
  auto s4h = model::Session::create(*f.m, o);
  REQUIRE(s4h.ok());
  REQUIRE(s4h->evaluate(all).ok());
  CHECK(s4h->last_prefix().n_cached == 0);
  // The same format in a second session does find its blocks in the cold store.
  auto again = model::Session::create(*f.m, o);
  REQUIRE(again.ok());
  REQUIRE(again->evaluate(all).ok());
  CHECK(again->last_prefix().n_cached > 0);
}

TEST_CASE("kv cache: INT8 and INT4 KV stay close to F16", "[core][kv]") {
  Fixture f;
  const auto all = tokens_of(64, 3);
  const auto ref = fresh_logits(*f.m, all);
  // Softmax of the reference and of a quantized-KV run; KL(ref || q) in nats.
  auto kl = [&](const std::vector<float>& q) {
    double mr = -1e30, mq = -1e30;
    for (size_t i = 0; i < ref.size(); ++i) {
      mr = std::max(mr, static_cast<double>(ref[i]));
      mq = std::max(mq, static_cast<double>(q[i]));
    }
    double zr = 0, zq = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      zr += std::exp(static_cast<double>(ref[i]) - mr);
      zq += std::exp(static_cast<double>(q[i]) - mq);
    }
    double d = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double lp = static_cast<double>(ref[i]) - mr - std::log(zr);
      const double lq = static_cast<double>(q[i]) - mq - std::log(zq);
      d += std::exp(lp) * (lp - lq);
    }
    return d;
  };
  for (auto fmt : {kv::KvFormat::int8, kv::KvFormat::int4}) {
    model::SessionOptions o;
    o.k_format = o.v_format = fmt;
    const double d = kl(fresh_logits(*f.m, all, o));
    INFO(kv::kv_format_name(fmt) << " KL " << d);
    // Measured on this model: INT8 8e-5, INT4 4.5e-3 nats. A broken quantizer (wrong scale,
    // wrong nibble order) decorrelates K/V and gives KL of order 0.1-1.
    CHECK(d < (fmt == kv::KvFormat::int8 ? 2e-4 : 2e-2));
    CHECK(d > 0.0);
  }
}

TEST_CASE("kv cache: a small T0 budget recycles the blocks of closed sequences", "[core][kv]") {
  Fixture f;
  model::SessionOptions o;
  o.n_ctx = 64;  // T0 holds 64 tokens + 2 blocks
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  for (int round = 0; round < 4; ++round) {
    const auto t = tokens_of(64, round + 10);
    auto all = s->evaluate_all(t);
    INFO("round " << round);
    REQUIRE(all.ok());
    REQUIRE(s->cache().check_invariants().ok());
  }
  CHECK(s->cache().counters().n_evicted() > 0);
  CHECK(s->cache().counters().n_alloc_failures == 0);
}

TEST_CASE("kv cache: write-behind that finished shows as cold_write_done events, once per block", "[core][kv]") {
  Fixture f;
  kv::MemoryColdStore cold(int64_t{1} << 30);  // writes at once: done by the next sample
  kv::KvEventLog log(1024);
  model::SessionOptions o;
  o.n_ctx = 256;
  o.cold = &cold;
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  s->cache().set_event_log(&log);
  REQUIRE(s->evaluate(tokens_of(50)).ok());  // 3 full blocks published and written behind
  s->cache().emit_tier_usage();
  s->cache().emit_tier_usage();  // nothing new: no more events
  std::vector<kv::KvEvent> events;
  log.read_since(0, events);
  int64_t n_queued = 0, n_done = 0, done_bytes = 0;
  for (const kv::KvEvent& e : events) {
    if (e.type == kv::KvEventType::cold_write_queued) ++n_queued;
    if (e.type != kv::KvEventType::cold_write_done) continue;
    ++n_done;
    done_bytes += e.n_bytes;
    CHECK(e.from == kv::Tier::t0);
    CHECK(e.to == kv::Tier::t2);
  }
  CHECK(n_queued == 3);
  CHECK(n_done == 3);
  CHECK(done_bytes == 3 * s->cache().layout().block_bytes);
}

TEST_CASE("kv cache: int4c reuses its private tail with its F16 K rows, and recomputes a tail of a shared block",
          "[core][kv]") {
  // int4c K is encoded per block once the block is full; the partly filled last block's K lives
  // in the sequence's holding area. A sealed (shared) block has no F16 rows to hold, so a tail
  // inside one is recomputed instead of copied on write.
  Fixture f;
  model::SessionOptions o;
  o.n_ctx = 256;
  o.k_format = o.v_format = kv::KvFormat::int4c;
  const auto all = tokens_of(45);
  const auto want = fresh_logits(*f.m, all, o);
  {
    auto s = model::Session::create(*f.m, o);
    REQUIRE(s.ok());
    REQUIRE(s->evaluate(std::span<const int32_t>(all).first(37)).ok());
    auto got = s->evaluate(all);  // the private tail (positions 32..36) continues
    REQUIRE(got.ok());
    CHECK(s->n_reused() == 37);
    require_same(*got, want);
    REQUIRE(s->cache().check_invariants().ok());
  }
  const auto a = tokens_of(60, 1);
  auto b = a;
  b[20] = 4242;  // diverges inside block 1, which is full and shared
  b.resize(40);
  const auto want_b = fresh_logits(*f.m, b, o);
  auto s = model::Session::create(*f.m, o);
  REQUIRE(s.ok());
  REQUIRE(s->evaluate(a).ok());
  const auto cow_before = s->cache().counters().n_copies_on_write;
  auto got = s->evaluate(b);
  REQUIRE(got.ok());
  CHECK(s->n_reused() == 16);  // block 0 only: block 1's 4 positions before the edit are recomputed
  CHECK(s->cache().counters().n_copies_on_write == cow_before);
  require_same(*got, want_b);
  REQUIRE(s->cache().check_invariants().ok());
  auto again = s->evaluate(b);  // regenerate: all but the last token, in the private tail
  REQUIRE(again.ok());
  CHECK(s->n_reused() == 39);
  require_same(*again, want_b);
}

// Tests of KvCounters, internal fragmentation, TurnTimeline and BandwidthMeter against hand-computed values.
#include <catch2/catch.hpp>

#include <vector>

#include "core/kv/kv_metrics.h"

using namespace kvc::kv;

namespace {

KvEvent ev(KvEventType type, int64_t t_us, int64_t request_id = -1, int64_t n_tokens = 0, Tier from = Tier::none,
           Tier to = Tier::none, int64_t n_bytes = 0) {
  KvEvent e;
  e.type = type;
  e.t_us = t_us;
  e.request_id = request_id;
  e.seq_id = request_id >= 0 ? request_id % 10 : -1;
  e.n_tokens = n_tokens;
  e.from = from;
  e.to = to;
  e.n_bytes = n_bytes;
  return e;
}

}  // namespace

TEST_CASE("counters: events become counts by tier and tier pair", "[core][kv_metrics]") {
  using T = KvEventType;
  const std::vector<KvEvent> events = {
      ev(T::block_allocated, 1, -1, 0, Tier::none, Tier::t0),
      ev(T::block_allocated, 2, -1, 0, Tier::none, Tier::t0),
      ev(T::block_published, 3),
      ev(T::block_hit, 4, 1, 16, Tier::t0),
      ev(T::block_hit, 5, 1, 16, Tier::t1),
      ev(T::block_hit, 6, 1, 16, Tier::t1),
      ev(T::block_miss, 7, 1, 40),
      ev(T::block_miss, 8, 2, 0),  // a full hit: a lookup with nothing to compute
      ev(T::block_promoted, 9, 1, 0, Tier::t1, Tier::t0, 1000),
      ev(T::block_promoted, 10, 1, 0, Tier::t1, Tier::t0, 1000),
      ev(T::block_demoted, 11, -1, 0, Tier::t0, Tier::t1, 700),
      ev(T::block_demoted, 12, -1, 0, Tier::t1, Tier::t2, 0),  // already written behind
      ev(T::cold_write_done, 13, -1, 0, Tier::t1, Tier::t2, 300),
      ev(T::block_evicted, 14, -1, 0, Tier::t2),
      ev(T::block_evicted, 15, -1, 0, Tier::t1),
      ev(T::block_evicted, 16, -1, 0, Tier::t1),
      ev(T::seq_preempted, 17, 3, 90, Tier::t0, Tier::t1, 5000),
      ev(T::seq_resumed, 18, 3, 90, Tier::t1, Tier::t0, 5000),
      ev(T::alloc_failed, 19, 3, 0, Tier::none, Tier::t0, 64),
      ev(T::block_corrupt, 20, -1, 0, Tier::t2),
      ev(T::block_copied_on_write, 21),
      ev(T::cold_write_queued, 22, -1, 0, Tier::t1),
  };
  KvCounters c;
  c.apply(events);
  CHECK(c.n_allocated == 2);
  CHECK(c.n_published == 1);
  CHECK(c.n_hit_blocks == std::array<int64_t, 3>{1, 2, 0});
  CHECK(c.n_hit_tokens == std::array<int64_t, 3>{16, 32, 0});
  CHECK(c.n_missed_lookups == 1);
  CHECK(c.n_missed_tokens == 40);
  CHECK(c.n_promotions[1][0] == 2);
  CHECK(c.n_demotions[0][1] == 1);
  CHECK(c.n_demotions[1][2] == 1);
  CHECK(c.n_evictions == std::array<int64_t, 3>{0, 2, 1});
  CHECK(c.moved_bytes[1][0] == 2000 + 5000);
  CHECK(c.moved_bytes[0][1] == 700 + 5000);
  CHECK(c.moved_bytes[1][2] == 300);
  CHECK(c.moved_bytes[0][0] == 0);
  CHECK(c.n_preemptions == 1);
  CHECK(c.n_resumes == 1);
  CHECK(c.n_alloc_failures == 1);
  CHECK(c.n_corrupt_blocks == 1);
  CHECK(c.n_copies_on_write == 1);
  CHECK(c.n_cold_writes_queued == 1);
  CHECK(c.n_cold_writes_done == 1);
}

TEST_CASE("fragmentation: waste in partial last blocks", "[core][kv_metrics]") {
  const std::vector<int64_t> lengths = {0, 16, 17, 31, 5, 32};
  // 17 -> 15 wasted, 31 -> 1, 5 -> 11; full blocks waste nothing.
  const Fragmentation f = internal_fragmentation(lengths, 16, 16 * 1024);
  CHECK(f.n_wasted_tokens == 27);
  CHECK(f.n_partial_blocks == 3);
  CHECK(f.wasted_bytes == 27 * 1024);
  CHECK(internal_fragmentation({}, 16, 1).n_wasted_tokens == 0);
}

TEST_CASE("turn timeline: TTFT split and cached tokens by tier", "[core][kv_metrics]") {
  using T = KvEventType;
  TurnTimeline tl;
  // Request 7: every phase. Request 8 interleaved: no promotion needed, not finished yet.
  const std::vector<KvEvent> events = {
      ev(T::request_started, 1'000'000, 7, 100),
      ev(T::block_hit, 1'000'100, 7, 16, Tier::t0),
      ev(T::request_started, 1'000'150, 8, 40),
      ev(T::block_hit, 1'000'200, 7, 16, Tier::t0),
      ev(T::block_hit, 1'000'300, 7, 16, Tier::t1),
      ev(T::block_hit, 1'000'400, 7, 16, Tier::t2),
      ev(T::block_miss, 1'000'450, 7, 36),
      ev(T::lookup_done, 1'000'500, 7, 64),
      ev(T::promote_done, 1'003'500, 7, 0, Tier::none, Tier::none, 8192),
      ev(T::lookup_done, 1'003'600, 8, 0),
      ev(T::prefill_done, 1'023'500, 7, 36),
      ev(T::first_token, 1'025'000, 7),
      ev(T::prefill_done, 1'033'600, 8, 40),
      ev(T::first_token, 1'034'800, 8),
      ev(T::request_finished, 1'525'000, 7, 51),
      ev(T::block_hit, 1'600'000, -1, 16, Tier::t0),  // no request: ignored
  };
  tl.add(events);
  REQUIRE(tl.turns().size() == 2);
  const RequestMetrics* r7 = tl.find(7);
  REQUIRE(r7 != nullptr);
  CHECK(r7->seq_id == 7);
  CHECK(r7->n_prompt_tokens == 100);
  CHECK(r7->n_cached_tokens == std::array<int64_t, 3>{32, 16, 16});
  CHECK(r7->n_cached_tokens_total() == 64);
  CHECK(r7->n_missed_tokens == 36);
  CHECK(r7->n_computed_tokens == 36);
  CHECK(r7->n_generated_tokens == 51);
  CHECK(r7->promoted_bytes == 8192);
  CHECK(r7->lookup_ms() == Approx(0.5));
  CHECK(r7->promote_ms() == Approx(3.0));
  CHECK(r7->prefill_ms() == Approx(20.0));
  CHECK(r7->first_decode_ms() == Approx(1.5));
  CHECK(r7->ttft_ms() == Approx(25.0));
  CHECK(r7->lookup_ms() + r7->promote_ms() + r7->prefill_ms() + r7->first_decode_ms() == Approx(r7->ttft_ms()));
  CHECK(r7->decode_tok_s() == Approx(100.0));  // 50 tokens after the first in 0.5 s
  CHECK(r7->finished());

  const RequestMetrics* r8 = tl.find(8);
  REQUIRE(r8 != nullptr);
  CHECK(tl.turns()[0].request_id == 7);  // ordered by first event
  CHECK(r8->lookup_ms() == Approx(3.45));
  CHECK(r8->promote_ms() == 0.0);  // skipped phase
  CHECK(r8->prefill_ms() == Approx(30.0));
  CHECK(r8->first_decode_ms() == Approx(1.2));
  CHECK(r8->ttft_ms() == Approx(34.65));
  CHECK_FALSE(r8->finished());
  CHECK(r8->decode_tok_s() == 0.0);
  CHECK(r8->phase_ms(RequestPhase::finished) == 0.0);  // not reached
}

TEST_CASE("turn timeline: keeps the most recent max_turns", "[core][kv_metrics]") {
  TurnTimeline tl(2);
  for (int64_t id = 1; id <= 3; ++id) tl.add(ev(KvEventType::request_started, id * 10, id, 5));
  REQUIRE(tl.turns().size() == 2);
  CHECK(tl.find(1) == nullptr);
  CHECK(tl.turns()[0].request_id == 2);
  CHECK(tl.turns()[1].request_id == 3);
  // A request whose start was lost still gets a record, without a TTFT.
  tl.add(ev(KvEventType::first_token, 100, 9));
  REQUIRE(tl.find(9) != nullptr);
  CHECK(tl.find(9)->ttft_ms() == 0.0);
}

TEST_CASE("bandwidth meter: bytes per second per tier pair over 1 s buckets", "[core][kv_metrics]") {
  BandwidthMeter m(1'000'000, 60);
  m.add(200'000, Tier::t1, Tier::t0, 1000);
  m.add(ev(KvEventType::block_promoted, 700'000, 1, 0, Tier::t1, Tier::t0, 500));
  m.add(ev(KvEventType::block_promoted, 1'500'000, 1, 0, Tier::t1, Tier::t0, 2000));
  m.add(ev(KvEventType::seq_resumed, 1'600'000, 1, 0, Tier::t2, Tier::t1, 4096));
  m.add(ev(KvEventType::block_evicted, 1'700'000, 1, 0, Tier::t0, Tier::none, 999));  // not a move
  m.add(ev(KvEventType::block_hit, 1'800'000, 1, 0, Tier::t1, Tier::t0, 999));        // not a move
  m.add(3'100'000, Tier::t1, Tier::t0, 100);

  std::vector<float> s(4);
  m.series(Tier::t1, Tier::t0, 3'500'000, s);
  CHECK(s == std::vector<float>{1500.0f, 2000.0f, 0.0f, 100.0f});
  m.series(Tier::t2, Tier::t1, 3'500'000, s);
  CHECK(s == std::vector<float>{0.0f, 4096.0f, 0.0f, 0.0f});
  m.series(Tier::t0, Tier::t1, 3'500'000, s);
  CHECK(s == std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f});
  // Complete buckets 0, 1, 2 before now's bucket 3: (1500 + 2000 + 0) / 3 s.
  CHECK(m.bytes_per_second(Tier::t1, Tier::t0, 3'500'000, 3) == Approx(3500.0 / 3.0));
  CHECK(m.bytes_per_second(Tier::t1, Tier::t0, 3'500'000, 1) == 0.0);

  // Half-second buckets report per second, not per bucket.
  BandwidthMeter half(500'000, 4);
  half.add(100'000, Tier::t0, Tier::t1, 300);
  std::vector<float> one(1);
  half.series(Tier::t0, Tier::t1, 400'000, one);
  CHECK(one[0] == 600.0f);
}

TEST_CASE("bandwidth meter: the window slides and drops what is older", "[core][kv_metrics]") {
  BandwidthMeter m(1'000'000, 60);
  m.add(500'000, Tier::t1, Tier::t0, 1500);    // bucket 0
  m.add(1'500'000, Tier::t1, Tier::t0, 2000);  // bucket 1
  m.add(61'200'000, Tier::t1, Tier::t0, 70);   // bucket 61 reuses bucket 1's slot
  m.add(1'900'000, Tier::t1, Tier::t0, 5);     // bucket 1 again: older than the window now, ignored
  std::vector<float> s(62);
  m.series(Tier::t1, Tier::t0, 61'500'000, s);  // buckets 0..61
  CHECK(s[0] == 0.0f);  // bucket 0 is outside the 60 s window even though its slot still holds it
  CHECK(s[1] == 0.0f);  // overwritten
  CHECK(s[61] == 70.0f);
  float total = 0.0f;
  for (float v : s) total += v;
  CHECK(total == 70.0f);
}

TEST_CASE("metrics: check_invariants catches over-full tiers and oversized shares", "[core][kv_metrics]") {
  KvMetrics m;
  m.tiers[0] = {1000, 4000, 1, 4};
  m.tiers[1] = {0, 8000, 0, 8};
  m.shares = {{1, {600, 0, 0}}, {2, {400, 0, 0}}};
  CHECK(m.check_invariants());
  m.shares[1].bytes[0] = 401;  // shares exceed T0's used bytes
  CHECK_FALSE(m.check_invariants());
  m.shares[1].bytes[0] = 400;
  m.tiers[1].used_blocks = 9;  // more blocks than the tier has
  CHECK_FALSE(m.check_invariants());
}

TEST_CASE("turn timeline: the first admission's lookup is the turn's, not a resumed sequence's lookups",
          "[core][kv_metrics]") {
  using T = KvEventType;
  TurnTimeline tl;
  tl.add(std::vector<KvEvent>{
      ev(T::request_started, 10, 3, 45),
      ev(T::block_hit, 11, 3, 16, Tier::t1),
      ev(T::block_hit, 12, 3, 16, Tier::t0),
      ev(T::block_miss, 13, 3, 4),  // 45 - 32 - 4 = 9 tokens from the sequence's own tail
      ev(T::lookup_done, 14, 3, 41),
      ev(T::promote_done, 15, 3),
      ev(T::seq_preempted, 20, 3, 43),
      ev(T::seq_resumed, 30, 3, 47),
      ev(T::block_hit, 31, 3, 16, Tier::t2),  // the resumption's lookup
      ev(T::block_hit, 32, 3, 16, Tier::t2),
      ev(T::block_miss, 33, 3, 15),
  });
  const RequestMetrics* r = tl.find(3);
  REQUIRE(r != nullptr);
  CHECK(r->n_cached_tokens == std::array<int64_t, 3>{16, 16, 0});
  CHECK(r->n_missed_tokens == 4);
  CHECK(r->n_tail_tokens() == 9);
  CHECK(r->n_cached_tokens_total() + r->n_tail_tokens() + r->n_missed_tokens == r->n_prompt_tokens);
  TurnTimeline early;
  early.add(ev(T::request_started, 10, 4, 45));
  early.add(ev(T::block_hit, 11, 4, 16, Tier::t0));
  CHECK(early.find(4)->n_tail_tokens() == 0);  // the lookup is not done yet
}

// KV cache metrics: tier usage, counters, fragmentation (KvMetrics, published inside a KvView),
// and the per-turn TTFT / hit timeline and tier bandwidth that the memory view plots.
//
// Producer: the KV cache manager fills a KvMetrics (state it alone knows: usage, shares,
// fragmentation) and keeps its counters with KvCounters::apply() on every event it emits, so
// counters and the event stream agree by construction. Consumers: the app reads the metrics in
// the Snapshot<KvView> the engine thread publishes and feeds the events it reads into
// TurnTimeline and BandwidthMeter (app/gui/memory_feed.h); the server copies the counters after
// engine steps (/metrics); the trace export builds its own TurnTimeline (docs/ARCHITECTURE.md §3.8).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/kv/kv_events.h"

namespace kvc::kv {

// [from][to] over the data tiers t0, t1, t2; the diagonal stays 0.
using TierMatrix = std::array<std::array<int64_t, k_n_data_tiers>, k_n_data_tiers>;

// Invariant: 0 <= used <= capacity for bytes and blocks.
struct TierUsage {
  int64_t used_bytes = 0;
  int64_t capacity_bytes = 0;
  int64_t used_blocks = 0;
  int64_t capacity_blocks = 0;
  double fill() const {
    return capacity_bytes > 0 ? static_cast<double>(used_bytes) / static_cast<double>(capacity_bytes) : 0.0;
  }
};

// One sequence's (conversation's) part of each tier. A block referenced by k sequences counts
// bytes/k for each, so the shares of a tier sum to at most its used bytes (the rest is cached
// blocks nobody references right now).
struct SequenceShare {
  int64_t seq_id = -1;
  std::array<int64_t, k_n_data_tiers> bytes{};
};

// Cumulative counts since the cache started; apply() is the one place events turn into counts.
struct KvCounters {
  int64_t n_allocated = 0;
  int64_t n_published = 0;
  std::array<int64_t, k_n_data_tiers> n_hit_blocks{};
  std::array<int64_t, k_n_data_tiers> n_hit_tokens{};
  int64_t n_missed_lookups = 0;  // lookups that left tokens to compute
  int64_t n_missed_tokens = 0;
  std::array<int64_t, k_n_data_tiers> n_evictions{};  // by the tier the block was dropped from
  TierMatrix n_promotions{};
  TierMatrix n_demotions{};
  TierMatrix moved_bytes{};  // every transfer_of() event
  int64_t n_copies_on_write = 0;
  int64_t n_cold_writes_queued = 0;
  int64_t n_cold_writes_done = 0;
  int64_t n_corrupt_blocks = 0;
  int64_t n_preemptions = 0;
  int64_t n_resumes = 0;
  int64_t n_alloc_failures = 0;

  // Blocks dropped from the cache for good, from any tier.
  int64_t n_evicted() const { return n_evictions[0] + n_evictions[1] + n_evictions[2]; }

  void apply(const KvEvent& e);
  void apply(std::span<const KvEvent> events) {
    for (const KvEvent& e : events) apply(e);
  }
};

// Internal fragmentation: slots allocated but unused in each sequence's partial last block.
struct Fragmentation {
  int64_t n_wasted_tokens = 0;
  int64_t wasted_bytes = 0;
  int64_t n_partial_blocks = 0;
};

// Fragmentation of sequences of the given lengths, each in ceil(n / block_size) blocks of
// block_bytes. Wasted bytes are prorated: n_wasted_tokens * block_bytes / block_size.
Fragmentation internal_fragmentation(std::span<const int64_t> seq_n_tokens, int64_t block_size, int64_t block_bytes);

// Everything the memory view draws that is state, not history. Published by the engine.
struct KvMetrics {
  int64_t t_us = 0;        // when it was taken (now_us())
  int64_t block_size = 0;  // tokens per block
  std::array<TierUsage, k_n_data_tiers> tiers{};
  std::vector<SequenceShare> shares;  // one per live sequence
  KvCounters counters;
  Fragmentation fragmentation;

  // Every tier within its capacity, every share non-negative, the shares of a tier summing to
  // at most its used bytes. For asserts and tests of the producer.
  bool check_invariants() const;
};

// Phases of a request, the order their events arrive in (request_started ... request_finished).
enum class RequestPhase : uint8_t { started, lookup_done, promote_done, prefill_done, first_token, finished };
constexpr int k_n_request_phases = 6;

// One turn: what came from where and how long each part of TTFT took.
//
//   started ─lookup─▶ lookup_done ─promote─▶ promote_done ─prefill─▶ prefill_done ─first decode─▶ first_token ─decode─▶
//   finished └──────────────────────────────────────── ttft ────────────────────────────────────────────────┘
//
// A phase that never happened (no promotion needed) but was followed by a later phase lasts 0 ms.
struct RequestMetrics {
  int64_t request_id = -1;
  int64_t seq_id = -1;
  int64_t n_prompt_tokens = 0;
  std::array<int64_t, k_n_data_tiers> n_cached_tokens{};  // block_hit tokens by tier
  int64_t n_missed_tokens = 0;                            // the lookup's uncached tokens
  int64_t n_computed_tokens = 0;                          // what prefill actually computed
  int64_t n_generated_tokens = 0;
  int64_t promoted_bytes = 0;
  std::array<int64_t, k_n_request_phases> t_phase_us{-1, -1, -1, -1, -1, -1};  // -1: not reached (yet)

  bool has(RequestPhase p) const { return t_phase_us[static_cast<size_t>(p)] >= 0; }
  bool finished() const { return has(RequestPhase::finished); }
  int64_t n_cached_tokens_total() const { return n_cached_tokens[0] + n_cached_tokens[1] + n_cached_tokens[2]; }
  // Prompt tokens the request's own sequence still held in its private tail (on T0): cached but
  // neither a block hit nor missed; 0 until the lookup is done (promote_done).
  int64_t n_tail_tokens() const {
    return has(RequestPhase::promote_done)
               ? std::max<int64_t>(0, n_prompt_tokens - n_missed_tokens - n_cached_tokens_total())
               : 0;
  }
  // When phase p ended: its stamp, or, for a skipped phase followed by a later one, the end of
  // the phase before it; -1 when neither p nor any later phase happened.
  int64_t phase_end_us(RequestPhase p) const;
  // Milliseconds from the previous phase to p (0 when unknown).
  double phase_ms(RequestPhase p) const;
  double lookup_ms() const { return phase_ms(RequestPhase::lookup_done); }
  double promote_ms() const { return phase_ms(RequestPhase::promote_done); }
  double prefill_ms() const { return phase_ms(RequestPhase::prefill_done); }
  double first_decode_ms() const { return phase_ms(RequestPhase::first_token); }
  double ttft_ms() const;  // started -> first_token; 0 before the first token
  // Tokens after the first, per second of decoding; 0 until finished with >= 2 tokens.
  double decode_tok_s() const;
};

// TurnTimeline: RequestMetrics for the most recent requests, built from the event stream.
// Not thread-safe: one consumer (a UI frame, an exporter) owns it and feeds it what it read.
class TurnTimeline {
 public:
  // max_turns 0: keep every turn (exporters).
  explicit TurnTimeline(size_t max_turns = 512) : max_turns_(max_turns) {}

  // Request events and block hits/misses with a request_id update that request's record;
  // a record is created at its first event, so a turn whose start was lost still shows. Hits
  // and misses count until promote_done: the lookup of the first admission (the lookups of a
  // preempted request's resumptions are cache events, not the turn's).
  void add(const KvEvent& e);
  void add(std::span<const KvEvent> events) {
    for (const KvEvent& e : events) add(e);
  }

  // Oldest first; at most max_turns (the oldest are dropped).
  const std::vector<RequestMetrics>& turns() const { return turns_; }
  const RequestMetrics* find(int64_t request_id) const;

 private:
  RequestMetrics& record(const KvEvent& e);

  size_t max_turns_;
  std::vector<RequestMetrics> turns_;
};

// BandwidthMeter: bytes moved between each tier pair per time bucket (default 1 s buckets, the
// last 60 s), for the "bytes moved per second" plot. Buckets older than the window are reused.
// Not thread-safe (one consumer feeds it events).
class BandwidthMeter {
 public:
  explicit BandwidthMeter(int64_t bucket_us = 1'000'000, size_t n_buckets = 60);

  void add(int64_t t_us, Tier from, Tier to, int64_t n_bytes);
  void add(const KvEvent& e);  // transfer_of() events only; others are ignored
  void add(std::span<const KvEvent> events) {
    for (const KvEvent& e : events) add(e);
  }

  // Bytes per second from -> to for out.size() consecutive buckets, oldest first; the last is
  // the bucket holding now_us (still filling). Buckets outside the window read 0.
  void series(Tier from, Tier to, int64_t now_us, std::span<float> out) const;
  // Mean bytes per second from -> to over the n_window complete buckets before now's bucket.
  double bytes_per_second(Tier from, Tier to, int64_t now_us, size_t n_window) const;

  int64_t bucket_us() const { return bucket_us_; }
  size_t n_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    int64_t id = INT64_MIN;  // floor(t_us / bucket_us_) of what it holds
    TierMatrix bytes{};
  };
  int64_t bucket_id(int64_t t_us) const;
  // Bucket id as seen at now_id; null when it is outside the window (now_id - n, now_id] or
  // its slot was reused.
  const Bucket* bucket(int64_t id, int64_t now_id) const;

  int64_t bucket_us_;
  std::vector<Bucket> buckets_;  // (n_buckets) ring indexed by id mod n_buckets
};

}  // namespace kvc::kv

// KvCounters, fragmentation, TurnTimeline and BandwidthMeter: turning KV events into the numbers the memory view plots.
#include "core/kv/kv_metrics.h"

#include <algorithm>

#include "core/util/assert.h"

namespace kvc::kv {

void KvCounters::apply(const KvEvent& e) {
  const bool from_ok = is_data_tier(e.from);
  const bool to_ok = is_data_tier(e.to);
  const auto fi = static_cast<size_t>(tier_index(e.from));
  const auto ti = static_cast<size_t>(tier_index(e.to));
  switch (e.type) {
    case KvEventType::block_allocated: ++n_allocated; break;
    case KvEventType::block_published: ++n_published; break;
    case KvEventType::block_hit:
      if (from_ok) {
        ++n_hit_blocks[fi];
        n_hit_tokens[fi] += e.n_tokens;
      }
      break;
    case KvEventType::block_miss:
      if (e.n_tokens > 0) ++n_missed_lookups;
      n_missed_tokens += e.n_tokens;
      break;
    case KvEventType::block_promoted:
      if (from_ok && to_ok) ++n_promotions[fi][ti];
      break;
    case KvEventType::block_demoted:
      if (from_ok && to_ok) ++n_demotions[fi][ti];
      break;
    case KvEventType::block_evicted:
      if (from_ok) ++n_evictions[fi];
      break;
    case KvEventType::block_copied_on_write: ++n_copies_on_write; break;
    case KvEventType::cold_write_queued: ++n_cold_writes_queued; break;
    case KvEventType::cold_write_done: ++n_cold_writes_done; break;
    case KvEventType::block_corrupt: ++n_corrupt_blocks; break;
    case KvEventType::alloc_failed: ++n_alloc_failures; break;
    case KvEventType::seq_preempted: ++n_preemptions; break;
    case KvEventType::seq_resumed: ++n_resumes; break;
    default: break;
  }
  Tier from = Tier::none;
  Tier to = Tier::none;
  int64_t n_bytes = 0;
  if (transfer_of(e, from, to, n_bytes)) {
    moved_bytes[static_cast<size_t>(tier_index(from))][static_cast<size_t>(tier_index(to))] += n_bytes;
  }
}

Fragmentation internal_fragmentation(std::span<const int64_t> seq_n_tokens, int64_t block_size, int64_t block_bytes) {
  KVC_ASSERT(block_size > 0 && block_bytes >= 0);
  Fragmentation f;
  for (int64_t n : seq_n_tokens) {
    KVC_ASSERT(n >= 0);
    const int64_t rem = n % block_size;
    if (rem == 0) continue;
    f.n_wasted_tokens += block_size - rem;
    ++f.n_partial_blocks;
  }
  f.wasted_bytes = f.n_wasted_tokens * block_bytes / block_size;
  return f;
}

bool KvMetrics::check_invariants() const {
  std::array<int64_t, k_n_data_tiers> share_sum{};
  for (const SequenceShare& sh : shares) {
    for (size_t t = 0; t < share_sum.size(); ++t) {
      if (sh.bytes[t] < 0) return false;
      share_sum[t] += sh.bytes[t];
    }
  }
  for (size_t t = 0; t < tiers.size(); ++t) {
    const TierUsage& u = tiers[t];
    if (u.used_bytes < 0 || u.used_blocks < 0) return false;
    if (u.used_bytes > u.capacity_bytes || u.used_blocks > u.capacity_blocks) return false;
    if (share_sum[t] > u.used_bytes) return false;
  }
  return fragmentation.n_wasted_tokens >= 0 && fragmentation.wasted_bytes >= 0;
}

// ---- RequestMetrics ----

int64_t RequestMetrics::phase_end_us(RequestPhase p) const {
  auto j = static_cast<size_t>(p);
  bool later = false;
  for (size_t m = j; m < t_phase_us.size(); ++m) later = later || t_phase_us[m] >= 0;
  if (!later) return -1;
  while (t_phase_us[j] < 0 && j > 0) --j;
  return t_phase_us[j];
}

double RequestMetrics::phase_ms(RequestPhase p) const {
  if (p == RequestPhase::started) return 0.0;
  const int64_t end = phase_end_us(p);
  const int64_t begin = phase_end_us(static_cast<RequestPhase>(static_cast<int>(p) - 1));
  if (end < 0 || begin < 0) return 0.0;
  return static_cast<double>(end - begin) / 1000.0;
}

double RequestMetrics::ttft_ms() const {
  if (!has(RequestPhase::started) || !has(RequestPhase::first_token)) return 0.0;
  return static_cast<double>(t_phase_us[static_cast<size_t>(RequestPhase::first_token)] -
                             t_phase_us[static_cast<size_t>(RequestPhase::started)]) /
         1000.0;
}

double RequestMetrics::decode_tok_s() const {
  if (!finished() || !has(RequestPhase::first_token) || n_generated_tokens < 2) return 0.0;
  const int64_t dt_us = t_phase_us[static_cast<size_t>(RequestPhase::finished)] -
                        t_phase_us[static_cast<size_t>(RequestPhase::first_token)];
  if (dt_us <= 0) return 0.0;
  return static_cast<double>(n_generated_tokens - 1) * 1e6 / static_cast<double>(dt_us);
}

// ---- TurnTimeline ----

const RequestMetrics* TurnTimeline::find(int64_t request_id) const {
  for (auto it = turns_.rbegin(); it != turns_.rend(); ++it) {
    if (it->request_id == request_id) return &*it;
  }
  return nullptr;
}

RequestMetrics& TurnTimeline::record(const KvEvent& e) {
  for (auto it = turns_.rbegin(); it != turns_.rend(); ++it) {
    if (it->request_id == e.request_id) return *it;
  }
  if (max_turns_ > 0 && turns_.size() >= max_turns_) turns_.erase(turns_.begin());
  RequestMetrics& r = turns_.emplace_back();
  r.request_id = e.request_id;
  r.seq_id = e.seq_id;
  return r;
}

void TurnTimeline::add(const KvEvent& e) {
  if (e.request_id < 0) return;
  const bool phase = is_request_phase(e.type);
  if (!phase && e.type != KvEventType::block_hit && e.type != KvEventType::block_miss) return;
  RequestMetrics& r = record(e);
  if (r.seq_id < 0) r.seq_id = e.seq_id;
  if (phase) {
    const auto k = static_cast<size_t>(e.type) - static_cast<size_t>(KvEventType::request_started);
    r.t_phase_us[k] = e.t_us;
  }
  switch (e.type) {
    case KvEventType::block_hit:
      if (is_data_tier(e.from) && !r.has(RequestPhase::promote_done))
        r.n_cached_tokens[static_cast<size_t>(tier_index(e.from))] += e.n_tokens;
      break;
    case KvEventType::block_miss:
      if (!r.has(RequestPhase::promote_done)) r.n_missed_tokens += e.n_tokens;
      break;
    case KvEventType::request_started: r.n_prompt_tokens = e.n_tokens; break;
    case KvEventType::promote_done: r.promoted_bytes = e.n_bytes; break;
    case KvEventType::prefill_done: r.n_computed_tokens = e.n_tokens; break;
    case KvEventType::request_finished: r.n_generated_tokens = e.n_tokens; break;
    default: break;
  }
}

// ---- BandwidthMeter ----

BandwidthMeter::BandwidthMeter(int64_t bucket_us, size_t n_buckets) : bucket_us_(bucket_us), buckets_(n_buckets) {
  KVC_ASSERT(bucket_us > 0 && n_buckets > 0);
}

int64_t BandwidthMeter::bucket_id(int64_t t_us) const {
  const int64_t q = t_us / bucket_us_;
  return (t_us % bucket_us_ < 0) ? q - 1 : q;  // floor division
}

const BandwidthMeter::Bucket* BandwidthMeter::bucket(int64_t id, int64_t now_id) const {
  const auto n = static_cast<int64_t>(buckets_.size());
  if (id > now_id || now_id - id >= n) return nullptr;
  const Bucket& b = buckets_[static_cast<size_t>(((id % n) + n) % n)];
  return b.id == id ? &b : nullptr;
}

void BandwidthMeter::add(int64_t t_us, Tier from, Tier to, int64_t n_bytes) {
  if (!is_data_tier(from) || !is_data_tier(to) || from == to) return;
  const int64_t id = bucket_id(t_us);
  const auto n = static_cast<int64_t>(buckets_.size());
  Bucket& b = buckets_[static_cast<size_t>(((id % n) + n) % n)];
  if (b.id > id) return;  // older than the window
  if (b.id < id) b = Bucket{id, {}};
  b.bytes[static_cast<size_t>(tier_index(from))][static_cast<size_t>(tier_index(to))] += n_bytes;
}

void BandwidthMeter::add(const KvEvent& e) {
  Tier from = Tier::none;
  Tier to = Tier::none;
  int64_t n_bytes = 0;
  if (transfer_of(e, from, to, n_bytes)) add(e.t_us, from, to, n_bytes);
}

void BandwidthMeter::series(Tier from, Tier to, int64_t now_us, std::span<float> out) const {
  std::fill(out.begin(), out.end(), 0.0f);
  if (!is_data_tier(from) || !is_data_tier(to)) return;
  const int64_t now_id = bucket_id(now_us);
  const double per_s = 1e6 / static_cast<double>(bucket_us_);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t id = now_id - static_cast<int64_t>(out.size() - 1 - k);
    if (const Bucket* b = bucket(id, now_id)) {
      const int64_t n = b->bytes[static_cast<size_t>(tier_index(from))][static_cast<size_t>(tier_index(to))];
      out[k] = static_cast<float>(static_cast<double>(n) * per_s);
    }
  }
}

double BandwidthMeter::bytes_per_second(Tier from, Tier to, int64_t now_us, size_t n_window) const {
  if (n_window == 0 || !is_data_tier(from) || !is_data_tier(to)) return 0.0;
  const int64_t now_id = bucket_id(now_us);
  int64_t total = 0;
  for (size_t k = 1; k <= n_window; ++k) {
    if (const Bucket* b = bucket(now_id - static_cast<int64_t>(k), now_id)) {
      total += b->bytes[static_cast<size_t>(tier_index(from))][static_cast<size_t>(tier_index(to))];
    }
  }
  return static_cast<double>(total) * 1e6 / (static_cast<double>(bucket_us_) * static_cast<double>(n_window));
}

}  // namespace kvc::kv

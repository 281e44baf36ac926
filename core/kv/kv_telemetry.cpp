// KvTelemetry: stamping, counting and logging the cache's events; write-behind completions.
#include "core/kv/kv_telemetry.h"

#include <algorithm>
#include <string>

namespace kvc::kv {

KvTelemetry::KvTelemetry(const ColdStore* cold, int64_t block_bytes, int64_t block_tokens)
    : cold_(cold),
      block_bytes_(block_bytes),
      block_tokens_(block_tokens),
      cold_written_seen_(cold ? cold->stats().bytes_written : 0) {}

void KvTelemetry::emit(KvEventType type, Tier from, Tier to, const BlockKey& key, int32_t slot, int64_t n_tokens,
                       int64_t n_bytes, int64_t seq) {
  KvEvent e;
  e.t_us = events_ ? now_us() : 0;  // counters need no clock
  e.type = type;
  e.from = from;
  e.to = to;
  e.slot = slot;
  e.key = key;
  e.seq_id = seq;
  e.request_id = request_id_;
  e.n_tokens = n_tokens;
  e.n_bytes = n_bytes;
  counters_.apply(e);
  if (events_) events_->append(e);
}

void KvTelemetry::emit_tier_usage(const std::array<TierUsageBytes, k_n_data_tiers>& usage) {
  for (Tier t : {Tier::t0, Tier::t1, Tier::t2}) {
    const TierUsageBytes& u = usage[static_cast<size_t>(tier_index(t))];
    emit(KvEventType::tier_usage, Tier::none, t, {}, -1, u.used_blocks, u.used_bytes);
  }
  if (!cold_) return;
  const ColdStoreStats st = cold_->stats();  // bytes_written and n_pending of one moment
  const int64_t written = st.bytes_written;
  int64_t fresh = written - cold_written_seen_;
  const int64_t by_demotion = std::min(fresh, cold_demoted_unseen_);
  cold_demoted_unseen_ -= by_demotion;
  fresh -= by_demotion;
  // Nothing queued: a demotion's write not written by now was dropped (a failed write batch)
  // and never will be; left counted, it would swallow the next write-behind's cold_write_done.
  if (st.n_pending == 0) cold_demoted_unseen_ = 0;
  for (; fresh >= block_bytes_; fresh -= block_bytes_) {
    emit(KvEventType::cold_write_done, Tier::t0, Tier::t2, {}, -1, block_tokens_, block_bytes_);
  }
  cold_written_seen_ = written - fresh;  // a part-block remainder is reported with the next
}

Status KvTelemetry::check_invariants() const {
  auto fail = [](const std::string& m) { return make_error(ErrorCode::internal, "KvTelemetry invariant: " + m); };
  const KvCounters& c = counters_;
  for (size_t t = 0; t < k_n_data_tiers; ++t) {
    if (c.n_hit_blocks[t] < 0 || c.n_hit_tokens[t] < 0 || c.n_evictions[t] < 0) return fail("a negative count");
    for (size_t u = 0; u < k_n_data_tiers; ++u) {
      if (c.n_promotions[t][u] < 0 || c.n_demotions[t][u] < 0 || c.moved_bytes[t][u] < 0)
        return fail("a negative move count");
    }
  }
  if (c.n_missed_tokens < 0 || c.n_missed_lookups < 0 || c.n_copies_on_write < 0 || c.n_alloc_failures < 0 ||
      c.n_corrupt_blocks < 0 || c.n_cold_writes_queued < 0 || c.n_cold_writes_done < 0)
    return fail("a negative count");
  if (cold_demoted_unseen_ < 0) return fail("more demotion writes reported than queued");
  if (cold_ && cold_written_seen_ > cold_->stats().bytes_written)
    return fail("write-behind reported ahead of the cold store");
  return {};
}

}  // namespace kvc::kv

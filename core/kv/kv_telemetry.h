// KvTelemetry: the one place the KV cache's block events are stamped, counted and logged.
//
// Contract (the telemetry piece of the cache: this file, kv_events.h, kv_metrics.h, kv_view.h)
//   Owns:   the cumulative KvCounters, the request tag of the events, the optional event log it
//           appends to (not the log itself), and the write-behind accounting that turns the cold
//           store's bytes_written into cold_write_done events.
//   Rules:  the tier store and the sequence table report everything they do through emit();
//           counters() is KvCounters::apply() over exactly the events emitted, whether or not a
//           log is set, so the counters, the log and the timelines built from it agree by
//           construction. Nothing else counts cache activity.
//   Invariants (check_invariants): every counter >= 0; the reported write-behind never runs
//           ahead of what the store says it wrote. (The log checks itself: KvEventLog.)
//   Failure: none. emit() is wait-free and never allocates; a full log overwrites its oldest
//           events (readers count them as lost).
// Not thread-safe: the engine thread that owns the cache owns its telemetry. Readers on other
// threads see the log (KvEventLog is single-writer, multi-reader) and the Snapshot<KvView>.
#pragma once

#include <array>
#include <cstdint>

#include "core/kv/block_key.h"
#include "core/kv/cold_store.h"
#include "core/kv/kv_events.h"
#include "core/kv/kv_metrics.h"
#include "core/util/result.h"

namespace kvc::kv {

struct TierUsageBytes {
  int64_t used_bytes = 0;
  int64_t capacity_bytes = 0;
  int32_t used_blocks = 0;
  int32_t capacity_blocks = 0;
};

class KvTelemetry {
 public:
  // cold: the store whose write-behind completions are reported (null without T2).
  explicit KvTelemetry(const ColdStore* cold, int64_t block_bytes, int64_t block_tokens);

  void emit(KvEventType type, Tier from, Tier to, const BlockKey& key = {}, int32_t slot = -1, int64_t n_tokens = 0,
            int64_t n_bytes = 0, int64_t seq = -1);

  void set_event_log(KvEventLog* log) { events_ = log; }
  KvEventLog* event_log() const { return events_; }
  void set_current_request(int64_t request_id) { request_id_ = request_id; }

  // A demotion queued n_bytes of write-behind and reported them itself (block_demoted to T2):
  // they are not reported again as cold_write_done.
  void note_demotion_write(int64_t n_bytes) { cold_demoted_unseen_ += n_bytes; }
  // Appends a tier_usage sample per data tier, and a cold_write_done per block the cold store
  // finished writing behind since the last call.
  void emit_tier_usage(const std::array<TierUsageBytes, k_n_data_tiers>& usage);

  const KvCounters& counters() const { return counters_; }
  Status check_invariants() const;

 private:
  const ColdStore* cold_;
  int64_t block_bytes_;
  int64_t block_tokens_;
  KvCounters counters_;
  KvEventLog* events_ = nullptr;
  int64_t request_id_ = -1;
  // Write-behind finishes on the cold store's thread; emit_tier_usage() turns the store's
  // bytes_written into cold_write_done events, less what demotions already reported.
  int64_t cold_written_seen_ = 0;
  int64_t cold_demoted_unseen_ = 0;
};

}  // namespace kvc::kv

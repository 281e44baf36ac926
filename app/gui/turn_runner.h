// The engine-shaped seam of the chat controller: submit a turn, get streamed events back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv/kv_events.h"
#include "core/kv/kv_metrics.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "storage/sqlite_cold_store.h"
#include "core/util/result.h"
#include "ui/app_state.h"

namespace kvc::app {

// One request: conversation C's stored token stream plus the new segment to append.
//   prompt = history ++ segment; the reply continues it.
struct TurnRequest {
  int64_t conversation_id = 0;
  std::vector<int32_t> history;  // the stored, append-only stream (never re-tokenized)
  std::vector<int32_t> segment;  // the new user turn (empty for a regenerate)
  model::GenerateOptions options;
};

// Streamed while a turn runs; returning false from the callback cancels it.
struct TurnDelta {
  std::string_view text;
};

struct TurnResult {
  std::vector<int32_t> tokens;  // the reply's ids, exactly as sampled
  std::string text;
  ui::TurnStats stats;
};

// Today a single model::Session; the paged KV engine implements the same interface.
class TurnRunner {
 public:
  virtual ~TurnRunner() = default;
  virtual Result<TurnResult> run(const TurnRequest& request, const std::function<bool(const TurnDelta&)>& on_delta) = 0;
  // Called when a conversation is opened: its cached blocks are brought to T0 ahead of the next turn.
  virtual void prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) = 0;
  // Fills the memory view's state; reads the KV events that arrived since the last call.
  virtual void fill_memory(ui::MemoryState& out) = 0;
  // The KV events still held (oldest first), for the trace and CSV exports.
  virtual std::vector<kv::KvEvent> kv_events() const = 0;
  // After a conversation was deleted: releases the cold blocks that its streams (`dead`, every
  // branch) reach and no remaining stream (`live`) does. Hashes the streams: call it off the
  // UI thread. A runner without a disk tier has nothing to release.
  virtual void release_streams(std::span<const std::vector<int32_t>> /*dead*/,
                               std::span<const std::vector<int32_t>> /*live*/) {}
};

// Turns on one model::Session whose KV cache has a host-RAM tier and a disk tier in the data
// directory, so a conversation reopened after a restart resumes from disk.
class SessionTurnRunner final : public TurnRunner {
 public:
  // cold_dir empty: no disk tier. A disk tier that cannot be opened is left out with a warning.
  // budgets: 0 keeps a tier's default (T0: room for n_ctx tokens, T1: 512 MiB).
  static Result<std::unique_ptr<SessionTurnRunner>> create(const model::Model& m, int64_t n_ctx,
                                                           const std::filesystem::path& cold_dir = {},
                                                           ui::TierBudgets budgets = {});
  Result<TurnResult> run(const TurnRequest& request, const std::function<bool(const TurnDelta&)>& on_delta) override;
  void prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) override;
  void fill_memory(ui::MemoryState& out) override;
  std::vector<kv::KvEvent> kv_events() const override;
  void release_streams(std::span<const std::vector<int32_t>> dead, std::span<const std::vector<int32_t>> live) override;

 private:
  SessionTurnRunner(std::unique_ptr<storage::SqliteColdStore> cold, model::Session s);
  void emit_phase(kv::KvEventType type, int64_t t_us, int64_t n_tokens, int64_t n_bytes = 0);
  void fill_kv(ui::MemoryState& out);
  void read_events(ui::KvTimelines& out);

  std::unique_ptr<storage::SqliteColdStore> cold_;  // declared first: outlives the session's cache
  model::Session session_;
  std::string cold_error_;  // why there is no disk tier, if it could not be opened
  // What opening a conversation brought to T0, and from where: a turn served from those T0
  // blocks reports their original tiers.
  int64_t prefetched_conversation_ = 0;
  kv::PrefixInfo prefetched_;

  // The KV event stream: the cache and run() write it (worker thread); fill_memory reads it.
  std::unique_ptr<kv::KvEventLog> events_;
  uint64_t events_cursor_ = 0;
  uint64_t n_events_read_ = 0, n_events_lost_ = 0;
  int64_t n_requests_ = 0;
  int64_t current_conversation_ = -1;
  kv::TurnTimeline timeline_{256};
  kv::BandwidthMeter bandwidth_;
  std::vector<kv::KvEvent> read_buf_;
  int64_t t_start_us_ = 0;        // the first sample's time
  int64_t last_sample_us_ = 0;
  std::vector<ui::CounterSample> samples_;  // (k_max_samples) counter history
  // Conversations' token streams as last run (history ++ segment ++ reply): the block map's owners.
  std::map<int64_t, std::vector<int32_t>> streams_;
  std::map<int64_t, std::array<int64_t, 3>> request_tiers_;  // request id -> prompt tokens by original tier
};

}  // namespace kvc::app

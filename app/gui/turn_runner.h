// The engine-shaped seam of the chat controller: submit a turn, get streamed events back.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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
  virtual void fill_memory(ui::MemoryState& out) const = 0;
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
  void fill_memory(ui::MemoryState& out) const override;

 private:
  SessionTurnRunner(std::unique_ptr<storage::SqliteColdStore> cold, model::Session s)
      : cold_(std::move(cold)), session_(std::move(s)) {}
  std::unique_ptr<storage::SqliteColdStore> cold_;  // declared first: outlives the session's cache
  model::Session session_;
  std::string cold_error_;  // why there is no disk tier, if it could not be opened
  // What opening a conversation brought to T0, and from where: a turn served from those T0
  // blocks reports their original tiers.
  int64_t prefetched_conversation_ = 0;
  kv::PrefixInfo prefetched_;
};

}  // namespace kvc::app

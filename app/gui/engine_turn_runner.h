// EngineTurnRunner: the app's turns on the continuous-batching engine, on its own thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "app/gui/turn_runner.h"
#include "core/engine/engine.h"
#include "core/kv/kv_cache.h"
#include "core/kv/kv_events.h"
#include "core/model/model.h"
#include "core/util/snapshot.h"
#include "storage/sqlite_cold_store.h"

namespace kvc::app {

struct EngineRunnerOptions {
  int64_t n_ctx = 4096;        // most tokens of one conversation
  int64_t t0_bytes = 0;        // the compute pool; 0: room for 2 conversations of n_ctx
  int64_t t1_bytes = int64_t{512} << 20;
  std::filesystem::path cold_dir;  // empty: no disk tier
  int64_t cold_bytes = int64_t{4} << 30;
};

// What the engine thread last published for the UI. Copied by fill_memory on any thread.
struct EngineView {
  kv::TierUsageBytes tiers[3];
};

// run() submits the turn to the engine and relays its streamed text on the calling thread;
// the engine thread owns the cache; fill_memory reads only snapshots and thread-safe stats.
class EngineTurnRunner final : public TurnRunner {
 public:
  // A disk tier that cannot be opened is left out with a warning (the app works from RAM).
  static Result<std::unique_ptr<EngineTurnRunner>> create(const model::Model& m, const EngineRunnerOptions& o);
  ~EngineTurnRunner() override;

  Result<TurnResult> run(const TurnRequest& request, const std::function<bool(const TurnDelta&)>& on_delta) override;
  void prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) override;
  void fill_memory(ui::MemoryState& out) const override;

  const kv::KvEventLog& events() const { return events_; }

 private:
  EngineTurnRunner(const model::Model& m, const EngineRunnerOptions& o) : m_(m), options_(o) {}
  void observe(const kv::KvCache& cache, bool idle);

  const model::Model& m_;
  EngineRunnerOptions options_;
  // Declared in destruction order: the engine stops before the cache goes, the cache before
  // its cold store.
  std::unique_ptr<storage::SqliteColdStore> cold_;
  std::string cold_error_;  // why there is no disk tier, if it could not be opened
  std::unique_ptr<kv::KvCache> cache_;
  kv::KvEventLog events_;
  std::atomic<int64_t> n_turn_tokens_{0};  // the last turn's prompt and reply
  int64_t last_publish_us_ = 0;  // engine thread
  Snapshot<EngineView> view_;
  std::unique_ptr<engine::Engine> engine_;
};

}  // namespace kvc::app

// EngineTurnRunner: the app's turns on the continuous-batching engine, on its own thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "app/gui/memory_feed.h"
#include "app/gui/turn_runner.h"
#include "core/engine/engine.h"
#include "core/kv/kv_cache.h"
#include "core/kv/kv_events.h"
#include "core/kv/kv_view.h"
#include "core/model/model.h"
#include "core/util/machine_budget.h"
#include "core/util/snapshot.h"
#include "storage/sqlite_cold_store.h"

namespace kvc::app {

struct EngineRunnerOptions {
  int64_t n_ctx = 4096;  // most tokens of one conversation
  // Resolved (with_defaults): T1 and T2 as the pools get them (T1 0: none); T0 0: room for
  // t0_contexts conversations of n_ctx.
  KvBudget budget;
  int t0_contexts = 2;
  std::filesystem::path cold_dir;  // empty: no disk tier
  std::string model_path;          // recorded with the KV fingerprint: its blocks go first once the file is gone
  kv::KvFormat kv_format = kv::KvFormat::f16;  // K and V; part of every block's key
};

// run() submits the turn to the engine and relays its streamed text on the calling thread.
// The engine thread owns the cache and publishes a KvView of it after its steps; fill_memory
// reads only that snapshot, the event log and the cold store's (thread-safe) stats.
class EngineTurnRunner final : public TurnRunner {
 public:
  // A disk tier that cannot be opened is left out with a warning (the app works from RAM).
  static Result<std::unique_ptr<EngineTurnRunner>> create(const model::Model& m, const EngineRunnerOptions& o);
  ~EngineTurnRunner() override;

  Result<TurnResult> run(const TurnRequest& request, const std::function<bool(const TurnDelta&)>& on_delta) override;
  void prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) override;
  void fill_memory(ui::MemoryState& out) override;
  std::vector<kv::KvEvent> kv_events() const override { return feed_.all_events(); }
  uint64_t memory_version() const override { return view_.version(); }
  void release_streams(int64_t id, std::span<const std::vector<int32_t>> dead,
                       std::span<const std::vector<int32_t>> live) override;

  // For the app's API server (api_serving.h), which submits to this very engine and cache.
  engine::Engine& engine() { return *engine_; }
  int64_t n_ctx() const { return options_.n_ctx; }
  const storage::SqliteColdStore* cold_store() const { return cold_.get(); }
  // Also called with every engine observer call (engine thread); empty: none. Set it before
  // and clear it after the one who reads it lives.
  void set_cache_observer(std::function<void(const kv::KvCache&, bool idle)> f);

 private:
  EngineTurnRunner(const model::Model& m, const EngineRunnerOptions& o) : m_(m), options_(o), feed_(events_) {}
  void observe(const kv::KvCache& cache);  // engine thread
  void set_stream(int64_t conversation, std::vector<int32_t> tokens);

  const model::Model& m_;
  EngineRunnerOptions options_;
  // Declared in destruction order: the engine stops before the cache goes, the cache before
  // its cold store.
  std::unique_ptr<storage::SqliteColdStore> cold_;
  std::string cold_error_;  // why there is no disk tier, if it could not be opened
  std::unique_ptr<kv::KvCache> cache_;
  kv::KvEventLog events_{size_t{1} << 16};
  MemoryFeed feed_;                        // caller's thread
  std::atomic<int64_t> n_turn_tokens_{0};  // the last turn's prompt and reply

  // Conversations' token streams as last seen (opened, or history ++ segment ++ reply): the
  // block map's owners, with their full blocks' chain keys in every KV group (computed on the caller's thread,
  // extending the previous stream's, so the engine thread never hashes a history). Written by
  // the caller, read by the engine thread's observer.
  struct Stream {
    std::vector<int32_t> tokens;
    std::vector<std::vector<kv::BlockKey>> keys;  // (n_groups, full blocks): each KV group's own chain
  };
  std::mutex streams_mu_;
  std::map<int64_t, Stream> streams_;
  int64_t last_publish_us_ = 0;  // engine thread
  bool engine_idle_ = true;      // engine thread: the observer's last call was an idle one
  Snapshot<kv::KvView> view_;
  // Signalled after each publish of view_, for a caller waiting for the next description.
  std::mutex view_mu_;
  std::condition_variable view_published_;
  std::mutex extra_observer_mu_;
  std::function<void(const kv::KvCache&, bool idle)> extra_observer_;
  kv::KvView view_copy_;  // caller's thread: reused by fill_memory

  std::unique_ptr<engine::Engine> engine_;
};

}  // namespace kvc::app

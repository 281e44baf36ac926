// EngineHost: the server's one Engine on its own thread, over the tiered KV cache and the SQLite
// cold store, with admission (queue limit, shutdown) and one sequence per busy conversation;
// or the same admission on an engine someone else runs (the app's "Serve on localhost").
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/kv/kv_cache.h"
#include "core/model/model.h"
#include "core/util/machine_budget.h"
#include "core/util/result.h"
#include "storage/sqlite_cold_store.h"

namespace kvc::server {

struct EngineHostOptions {
  int64_t n_ctx = 4096;  // most tokens of one conversation
  // Resolved (with_defaults, as the app's): T1 and T2 as the pools get them (T1 0: none); T0 0:
  // room for t0_contexts conversations of n_ctx.
  KvBudget budget;
  int t0_contexts = 2;
  std::filesystem::path cold_dir;              // empty: no disk tier
  kv::KvFormat kv_format = kv::KvFormat::f16;  // K and V; part of every block's key
  int64_t max_running = 8;                     // sequences the engine batches at once
  int64_t max_queue = 32;                      // generations in flight (running + waiting); beyond: refused
  int64_t max_conversations = 256;             // engine sequences kept between turns (LRU beyond)
};

// The cache as the last engine step left it, for /metrics.
struct CacheSnapshot {
  // One KV group's own pools (docs/ARCHITECTURE.md §3.9); T2 is the one cold store, counted in `tiers`.
  struct Group {
    int64_t window = 0;  // positions its layers attend to (0: every position)
    kv::TierUsageBytes tiers[2];
  };
  kv::TierUsageBytes tiers[3];  // every group together
  std::vector<Group> groups;    // group 0 first
  kv::KvCounters counters;
  int64_t n_fragmented_tokens = 0;
  bool cold_healthy = true;
  std::string cold_warning;
};

// One generation's output as it is produced: written on the engine thread, read by the HTTP
// thread that serves the request.
class Generation {
 public:
  struct Update {
    std::string text;  // final text since the last call
    bool done = false;
  };
  // Waits up to `timeout` for text or the end.
  Update wait(std::chrono::milliseconds timeout);
  // Asks the engine to stop; the generation then ends (done) soon, state cancelled.
  void cancel();
  bool cancel_requested() const { return cancel_.load(); }
  // Valid once an Update said done.
  const engine::RequestResult& result() const { return result_; }
  const std::vector<int32_t>& prompt() const { return prompt_; }

 private:
  friend class EngineHost;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool done_ = false;
  std::atomic<bool> cancel_{false};
  engine::RequestResult result_;
  std::vector<int32_t> prompt_;
  engine::Engine* engine_ = nullptr;
  engine::RequestId id_ = 0;
};

struct GenerationRequest {
  int64_t conversation = 0;  // 0: a one-off sequence
  std::vector<int32_t> prompt;
  engine::RequestOptions options;
};

enum class Refusal { none, queue_full, shutting_down };

class EngineHost {
 public:
  // A disk tier that cannot be opened is left out with a warning on stderr (RAM only).
  static Result<std::unique_ptr<EngineHost>> create(const model::Model& m, const EngineHostOptions& o);
  // Serves on `engine`, which its owner keeps running (and whose cache and cold store it
  // owns) for the host's life; only o.n_ctx (which must be the engine's), o.max_queue and o.max_conversations apply.
  // The owner's engine observer must call observe() so that /metrics sees the cache.
  static std::unique_ptr<EngineHost> attach(const model::Model& m, engine::Engine& engine,
                                            const storage::SqliteColdStore* cold, const EngineHostOptions& o);
  ~EngineHost();  // close() if not closed yet
  // shutdown(), then the engine stops, the cache's invariants are checked (a failure is a bug,
  // reported here rather than aborting) and the cold store is flushed. Idempotent. Attached:
  // shutdown(), and the engine forgets the host's conversations (their blocks stay cached).
  Status close();
  // The engine observer's work (engine thread): a snapshot of the cache for /metrics, at most
  // every 50 ms while busy.
  void observe(const kv::KvCache& cache, bool idle);
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  // Submits a generation, or says why not (refusal set, null returned). A busy conversation's
  // second request runs on a one-off sequence (the prefix index still shares its blocks).
  std::shared_ptr<Generation> start(GenerationRequest r, Refusal& refusal);
  // Refuses new work, cancels what is in flight and waits (up to `wait`) for it to end.
  void shutdown(std::chrono::milliseconds wait = std::chrono::seconds(10));

  int64_t n_in_flight() const { return n_in_flight_.load(); }
  int64_t n_ctx() const { return options_.n_ctx; }
  CacheSnapshot cache_snapshot() const;
  engine::EngineStats engine_stats() const { return engine_->stats(); }
  bool has_disk_tier() const { return cold_view_ != nullptr; }
  std::string disk_tier_warning() const { return cold_error_; }

 private:
  EngineHost(const model::Model& m, const EngineHostOptions& o) : m_(m), options_(o) {}
  void snapshot_now(const kv::KvCache& cache);                                // engine thread
  void finished(int64_t conversation, const std::shared_ptr<Generation>& g);  // engine thread
  void touch_conversation_locked(int64_t conversation);

  const model::Model& m_;
  EngineHostOptions options_;
  // Destruction order: the engine stops before the cache goes, the cache before its cold store.
  std::unique_ptr<storage::SqliteColdStore> cold_;
  const storage::SqliteColdStore* cold_view_ = nullptr;  // cold_, or the attached engine's
  std::string cold_error_;
  std::unique_ptr<kv::KvCache> cache_;

  mutable std::mutex snapshot_mu_;
  CacheSnapshot snapshot_;
  int64_t last_snapshot_us_ = 0;  // engine thread

  std::mutex mu_;  // guards the fields below
  std::condition_variable idle_cv_;
  bool shutting_down_ = false;
  std::map<const Generation*, std::weak_ptr<Generation>> in_flight_;
  std::map<int64_t, int> busy_;           // conversation -> its generations in flight (at most 1)
  std::list<int64_t> conversations_lru_;  // most recent first: the engine's sequences
  std::map<int64_t, std::list<int64_t>::iterator> conversations_;
  std::atomic<int64_t> n_in_flight_{0};

  std::unique_ptr<engine::Engine> owned_engine_;  // null when attached
  engine::Engine* engine_ = nullptr;
  bool closed_ = false;
};

}  // namespace kvc::server

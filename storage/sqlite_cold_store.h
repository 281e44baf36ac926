// SqliteColdStore: the cold KV tier (T2) on disk, indexed by SQLite, written by a storage thread.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kv/cold_store.h"
#include "storage/database.h"
#include "storage/payload_files.h"

namespace kvc::kv {
class KvCache;
}  // namespace kvc::kv

namespace kvc::storage {

// A block key as the store's tables hold it: 16 bytes, big-endian, hi first.
std::array<uint8_t, 16> key_blob(const kv::BlockKey& k);
kv::BlockKey key_from_blob(std::span<const uint8_t> blob);  // a null key unless 16 bytes

// Where payloads live. Measured by tests/storage/test_cold_store_bench.cpp (64 KiB - 1 MiB
// blocks): BLOBs cost less to write (one file, no create/rename per block) and restore at least
// as fast from the page cache; files were faster only on some cold reads of large blocks. BLOBs
// also commit atomically with their index row, so blob is the default; files stay selectable.
enum class PayloadPlacement { blob, files };

struct ColdStoreOptions {
  int64_t capacity_bytes = int64_t{8} << 30;  // payload byte budget; LRU collection beyond it
  PayloadPlacement placement = PayloadPlacement::blob;
  int64_t max_queue_bytes = int64_t{64} << 20;  // put() drops (and counts) beyond this much queued
  int64_t max_db_bytes = 0;                     // > 0: cap on the index database file
  bool read_only = false;                       // serve what exists, accept no puts
  // After a failed write (a full disk, a file size limit) puts are refused; the first put this
  // long after the failure tries writing again, so that the store recovers when space returns.
  int64_t retry_after_ms = 5000;
  // > 0: the writer waits this long after the first queued put for more before it commits, so
  // the blocks of one answer share a transaction instead of paying one each (a WAL commit costs
  // a few % of a core per block while a fast model streams). flush(), close and a queue past
  // half of max_queue_bytes end the wait early; a crash loses at most this much more.
  int64_t batch_window_ms = 0;
  // Whether the model file registered for a fingerprint is still there (tests inject it);
  // empty: the file exists with the size it had.
  std::function<bool(const std::string& path, int64_t file_bytes)> model_present;
};

// The batch window of the stores that take an answer's blocks as it streams (the app, serve).
inline constexpr int64_t k_streaming_batch_window_ms = 100;

// Counters beyond kv::ColdStoreStats.
struct ColdStoreExtraStats {
  int64_t n_dropped = 0;                   // puts refused: queue full, unhealthy, or too large
  int64_t n_orphans_removed = 0;           // payload files without an index row, removed at open
  int64_t n_batches = 0;                   // write transactions committed
  int64_t n_blocks_of_missing_models = 0;  // at open: blocks whose model file is gone, collected first
  int64_t n_write_failures = 0;            // write batches that failed (each turns the store off for a while)
  int64_t n_recoveries = 0;                // times puts were accepted again after a failure
  int64_t n_writer_wakeups = 0;            // times a notification woke the writer thread
};

// Files under the data dir:
//   DIR/kv_cache.db          index (and payloads in blob placement); WAL, synchronous=NORMAL
//   DIR/kv_blocks/ab/....kvb payloads in files placement (see payload_files.h)
//
// Invariants (check_invariants()): every key is either queued or indexed, not both;
// released_in_flight_ holds only keys of the batch being written;
// used_bytes = sum of indexed n_bytes; lru_ holds exactly (last_use, key) of each indexed block.
class SqliteColdStore final : public kv::ColdStore {
 public:
  // Opens (creating) the store under `dir`. When the directory or database cannot be written,
  // the store opens read-only and unhealthy (stats().warning says why); an error only when
  // nothing can be read either (the caller then runs on a MemoryColdStore).
  static Result<std::unique_ptr<SqliteColdStore>> open(const std::filesystem::path& dir,
                                                       const ColdStoreOptions& options = {});
  ~SqliteColdStore() override;

  bool put(const kv::BlockKey& key, const kv::BlockKey& parent, const kv::BlockKey& fingerprint,
           std::span<const uint8_t> payload) override;
  // Records that blocks rooted in `fingerprint` come from the model file `model_path`. When a
  // later open finds that file gone (or of another size), those blocks are collected first.
  void register_model(const kv::BlockKey& fingerprint, const std::string& model_path);
  // The same for every KV group of `cache` (each group's chain has its own root).
  void register_model(const kv::KvCache& cache, const std::string& model_path);
  bool contains(const kv::BlockKey& key) const override;
  // On `corrupt` the contents of `out` are unspecified.
  kv::ColdRead read(const kv::BlockKey& key, std::span<uint8_t> out) override;
  // One read transaction (one blob handle) for the BLOB payloads of the whole batch; checksums
  // verified per block, and only a corrupt block is deleted.
  std::vector<kv::ColdRead> read_many(std::span<const kv::BlockKey> keys,
                                      std::span<const std::span<uint8_t>> outs) override;
  // Deletes the blocks: index rows and payloads go in the writer's next transaction; a block
  // still queued is dropped from the queue, one being written is deleted once it lands.
  void release(std::span<const kv::BlockKey> keys) override;
  kv::ColdStoreStats stats() const override;
  void flush() override;

  ColdStoreExtraStats extra_stats() const;
  // The stored size of a block, -1 when absent (callers size the buffer for read()).
  int64_t size_of(const kv::BlockKey& key) const;
  void check_invariants() const;

  std::filesystem::path db_path() const { return dir_ / "kv_cache.db"; }
  std::filesystem::path payload_path(const kv::BlockKey& key) const { return files_.path_of(key); }

 private:
  struct Meta {
    int64_t n_bytes = 0;
    kv::BlockKey checksum;
    uint64_t last_use = 0;
    int64_t payload_rowid = 0;  // > 0: in the payloads table; 0: in a file
  };
  struct Pending {
    kv::BlockKey key, parent, fingerprint, checksum;
    std::vector<uint8_t> payload;
  };

  SqliteColdStore(std::filesystem::path dir, const ColdStoreOptions& options);
  Status load_index();
  void writer_loop();
  Status write_batch(const std::vector<std::shared_ptr<const Pending>>& puts, const std::vector<uint64_t>& uses,
                     const std::vector<std::pair<kv::BlockKey, uint64_t>>& touches,
                     const std::vector<std::pair<kv::BlockKey, int64_t>>& removals, std::vector<int64_t>& rowids);
  void mark_unhealthy_locked(const std::string& why);
  void retry_if_due_locked();           // unhealthy after a failed write, and retry_after_ms passed: healthy again
  void erase_locked(kv::BlockKey key);  // by value: callers may pass a reference into lru_
  void touch_locked(const kv::BlockKey& key, uint64_t last_use);
  void collect_locked();

  const std::filesystem::path dir_;
  const ColdStoreOptions options_;
  PayloadFiles files_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // writer waits for work
  std::condition_variable idle_cv_;  // flush() waits for the writer
  std::unordered_map<kv::BlockKey, Meta, kv::BlockKeyHash> index_;
  std::set<std::pair<uint64_t, kv::BlockKey>> lru_;  // (last_use, key), oldest first
  std::unordered_map<kv::BlockKey, std::shared_ptr<const Pending>, kv::BlockKeyHash> pending_;
  std::vector<std::shared_ptr<const Pending>> queue_;                     // pending_, in arrival order
  std::unordered_map<kv::BlockKey, uint64_t, kv::BlockKeyHash> touches_;  // last_use to persist
  std::vector<std::pair<kv::BlockKey, int64_t>> removals_;                // (key, payload_rowid) to delete
  std::set<kv::BlockKey> released_in_flight_;  // released while the writer had them in a batch
  int64_t queued_bytes_ = 0;
  bool writer_busy_ = false;
  // The writer waits for work (not in its batch window, not writing): only then does a put
  // wake it. Waking it for every block of a streaming answer cost the compute threads a
  // preemption each (a core taken from one stalls both) for a wake-up that changed nothing.
  bool writer_idle_ = false;
  bool stop_ = false;
  int n_flushing_ = 0;  // flush() calls waiting: the writer skips its batch window
  uint64_t clock_ = 0;
  bool write_failed_ = false;  // unhealthy because a write failed (not read-only): retried later
  std::chrono::steady_clock::time_point retry_at_;
  kv::ColdStoreStats stats_;
  ColdStoreExtraStats extra_;

  std::optional<Database> writer_db_;  // used only by the writer thread; absent when read-only
  mutable std::mutex read_mu_;         // guards reader_db_
  std::optional<Database> reader_db_;
  std::thread writer_;  // running iff writer_db_
};

}  // namespace kvc::storage

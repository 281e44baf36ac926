// ColdStore: the interface of the cold KV tier (T2). storage/ implements it on SQLite;
// MemoryColdStore serves tests and runs without a data directory.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/kv/block_key.h"

namespace kvc::kv {

enum class ColdRead {
  ok,       // payload copied out, checksum verified
  missing,  // no such block (never stored, collected, or deleted after corruption)
  corrupt,  // stored but failed its checksum or size check: deleted; recompute it
};

struct ColdStoreStats {
  int64_t n_blocks = 0;
  int64_t used_bytes = 0;
  int64_t capacity_bytes = 0;
  int64_t bytes_written = 0;  // total since open
  int64_t bytes_read = 0;     // total since open
  int64_t n_corrupt = 0;      // blocks found corrupt and deleted since open
  int64_t n_collected = 0;    // blocks removed by the byte budget since open
  int64_t n_released = 0;     // blocks deleted by release() since open
  int64_t n_pending = 0;      // writes queued, not yet durable
  bool healthy = true;        // false: writes are failing (read-only or full disk)
  std::string warning;        // why not healthy, in words for the user
};

// Implementations are thread-safe. The engine never waits on disk for put(). Reads happen on
// the engine thread when it promotes in place (KvCache::prepare / prefetch, batched through
// ColdRunReader) and on the engine's staging threads (read_many; docs/ARCHITECTURE.md §3.7).
class ColdStore {
 public:
  virtual ~ColdStore() = default;

  // Queues a block (the payload is copied) and returns at once; false when it was not
  // accepted (the store is unhealthy or over its queue limit). `fingerprint` is the model
  // fingerprint the key chain is rooted in (for bookkeeping and collection).
  virtual bool put(const BlockKey& key, const BlockKey& parent, const BlockKey& fingerprint,
                   std::span<const uint8_t> payload) = 0;
  // Whether the block is stored or queued (an index lookup, no payload read).
  virtual bool contains(const BlockKey& key) const = 0;
  // Copies the payload into `out`, which must be exactly the stored size.
  virtual ColdRead read(const BlockKey& key, std::span<uint8_t> out) = 0;
  // Reads several blocks: outs[i] receives keys[i], and the result is what read(keys[i],
  // outs[i]) would return; each block's checksum is verified on its own and a corrupt one is
  // deleted without affecting the others. Requires keys.size() == outs.size(). The default
  // loops over read(); SqliteColdStore reads the batch in one read transaction.
  virtual std::vector<ColdRead> read_many(std::span<const BlockKey> keys, std::span<const std::span<uint8_t>> outs);
  // Deletes blocks (stored or still queued) whose conversation was deleted and that no
  // remaining conversation reaches: they hold a deleted chat's content, so they leave the disk
  // now rather than at the next collection. Unknown keys are ignored.
  virtual void release(std::span<const BlockKey> keys) = 0;
  virtual ColdStoreStats stats() const = 0;
  // Waits until every queued put is durable (or failed).
  virtual void flush() = 0;
};

// An in-memory ColdStore with a byte budget and LRU collection; for tests and data-dir-less runs.
class MemoryColdStore final : public ColdStore {
 public:
  explicit MemoryColdStore(int64_t capacity_bytes) { stats_.capacity_bytes = capacity_bytes; }

  bool put(const BlockKey& key, const BlockKey& parent, const BlockKey& fingerprint,
           std::span<const uint8_t> payload) override;
  bool contains(const BlockKey& key) const override;
  ColdRead read(const BlockKey& key, std::span<uint8_t> out) override;
  void release(std::span<const BlockKey> keys) override;
  ColdStoreStats stats() const override;
  void flush() override {}

  // Test hook: flips one byte of a stored payload so the next read finds it corrupt.
  bool corrupt_for_test(const BlockKey& key);

 private:
  struct Entry {
    std::vector<uint8_t> payload;
    BlockKey checksum;
    uint64_t last_use;
  };
  void collect_locked();

  mutable std::mutex mu_;
  std::map<BlockKey, Entry> blocks_;
  uint64_t clock_ = 0;
  ColdStoreStats stats_;
};

// Reads a run of T2 blocks ahead of their promotion, a batch at a time: one read_many() per
// batch of at most max_batch_bytes, so promoting N blocks costs N / batch store queries.
//
//   run:     | k0 k1 k2 | k3 k4 k5 | k6 |   (keys in promotion order)
//   batches:  read when k0 is asked for, then when k3 is, then k6
//
// Invariant: results_[i] and payloads [i * block_bytes, (i + 1) * block_bytes) of buffer_
// belong to keys_[batch_begin_ + i], for i in [0, results_.size()).
class ColdRunReader {
 public:
  // `buffer` holds the current batch; the caller keeps it across runs so that it is allocated
  // (and its pages touched) once.
  ColdRunReader(ColdStore& cold, std::vector<BlockKey> keys, size_t block_bytes, size_t max_batch_bytes,
                std::vector<uint8_t>& buffer);
  // The payload of `key` (valid until the next call), from the batch that holds it; a key
  // outside the run, or asked for again after its batch was left, is read on its own.
  ColdRead read(const BlockKey& key, std::span<const uint8_t>& payload);
  int64_t n_batches() const { return n_batches_; }

 private:
  ColdStore& cold_;
  std::vector<BlockKey> keys_;
  std::map<BlockKey, size_t> position_;  // key -> index in keys_
  size_t block_bytes_;
  size_t max_batch_blocks_;
  size_t batch_begin_ = 0;
  std::vector<ColdRead> results_;
  std::vector<uint8_t>& buffer_;  // (max_batch_blocks, block_bytes), the caller's
  int64_t n_batches_ = 0;
};

}  // namespace kvc::kv

// KvCache: paged KV blocks on three tiers, shared through the prefix index, owned by sequences.
//
// A sequence's KV is a block table: block i holds positions [iB, (i+1)B) of every layer.
//
//   sequence tokens:  | b0 (full) | b1 (full) | b2 (full) | b3 (partial) |
//   block table:        shared      shared      shared      private
//                       ^ published in the RadixIndex      ^ owned by the sequence only
//
// Full blocks are published under their chained key and may be shared by many sequences
// (a common system prompt, a regenerate, a branch). The partial last block is private;
// diverging inside a shared block copies it first (copy on write). Blocks a running
// sequence uses are pinned on T0; unpinned ones are evictable, and eviction demotes
// (T0 -> T1 -> T2 -> gone) by the index's cost-aware LRU score. A hit promotes back to T0.
//
// Not thread-safe: the engine thread owns the cache. The cold store (T2) is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/backend/backend.h"
#include "core/kv/block_key.h"
#include "core/kv/cold_store.h"
#include "core/kv/kv_events.h"
#include "core/kv/kv_format.h"
#include "core/kv/kv_metrics.h"
#include "core/kv/radix_index.h"
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"

namespace kvc::kv {

struct KvView;
struct KvViewOptions;

struct KvCacheConfig {
  kernels::KvBlockLayout layout;  // geometry and formats of one block
  int64_t t0_bytes = 0;           // budget of the compute pool (VRAM on CUDA)
  int64_t t1_bytes = 0;           // budget of host RAM
  BlockKey fingerprint;           // the model fingerprint every key chain is rooted in
  // Sliding window of every layer, in positions (0: none). A sequence releases the blocks
  // wholly behind it: they stay cached (evictable) but no longer take its T0 room.
  int64_t window = 0;
};

// A fixed number of equal slots in one allocation. Invariant: every slot is either in
// free_ or owned by exactly one holder (an index block or a sequence's private block).
class BlockPool {
 public:
  BlockPool() = default;
  BlockPool(uint8_t* base, int64_t slot_bytes, int32_t n_slots);
  int32_t alloc();  // -1 when full
  void free(int32_t slot);
  uint8_t* data(int32_t slot) const { return base_ + static_cast<int64_t>(slot) * slot_bytes_; }
  int32_t n_slots() const { return n_slots_; }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  bool is_free(int32_t slot) const { return slot >= 0 && slot < n_slots_ && is_free_[static_cast<size_t>(slot)]; }

 private:
  uint8_t* base_ = nullptr;
  int64_t slot_bytes_ = 0;
  int32_t n_slots_ = 0;
  std::vector<int32_t> free_;
  std::vector<bool> is_free_;
};

using SeqId = int64_t;

// What prepare() found for a prompt: how many of its tokens are served from each tier.
struct PrefixInfo {
  int64_t n_prompt = 0;
  int64_t n_cached = 0;          // positions whose KV is reused (n_prompt - n_cached computed)
  int64_t n_from_tier[3] = {};   // of n_cached: found on T0, T1, T2 (private tail counts as T0)
  int64_t n_recomputed_bad = 0;  // tokens lost to missing or corrupt T2 blocks
  double lookup_ms = 0;
  double promote_ms = 0;
};

// Counters since creation, for metrics and tests.
struct KvCacheCounters {
  int64_t n_hits_blocks[3] = {};
  int64_t n_promoted[3] = {};  // blocks brought to T0 from T0 (0), T1, T2
  int64_t n_demoted_t0_t1 = 0;
  int64_t n_demoted_to_t2 = 0;
  int64_t n_dropped = 0;  // blocks removed from the cache entirely
  int64_t n_cow = 0;
  int64_t n_dedup = 0;  // published blocks that another sequence had published first
  int64_t n_alloc_failures = 0;
  int64_t n_cold_corrupt = 0;
  int64_t bytes_t0_t1 = 0, bytes_t1_t0 = 0, bytes_to_t2 = 0, bytes_t2_t0 = 0;
};

struct TierUsageBytes {
  int64_t used_bytes = 0;
  int64_t capacity_bytes = 0;
  int32_t used_blocks = 0;
  int32_t capacity_blocks = 0;
};

class KvCache {
 public:
  // T0 slots come from the backend (its compute memory), T1 from host memory.
  static Result<std::unique_ptr<KvCache>> create(const KvCacheConfig& config, backend::Backend& be,
                                                 ColdStore* cold = nullptr);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  SeqId create_sequence();
  // Forgets a sequence: its private blocks are freed, its shared blocks stay cached.
  void destroy_sequence(SeqId id);

  // Makes the sequence hold the longest reusable prefix of `prompt` (its own tail, the
  // index on any tier, the cold store after a restart), pinned on T0. At least one prompt
  // token is left to compute, since its logits are needed. Fails only if T0 cannot hold
  // the prefix (then nothing is kept).
  Result<PrefixInfo> prepare(SeqId id, std::span<const int32_t> prompt);
  // Brings the cached blocks that prefix `tokens` to T0 ahead of use (a conversation was
  // opened), evicting only unpinned blocks. Returns how many of its tokens are now on T0
  // (n_cached) and which tier each came from.
  PrefixInfo prefetch(std::span<const int32_t> tokens);
  // Ensures T0 blocks for n_new more positions, evicting or demoting unpinned blocks as
  // needed. false: T0 is short (the caller preempts or fails the request); nothing leaks.
  bool reserve(SeqId id, int64_t n_new);
  // Records tokens whose KV the forward pass wrote at positions [n_tokens, n_tokens + n).
  // Blocks that became full are published in the index (and written behind to T2).
  void commit(SeqId id, std::span<const int32_t> tokens);
  // Unpins the sequence's shared blocks (they become evictable); the private tail stays with
  // the sequence so the next turn of the same conversation reuses it.
  void park(SeqId id);

  // The sequence's block table (T0 addresses), valid until the next call that changes it.
  std::span<uint8_t* const> block_table(SeqId id) const;
  int64_t n_tokens(SeqId id) const;
  std::span<const int32_t> tokens(SeqId id) const;

  const kernels::KvBlockLayout& layout() const { return config_.layout; }
  int32_t block_tokens() const { return config_.layout.block_tokens; }
  const BlockKey& fingerprint() const { return config_.fingerprint; }
  TierUsageBytes tier_usage(Tier t) const;
  const KvCacheCounters& counters() const { return counters_; }
  // Counts of every event the cache produced (kept whether or not an event log is set).
  const KvCounters& event_counters() const { return event_counters_; }
  const RadixIndex& index() const { return index_; }
  ColdStore* cold_store() const { return cold_; }
  // Wasted slots in partial last blocks (tokens), over all sequences.
  int64_t internal_fragmentation_tokens() const;

  // Block events (allocation, hits, misses, promotions, demotions, evictions, copies on
  // write, publication, cold writes) go to `log` when set; `request` tags them.
  void set_event_log(KvEventLog* log) { events_ = log; }
  void set_current_request(int64_t request_id) { request_id_ = request_id; }
  // Appends a tier_usage sample per data tier (for the timelines), and a cold_write_done per
  // block the cold store finished writing behind since the last call.
  void emit_tier_usage();

  // Staging: bringing disk blocks to host RAM off the engine thread, so that the engine keeps
  // computing while a request's history is read (kv_cache_staging.cpp).
  //   keys = cold_prefix_keys(prompt)        engine thread: which blocks are only on T2
  //   cold_store()->read_many(keys, ...)     any thread: the slow part
  //   stage_cold(keys, results, payloads)    engine thread: they land on T1
  // then prepare() finds them on T1. At most T1's capacity of keys; blocks behind the sliding
  // window are left out (prepare does not read them).
  std::vector<BlockKey> cold_prefix_keys(std::span<const int32_t> prompt);
  // payloads: (keys.size(), block_bytes); results[i] says whether payload i was read. Blocks
  // no longer indexed on T2 are skipped. Returns the number of blocks put on T1.
  int64_t stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                     std::span<const uint8_t> payloads);

  // Drops blocks from T0/T1 and the index for good (a deleted conversation's blocks that no
  // other stream reaches; the cold store is told separately). Blocks a running sequence pins
  // are kept, and so is a block with children outside `keys`. Returns how many were dropped.
  int64_t forget(std::span<const BlockKey> keys);

  // Demotes every unpinned T0 block to T1 (or T2): for tests of the tier paths.
  void demote_all_unpinned(Tier to);

  // Fills `out` with the metrics, every block (up to a cap) and the prefix tree; only reads
  // the cache. Owners (options.owners, else the sequences) colour blocks and get the shares.
  void describe(KvView& out, const KvViewOptions& options) const;
  void describe(KvView& out) const;

  Status check_invariants() const;

 private:
  struct SeqBlock {
    int32_t t0_slot = -1;
    BlockHandle shared;  // null: private to the sequence
  };
  struct Sequence {
    std::vector<int32_t> tokens;
    std::vector<SeqBlock> blocks;  // ceil(tokens / B) <= blocks.size()
    std::vector<uint8_t*> table;   // t0 addresses of blocks
    bool pinned = false;           // shared blocks hold a reference
    // Blocks [0, n_retired) are behind the sliding window: no slot, no reference (SeqBlock{});
    // attention never reads them again.
    size_t n_retired = 0;
    uint64_t parked_tick = 0;  // when it was parked (tails are reclaimed oldest first)
  };

  KvCache(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold);

  Sequence& seq(SeqId id);
  const Sequence& seq(SeqId id) const;
  void rebuild_table(Sequence& s);
  void release_blocks_from(Sequence& s, size_t first_block);
  void truncate(Sequence& s, int64_t n);  // keeps n tokens, or fewer when T0 has no room for a copy
  // Of a sequence holding n_tokens, the leading blocks the window no longer needs: every
  // later query (at n_tokens or after) starts attending at or after them. The last full
  // block is always kept (the next block is published under its key).
  size_t n_behind_window(int64_t n_tokens) const;
  void retire_behind_window(Sequence& s);
  bool make_room_t0(int32_t n_slots);
  bool make_room_t1(int32_t n_slots);
  bool demote_one(Tier from);
  bool reclaim_parked_tail();
  Result<int32_t> promote(BlockHandle h, int64_t& bad_tokens, ColdRunReader* run);
  // A batched reader of the T2 blocks among `blocks` (null without a cold store or T2 blocks).
  std::unique_ptr<ColdRunReader> cold_run(std::span<const MatchedBlock> blocks);
  std::vector<MatchedBlock> cached_prefix(std::span<const int32_t> prompt);
  int32_t alloc_t0();
  void write_behind(BlockHandle h, const uint8_t* t0_data);
  uint64_t tick() { return ++tick_; }
  void emit(KvEventType type, Tier from, Tier to, const BlockKey& key = {}, int32_t slot = -1, int64_t n_tokens = 0,
            int64_t n_bytes = 0, int64_t seq = -1);

  KvCacheConfig config_;
  backend::Backend& be_;
  ColdStore* cold_;
  RadixIndex index_;
  uint8_t* t0_memory_ = nullptr;
  std::unique_ptr<uint8_t[]> t1_memory_;  // host RAM, untouched until used
  std::vector<uint8_t> staging_;          // host copy of one block for T2 writes and reads
  std::vector<uint8_t> cold_batch_;       // (blocks per batch, block_bytes): T2 runs read ahead of promotion
  BlockPool t0_, t1_;
  std::unordered_map<SeqId, Sequence> seqs_;
  SeqId next_seq_ = 1;
  uint64_t tick_ = 0;
  KvCacheCounters counters_;
  KvCounters event_counters_;
  KvEventLog* events_ = nullptr;
  int64_t request_id_ = -1;
  // Write-behind finishes on the cold store's thread; emit_tier_usage() turns the store's
  // bytes_written into cold_write_done events, less what demotions already reported.
  int64_t cold_written_seen_ = 0;
  int64_t cold_demoted_unseen_ = 0;
};

// Maps core's KV format to the kernels' row type.
inline kernels::KvType to_kernel_type(KvFormat f) { return f; }  // one type since both named it

}  // namespace kvc::kv

// TierStore: where KV blocks live — the T0/T1 pools, the prefix index, moves between tiers, write-behind to T2.
//
//   T0 (compute pool) ──demote──▶ T1 (host RAM) ──demote──▶ T2 (cold store) ──collect──▶ gone
//        ◀──────────promote (a hit)───────────────◀──────────────promote / stage──┘
//
// Contract (the tier-store piece of the cache)
//   Owns:   the T0 slots (backend memory) and T1 slots (host RAM); the RadixIndex of published
//           blocks with their locations and pins; the cache's clock. It uses the cold store (T2)
//           it is given, and hands T0 slots out to the sequence table for private blocks, which
//           frees them again (free_t0).
//   Lookup: lookup() returns the cached full blocks prefixing some tokens with the tier each
//           was found on. A lookup that moves blocks up ahead of a request (prefetch, staging)
//           says which it moved and from where (MovedUp), so that the request reports the tier
//           that lookup found them on rather than the one it moved them to.
//   Invariants (check_invariants): the index is consistent; every indexed block on T0 or T1
//           names an allocated slot that no other indexed block names.
//   Failure: running out of room is a normal result (alloc_t0() -1, a shorter prefix); the
//           reclaimer (the sequence table) is asked for parked private tails before giving up.
//           A T2 block that is missing or corrupt when read (the store collected it, refused its
//           write, or its checksum failed) loses its data in the index (Tier::none), is reported
//           (block_corrupt; n_recomputed_bad) and its caller recomputes it: a block is only ever
//           served after promote() brought its bytes to T0. A write the store refuses leaves the
//           block on the faster tier it was on, or drops it when it is demoted. Misuse asserts.
// Not thread-safe: the engine thread owns it. The cold store is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/backend/backend.h"
#include "core/kv/block_key.h"
#include "core/kv/cold_store.h"
#include "core/kv/kv_telemetry.h"
#include "core/kv/radix_index.h"
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"

namespace kvc::kv {

struct KvCacheConfig {
  kernels::KvBlockLayout layout;  // geometry and formats of one block
  int64_t t0_bytes = 0;           // budget of the compute pool (VRAM on CUDA)
  int64_t t1_bytes = 0;           // budget of host RAM
  BlockKey fingerprint;           // the model fingerprint every key chain is rooted in
  // Sliding window of every layer, in positions (0: none). A sequence releases the blocks
  // wholly behind it: they stay cached (evictable) but no longer take its T0 room.
  int64_t window = 0;
  // A windowed KV group of a hybrid model (docs/ARCHITECTURE.md §3.9): its blocks go to T2 only
  // as checkpoints, the window before a turn boundary (TierStore::write_checkpoint, at park),
  // never at publish or demotion; the rest lives on T0/T1 while room lasts. Its lookup walks the
  // key chain past blocks that have no data anywhere, since only the window's blocks are read.
  bool checkpoints_only = false;
  // A recurrent KV group (lfm2's conv layers, kv_group_spec.h): each block holds the state after
  // the last position written into it, not one row per position. So a prefix is reusable only up
  // to a block boundary (a full block's state is its snapshot), or up to the exact end of the
  // sequence's own private tail; the rest of a partial block is recomputed, never copied.
  bool recurrent = false;
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

// What a lookup (prepare, prefetch) found for a prompt: how many of its tokens are served from
// each tier, as recorded at lookup.
struct PrefixInfo {
  int64_t n_prompt = 0;
  int64_t n_cached = 0;          // positions whose KV is reused (n_prompt - n_cached computed)
  int64_t n_from_tier[3] = {};   // of n_cached: found on T0, T1, T2 (private tail counts as T0)
  int64_t n_recomputed_bad = 0;  // tokens lost to missing or corrupt T2 blocks
  // A partial hit (KV groups, kv_cache.h): positions after n_cached that every layer but a
  // windowed group's had cached, recomputed because that group lacked its window before them.
  int64_t n_recomputed = 0;
  double lookup_ms = 0;
  double promote_ms = 0;
};

// A cached full block of a lookup and the tier it was found on (see the contract above).
struct FoundBlock {
  BlockHandle handle;
  BlockKey key;
  Tier found_on = Tier::none;
};

// A block a prefetch or staging read moved up, from the tier its lookup found it on.
struct MovedUp {
  BlockHandle handle;
  Tier from = Tier::none;
  Tier to = Tier::none;
};

// Of a sequence holding n_tokens, the leading blocks a sliding window of `window` positions no
// longer needs: every later query (at n_tokens or after) starts attending at or after them. The
// last full block is always kept (the next block is chained from its key).
size_t n_blocks_behind_window(int64_t window, int64_t block_tokens, int64_t n_tokens);

// Asked for T0 room when no unpinned indexed block can leave T0 (the sequence table gives up
// a parked sequence's private tail).
class T0Reclaimer {
 public:
  virtual bool reclaim_one_t0() = 0;

 protected:
  ~T0Reclaimer() = default;
};

class TierStore {
 public:
  // T0 slots come from the backend (its compute memory), T1 from host memory.
  static Result<std::unique_ptr<TierStore>> create(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold,
                                                   KvTelemetry& telemetry);
  ~TierStore();
  TierStore(const TierStore&) = delete;
  TierStore& operator=(const TierStore&) = delete;

  const KvCacheConfig& config() const { return config_; }
  int32_t block_tokens() const { return config_.layout.block_tokens; }
  size_t block_bytes() const { return static_cast<size_t>(config_.layout.block_bytes); }
  const BlockKey& fingerprint() const { return config_.fingerprint; }
  size_t n_behind_window(int64_t n_tokens) const {
    return n_blocks_behind_window(config_.window, block_tokens(), n_tokens);
  }
  void set_reclaimer(T0Reclaimer* r) { reclaimer_ = r; }

  // ---- T0 slots for private blocks and promotions.
  // A free slot, demoting unpinned blocks (then asking the reclaimer) to make one; -1: T0 is
  // short (alloc_failed was emitted).
  int32_t alloc_t0();
  void free_t0(int32_t slot) { t0_.free(slot); }
  uint8_t* t0_data(int32_t slot) const { return t0_.data(slot); }
  void copy_t0(int32_t from, int32_t to) { be_.copy(t0_.data(from), t0_.data(to), block_bytes()); }

  // ---- Lookup and promotion.
  // The cached full blocks that prefix `tokens`: the index on any tier, continued through the
  // cold store (after a restart the index is empty but the disk still holds the chain). Blocks
  // without data end the match, unless they are behind the sliding window of the match.
  std::vector<FoundBlock> lookup(std::span<const int32_t> tokens);
  // A batched reader of the T2 blocks among `blocks` (null without a cold store or T2 blocks).
  std::unique_ptr<ColdRunReader> cold_run(std::span<const FoundBlock> blocks);
  // Brings a block to T0 and returns its slot; on a missing or corrupt T2 block the block
  // loses its data, bad_tokens grows by a block and an error is returned (recompute it).
  Result<int32_t> promote(BlockHandle h, int64_t& bad_tokens, ColdRunReader* run);
  // Brings the cached blocks that prefix `tokens` to T0 ahead of use, evicting only unpinned
  // blocks; appends those it moved to `moved` when given.
  PrefixInfo prefetch(std::span<const int32_t> tokens, std::vector<MovedUp>* moved = nullptr);

  // ---- Publication: a sequence's private T0 block became full.
  struct Published {
    BlockHandle handle;
    int32_t t0_slot = -1;  // the slot the sequence now uses (another's, if it was published first)
  };
  // Enters the block in the index (written behind to T2) or, when the key is indexed already,
  // frees the duplicate or hands it the slot; the caller acquires the handle.
  Published publish(BlockHandle parent, std::span<const int32_t> tokens, int32_t t0_slot, int64_t seq);

  // A checkpoint-only store (KvCacheConfig::checkpoints_only): writes to T2 the full blocks of
  // `tokens` that a resume right after them reads (the window before the last full block, with
  // the block of margin prepare() keeps), where they still have data on T0/T1 and are not on T2
  // yet. Returns how many were queued.
  int64_t write_checkpoint(std::span<const int32_t> tokens);

  // ---- Staging (disk blocks read off the engine thread land on T1) and forgetting.
  std::vector<BlockKey> cold_prefix_keys(std::span<const int32_t> prompt);
  int64_t stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                     std::span<const uint8_t> payloads, std::vector<MovedUp>* moved = nullptr);
  // The same with one payload per key (KV groups: blocks of several sizes in one read).
  int64_t stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                     std::span<const std::span<const uint8_t>> payloads, std::vector<MovedUp>* moved = nullptr);
  int64_t forget(std::span<const BlockKey> keys);
  void demote_all_unpinned(Tier to);

  // ---- State.
  RadixIndex& index() { return index_; }
  const RadixIndex& index() const { return index_; }
  ColdStore* cold_store() const { return cold_; }
  KvTelemetry& telemetry() { return telemetry_; }
  TierUsageBytes tier_usage(Tier t) const;
  std::array<TierUsageBytes, k_n_data_tiers> tier_usages() const;
  const BlockPool& pool(Tier t) const { return t == Tier::t0 ? t0_ : t1_; }
  uint64_t tick() { return ++tick_; }
  uint64_t now_tick() const { return tick_; }

  Status check_invariants() const;

 private:
  TierStore(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold, KvTelemetry& telemetry);

  std::vector<FoundBlock> lookup_windowed(std::span<const int32_t> tokens, std::span<const MatchedBlock> matched);
  bool make_room_t0(int32_t n_slots);
  bool make_room_t1(int32_t n_slots);
  bool demote_one(Tier from);
  void write_behind(BlockHandle h, const uint8_t* t0_data);

  KvCacheConfig config_;
  backend::Backend& be_;
  ColdStore* cold_;
  KvTelemetry& telemetry_;
  T0Reclaimer* reclaimer_ = nullptr;
  RadixIndex index_;
  uint8_t* t0_memory_ = nullptr;
  std::unique_ptr<uint8_t[]> t1_memory_;  // host RAM, untouched until used
  std::vector<uint8_t> staging_;          // host copy of one block for T2 writes and reads
  std::vector<uint8_t> cold_batch_;       // (blocks per batch, block_bytes): T2 runs read ahead of promotion
  BlockPool t0_, t1_;
  uint64_t tick_ = 0;
};

}  // namespace kvc::kv

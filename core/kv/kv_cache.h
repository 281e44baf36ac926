// KvCache: paged KV blocks on three tiers, shared through the prefix index, owned by sequences.
//
// The cache is three pieces, each with its contract in its header; this class only wires them
// together and keeps the one API the engine, the app and the tests use:
//
//   SequenceTable (sequence_table.h)   block tables, copy on write, windows, parking; KV groups
//        │ slots, lookup, publish
//        ▼
//   TierStore (tier_store.h)           T0/T1 pools, prefix index, promote/demote, write-behind,
//        │ every event                 staging, cold release; records the tier of a hit once
//        ▼
//   KvTelemetry (kv_telemetry.h)       events, the one set of counters (KvCounters), and
//                                      describe() for the memory view (kv_view.h)
//
// KV groups (docs/ARCHITECTURE.md §3.9). A hybrid model's layers fall into groups, each with its
// own block layout, fingerprint (so its own key chain), window, tiers and index: group 0 is the
// cache's own pieces, groups 1.. are single-group caches it holds. Every call acts on every
// group, in lockstep (the same sequence ids, the same tokens), and prepare() agrees on one
// prefix, the hit rule: P positions are a full hit when every group has its blocks for them
// (a global group [0, P), a windowed one [P - W, P)); otherwise the largest s <= P every group
// has is reused and [s, P) recomputed (PrefixInfo::n_recomputed = P - s). A model of one group
// (every model but Gemma) is exactly the single cache it always was.
//
// Not thread-safe: the engine thread owns the cache. The cold store (T2) is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/backend/backend.h"
#include "core/kv/block_key.h"
#include "core/kv/cold_store.h"
#include "core/kv/kv_events.h"
#include "core/kv/kv_format.h"
#include "core/kv/kv_metrics.h"
#include "core/kv/kv_telemetry.h"
#include "core/kv/radix_index.h"
#include "core/kv/sequence_table.h"
#include "core/kv/tier_store.h"
#include "core/util/result.h"
#include "kernels/cpu/kv_block.h"

namespace kvc::kv {

struct KvView;
struct KvViewOptions;

class KvCache {
 public:
  // T0 slots come from the backend (its compute memory), T1 from host memory.
  static Result<std::unique_ptr<KvCache>> create(const KvCacheConfig& config, backend::Backend& be,
                                                 ColdStore* cold = nullptr);
  // One KV group per config (group 0 first), all over the same cold store.
  static Result<std::unique_ptr<KvCache>> create(std::span<const KvCacheConfig> groups, backend::Backend& be,
                                                 ColdStore* cold = nullptr);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  // Writes the checkpoints of the live sequences (a turn boundary for a windowed group).
  ~KvCache();

  SeqId create_sequence();
  // Forgets a sequence: its private blocks are freed, its shared blocks stay cached.
  void destroy_sequence(SeqId id);

  // ---- KV groups (group 0 is this cache's own pieces).
  int32_t n_groups() const { return 1 + static_cast<int32_t>(more_.size()); }
  KvCache& group(KvGroup g) { return g == 0 ? *this : *more_.at(static_cast<size_t>(g - 1)); }
  const KvCache& group(KvGroup g) const { return g == 0 ? *this : *more_.at(static_cast<size_t>(g - 1)); }
  // Every group's block layout, in group order (the forward pass stores each layer in its group's).
  std::vector<kernels::KvBlockLayout> layouts() const;

  // Makes the sequence hold the longest reusable prefix of `prompt` (its own tail, the
  // index on any tier, the cold store after a restart), pinned on T0. At least one prompt
  // token is left to compute, since its logits are needed. Fails only if T0 cannot hold
  // the prefix (then nothing is kept). The tiers reported are those the lookup found the
  // blocks on (before a prefetch or staging read moved them up for this request).
  Result<PrefixInfo> prepare(SeqId id, std::span<const int32_t> prompt);
  // Brings the cached blocks that prefix `tokens` to T0 ahead of use (a conversation was
  // opened), evicting only unpinned blocks. Returns how many of its tokens are now on T0
  // (n_cached) and which tier each came from. With for_seq, that sequence's next prepare()
  // reports the blocks under the tiers this lookup found them on.
  PrefixInfo prefetch(std::span<const int32_t> tokens, SeqId for_seq = 0);
  // Ensures T0 blocks for n_new more positions, evicting or demoting unpinned blocks as
  // needed. false: T0 is short (the caller preempts or fails the request); nothing leaks.
  bool reserve(SeqId id, int64_t n_new);
  // Records tokens whose KV the forward pass wrote at positions [n_tokens, n_tokens + n).
  // Blocks that became full are published in the index (and written behind to T2).
  void commit(SeqId id, std::span<const int32_t> tokens);
  // Unpins the sequence's shared blocks (they become evictable); the private tail stays with
  // the sequence so the next turn of the same conversation reuses it.
  void park(SeqId id);

  // The sequence's block table (T0 addresses) of a KV group, valid until the next call that
  // changes it.
  std::span<uint8_t* const> block_table(SeqId id, KvGroup g = 0) const {
    return g == 0 ? seqs_->block_table(id, 0) : group(g).block_table(id, 0);
  }
  // Appends every group's block table of the sequence to `out`, group 0 first (SeqInput::blocks).
  void block_tables(SeqId id, std::vector<std::span<uint8_t* const>>& out) const {
    out.push_back(seqs_->block_table(id, 0));
    for (const auto& g : more_) out.push_back(g->seqs_->block_table(id, 0));
  }
  int64_t n_tokens(SeqId id) const { return seqs_->n_tokens(id); }
  std::span<const int32_t> tokens(SeqId id) const { return seqs_->tokens(id); }
  // K per channel (int4c, group 0): the holding area of the sequence's partly filled last
  // block's K and V rows, (n_layer, layout().tail_layer_elems()) F16 (kernels/cpu/kv_block.h);
  // empty for other formats.
  std::span<uint16_t> kv_tail(SeqId id) { return seqs_->kv_tail(id); }

  const kernels::KvBlockLayout& layout() const { return store_->config().layout; }
  int32_t block_tokens() const { return store_->block_tokens(); }
  const BlockKey& fingerprint() const { return store_->fingerprint(); }
  // Of every group (T2: the one cold store).
  TierUsageBytes tier_usage(Tier t) const;
  // Of KV group g's own pools (T2: the one cold store).
  TierUsageBytes tier_usage(Tier t, KvGroup g) const { return group(g).store_->tier_usage(t); }
  // The window of a group's layers (0: they attend to every position).
  int64_t window() const { return store_->config().window; }
  // Whether a group holds recurrent state snapshots (lfm2's conv layers), not per-position rows.
  bool recurrent() const { return store_->config().recurrent; }
  // Counts of every event the cache produced (kept whether or not an event log is set).
  const KvCounters& counters() const { return telemetry_->counters(); }
  const RadixIndex& index() const { return store_->index(); }
  ColdStore* cold_store() const { return store_->cold_store(); }
  // Wasted slots in partial last blocks (tokens), over all sequences.
  int64_t internal_fragmentation_tokens() const { return seqs_->internal_fragmentation_tokens(); }

  // The three pieces, for code that needs one contract rather than the whole cache.
  const TierStore& tier_store() const { return *store_; }
  const SequenceTable& sequence_table() const { return *seqs_; }
  const KvTelemetry& telemetry() const { return *telemetry_; }

  // Block events (allocation, hits, misses, promotions, demotions, evictions, copies on
  // write, publication, cold writes) go to `log` when set; `request` tags them.
  void set_event_log(KvEventLog* log);
  void set_current_request(int64_t request_id);
  // Appends a tier_usage sample per data tier (for the timelines; every group's together), and
  // a cold_write_done per block the cold store finished writing behind since the last call.
  void emit_tier_usage();

  // Staging: bringing disk blocks to host RAM off the engine thread, so that the engine keeps
  // computing while a request's history is read (tier_store_staging.cpp).
  //   keys = cold_prefix_keys(prompt)        engine thread: which blocks are only on T2
  //   cold_store()->read_many(keys, ...)     any thread: the slow part
  //   stage_cold(keys, results, payloads)    engine thread: they land on T1
  // then prepare() finds them on T1. At most T1's capacity
  // of keys; blocks behind the sliding window are left out (prepare does not read them).
  // Every group's keys, group by group; with sizes, each key's block bytes (they differ by group).
  std::vector<BlockKey> cold_prefix_keys(std::span<const int32_t> prompt, std::vector<size_t>* sizes = nullptr);
  // payloads: (keys.size(), block_bytes); results[i] says whether payload i was read. Blocks
  // no longer indexed on T2 are skipped. Returns the number of blocks put on T1.
  // With for_seq, that sequence's next prepare() reports the staged blocks as found on T2.
  int64_t stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                     std::span<const uint8_t> payloads, SeqId for_seq = 0);
  // The same with one payload per key (as many bytes as cold_prefix_keys' sizes said).
  int64_t stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                     std::span<const std::span<const uint8_t>> payloads, SeqId for_seq = 0);

  // Drops blocks from T0/T1 and the index for good (a deleted conversation's blocks that no
  // other stream reaches; the cold store is told separately). Blocks a running sequence pins
  // are kept, and so is a block with children outside `keys`. Returns how many were dropped.
  // Keys of any group (each group drops the ones it indexes).
  int64_t forget(std::span<const BlockKey> keys);

  // Demotes every unpinned T0 block to T1 (or T2): for tests of the tier paths.
  void demote_all_unpinned(Tier to);

  // Fills `out` with the metrics, every block (up to a cap) and the prefix tree; only reads
  // the cache. Owners (options.owners, else the sequences) colour blocks and get the shares.
  void describe(KvView& out, const KvViewOptions& options) const;
  void describe(KvView& out) const;

  // Each piece's invariants, then the ones across them: every T0/T1 slot has exactly one
  // owner (an indexed block or a sequence's private block) and every index reference is a
  // running sequence's pin.
  Status check_invariants() const;

 private:
  KvCache() = default;

  // Declared in dependency order: destroyed sequences first, then the store, then telemetry.
  std::unique_ptr<KvTelemetry> telemetry_;
  std::unique_ptr<TierStore> store_;
  std::unique_ptr<SequenceTable> seqs_;
  std::vector<std::unique_ptr<KvCache>> more_;  // KV groups 1.. (none for most models)
};

// Maps core's KV format to the kernels' row type.
inline kernels::KvType to_kernel_type(KvFormat f) { return f; }  // one type since both named it

}  // namespace kvc::kv

// SequenceTable: what each sequence holds — its tokens and block table, copy on write, the sliding window, parking.
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
// sequence uses are pinned on T0 (one index reference each); a parked sequence holds no pin.
//
// Contract (the sequence-table piece of the cache)
//   Owns:   the sequences: their tokens, their block tables, the index references (pins) they
//           hold and their private T0 slots (taken from and given back to the TierStore).
//   KV groups: a table serves one KV group (block_table(id) == block_table(id, 0)). A hybrid
//           model (local layers next to global ones) has a cache per group, each with its own
//           table, tier store and window, in lockstep (kv_cache.h, docs/ARCHITECTURE.md §3.9);
//           probe(), the max_reuse cap of prepare() and shorten() let them agree on one prefix,
//           and checkpoint() keeps a windowed group's window at turn boundaries.
//   Invariants (check_invariants): a running sequence has blocks for all its tokens; its table
//           agrees with its slots; every full block it holds is published and pinned on T0 at
//           the slot it uses; blocks behind the window hold nothing; a parked sequence holds at
//           most its private tail.
//   K per channel (int4c): a block's K is encoded once its last row is written, so the K and V
//           rows of a sequence's partly filled tail live in F16 in its holding area (kv_tail),
//           which stays valid as long as that private tail does: parked, reused by the next
//           prepare(), or cut shorter. A tail that would come from a shared (sealed) block has
//           no F16 rows to hold, so it is given up and its positions recomputed instead of
//           copied on write (at most B - 1 positions).
//   Reports: prepare()'s PrefixInfo and block_hit events give each reused token the tier its
//           block was found on, recorded once by the lookup that found it: prepare's own, or the
//           prefetch or staging read that moved it up for this sequence (note_moved_up).
//   Failure: prepare() fails (out_of_memory) only when T0 cannot hold the prefix, keeping
//           nothing; reserve() returns false when T0 is short (the engine preempts); a block that
//           cannot be promoted ends the prefix there (its positions are recomputed). Unknown ids
//           and writes past the reserved blocks are bugs (asserts).
// Not thread-safe: the engine thread owns it.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/kv/tier_store.h"
#include "core/util/result.h"

namespace kvc::kv {

using SeqId = int64_t;
using KvGroup = int32_t;  // a set of layers sharing one block chain (0: all of them, or the global ones)

class SequenceTable final : public T0Reclaimer {
 public:
  struct SeqBlock {
    int32_t t0_slot = -1;
    BlockHandle shared;  // null: private to the sequence
  };
  // One KV group's blocks. Blocks [0, n_retired) are behind the sliding window: no slot, no
  // reference (SeqBlock{}); attention never reads them again.
  struct BlockTable {
    std::vector<SeqBlock> blocks;    // ceil(tokens / B) <= blocks.size()
    std::vector<uint8_t*> t0_table;  // T0 addresses of blocks (null when retired)
    size_t n_retired = 0;
  };
  struct Sequence {
    std::vector<int32_t> tokens;
    BlockTable table;          // group 0 (the only one today)
    bool pinned = false;       // running: its shared blocks hold a reference
    uint64_t parked_tick = 0;  // when it was parked (tails are reclaimed oldest first)
    // Blocks a prefetch or staging read moved up for this sequence's next prepare(), which
    // reports such a block, still where it was moved to, under the tier that lookup found it on.
    std::vector<MovedUp> moved_up;
    // K per channel: rows [0, tokens % B) of each layer hold the tail block's K and V (kv_block.h).
    std::vector<uint16_t> kv_tail;  // (n_layer, tail_layer_elems()) F16, else empty
  };

  explicit SequenceTable(TierStore& store);

  SeqId create_sequence();
  void destroy_sequence(SeqId id);
  // max_reuse caps the positions reused (KV groups agree on one prefix, kv_cache.h).
  Result<PrefixInfo> prepare(SeqId id, std::span<const int32_t> prompt, int64_t max_reuse = INT64_MAX);
  // How many positions of `prompt` prepare() would reuse (at most max_reuse), when no promotion
  // or copy fails; only the index may change (blocks found on T2 are entered).
  int64_t probe(SeqId id, std::span<const int32_t> prompt, int64_t max_reuse = INT64_MAX);
  // Keeps at most the first n tokens of a running sequence (fewer when a copy on write finds
  // no room); returns how many it holds.
  int64_t shorten(SeqId id, int64_t n);
  // A checkpoint-only group writes the window before the sequence's end to T2 (a turn
  // boundary: park, the next prepare, the cache closing).
  void checkpoint(SeqId id);
  bool reserve(SeqId id, int64_t n_new);
  void commit(SeqId id, std::span<const int32_t> tokens);
  void park(SeqId id);
  // A prefetch or staging read moved these blocks up ahead of the sequence's next prepare().
  void note_moved_up(SeqId id, std::span<const MovedUp> moved);

  int32_t n_groups() const { return 1; }
  std::span<uint8_t* const> block_table(SeqId id, KvGroup group = 0) const;
  int64_t n_tokens(SeqId id) const { return static_cast<int64_t>(seq(id).tokens.size()); }
  std::span<const int32_t> tokens(SeqId id) const { return seq(id).tokens; }
  std::span<uint16_t> kv_tail(SeqId id) { return seq(id).kv_tail; }
  const std::unordered_map<SeqId, Sequence>& sequences() const { return seqs_; }
  int64_t internal_fragmentation_tokens() const;

  // T0Reclaimer: frees the private tail block of the longest-parked sequence; its positions
  // are recomputed when the conversation comes back.
  bool reclaim_one_t0() override;

  Status check_invariants() const;

 private:
  Sequence& seq(SeqId id);
  const Sequence& seq(SeqId id) const;
  void rebuild_table(Sequence& s);
  void release_blocks_from(Sequence& s, size_t first_block);
  void truncate(Sequence& s, int64_t n);  // keeps n tokens, or fewer when T0 has no room for a copy
  void retire_behind_window(Sequence& s);
  size_t lookup_span(size_t n_prompt, size_t cap) const;  // the prompt positions a capped lookup reads
  // K per channel: a partial block copied from a shared one would have no F16 K rows.
  bool k_per_channel() const { return kernels::kv_k_per_channel(store_.config().layout.k_type); }

  TierStore& store_;
  RadixIndex& index_;
  KvTelemetry& telemetry_;
  std::unordered_map<SeqId, Sequence> seqs_;
  SeqId next_seq_ = 1;
};

}  // namespace kvc::kv

// KvView: a plain, copyable picture of the KV cache (metrics, every block, the prefix tree) for the memory view.
//
// KvCache::describe() fills it by reading the cache only, so the engine thread can call it after
// its steps and publish the copy through a Snapshot<KvView>. Blocks and tree nodes are capped;
// what did not fit is counted, never silently dropped.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/kv/block_key.h"
#include "core/kv/kv_metrics.h"
#include "core/kv/radix_index.h"

namespace kvc::kv {

// A token stream whose blocks should be attributed to `id` (a conversation, in the app).
struct KvOwner {
  int64_t id = -1;
  std::span<const int32_t> tokens;
  // Optional: the chain keys of tokens' full blocks (stream_block_keys), computed once by the
  // caller so that describe() does not hash the whole stream again on every call.
  std::span<const BlockKey> keys;
  // Optional, for a model of several KV groups: more_keys[g - 1] are group g's keys of the same
  // blocks (its own chain). A group without them hashes the stream itself.
  std::span<const std::vector<BlockKey>> more_keys;
};

struct KvViewOptions {
  size_t max_blocks = 4096;
  size_t max_nodes = 4096;
  // Empty: the owners are the cache's sequences (id = SeqId). Otherwise these streams are: a
  // full block belongs to an owner whose tokens chain to its key, a sequence's private tail to
  // an owner whose tokens begin with the sequence's.
  std::span<const KvOwner> owners;
};

// One block. Invariants: n_owners == 0 iff owner_id == -1; is_private implies key is null and
// tier == t0; n_tokens <= the block size.
struct KvBlockView {
  BlockKey key;  // null for a private (unpublished) block
  Tier tier = Tier::none;
  int32_t slot = -1;  // slot on T0/T1; -1 on T2
  int32_t n_tokens = 0;
  int32_t n_refs = 0;  // running sequences pinning it
  int32_t n_hits = 0;
  uint64_t last_use = 0;    // cache ticks; compare with KvView::tick
  int64_t position = 0;     // tokens before the block
  bool is_private = false;  // a sequence's partial tail (or a block reserved ahead)
  bool on_cold = false;     // a copy is on T2 (written behind), or it lives there
  int64_t owner_id = -1;    // the first owner (lowest id) holding it
  int32_t n_owners = 0;     // owners holding it; >= 2 means shared
  int32_t node = -1;        // index in KvView::nodes of its tree node; -1 for private or left out
  bool is_shared() const { return n_owners >= 2; }
};

// One node of the prefix tree, in depth-first pre-order (a parent comes before its children).
struct KvNodeView {
  int32_t parent = -1;  // index in KvView::nodes; -1 for a root or a parent left out
  int32_t level = 0;
  bool is_root = false;
  int64_t position = 0;  // tokens before its first block
  int32_t n_blocks = 0;  // length of its run
  int32_t n_children = 0;
  int32_t n_hits = 0;        // matches that reached it
  Tier tier = Tier::none;    // of its first block
  int32_t first_block = -1;  // index in KvView::blocks of its first block; -1 when left out
};

// KV groups (docs/ARCHITECTURE.md §3.9): a KvView describes one group, its blocks, tree, shares
// and counters; KvCache::describe() fills group 0's here and every other group's, the same way,
// in more_groups (empty for a model of one group). metrics.tiers adds every group up (T2: the
// one cold store); group_tiers is this group's own part.
struct KvView {
  int32_t group = 0;
  int32_t n_layers = 0;  // the group's layers (a model of one group: all of them)
  int64_t window = 0;    // positions its layers attend to; 0: all (global layers)
  // The group's own pools on T0 and T1; on T2 its indexed blocks with a disk copy (of the cold
  // store's capacity, which the groups share).
  std::array<TierUsage, k_n_data_tiers> group_tiers{};
  std::vector<KvView> more_groups;  // groups 1.., each with empty more_groups
  KvMetrics metrics;                // tiers (every group), shares (one per owner), counters, fragmentation
  uint64_t tick = 0;                // the cache's clock now, for recency
  int64_t block_bytes = 0;
  std::vector<KvBlockView> blocks;  // index blocks in tree pre-order, then private blocks
  std::vector<KvNodeView> nodes;
  int64_t n_blocks_left_out = 0;
  int64_t n_nodes_left_out = 0;
  int64_t n_shared_blocks = 0;                             // blocks with n_owners >= 2 (over all blocks, listed or not)
  std::array<int64_t, k_n_data_tiers> n_blocks_on_tier{};  // over all blocks, listed or not
  int64_t n_blocks_on_cold = 0;                            // indexed blocks with on_cold, listed or not
};

}  // namespace kvc::kv

// RadixIndex: the prefix index of the KV cache, a radix tree over full KV blocks.
//
// One tree per model fingerprint. A node holds a run of consecutive full blocks (a compressed
// edge); a block's children are the next block of its run or the first blocks of its node's
// child nodes. A hash map from BlockKey to block gives O(1) lookups by key. Blocks live in a
// slab and are named by stable handles: splits and merges move block ids between nodes but
// never move or invalidate a block, so the cache manager can hold handles across them.
//
// Inserting X after b1, which sits in the middle of node N's run, splits N:
//
//   before:   root ── N[b0 b1 b2 b3] ─┬─ C1[...]
//                                     └─ C2[...]
//
//   after:    root ── N[b0 b1] ─┬─ L[b2 b3] ─┬─ C1[...]      L takes N's tail and children
//                               │            └─ C2[...]
//                               └─ M[X]                     M is the new branch
//
// Blocks b0..b3 keep their handles; only their (node, index in run) bookkeeping changes.
// Removing the last block of a leaf shrinks its run; a leaf left empty disappears, and a
// parent left with a single child merges with it (the inverse of the split above), so the tree
// stays compressed: every node other than a root has zero or at least two children.
//
// Not thread-safe: the engine thread that owns the KV cache owns its index.
// The index is tier-agnostic: each block carries a BlockLocation that the manager sets; the
// index only uses it to answer "which blocks can leave tier t" (see eviction_candidate).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/kv/block_key.h"
#include "core/util/result.h"

namespace kvc::kv {

// Where a block's KV data lives, fastest first. none: indexed without data (e.g. still in flight).
enum class Tier : uint8_t { t0, t1, t2, none };
constexpr int k_n_tiers = 4;
constexpr int tier_index(Tier t) { return static_cast<int>(t); }
const char* tier_name(Tier t);

struct BlockLocation {
  Tier tier = Tier::none;
  int32_t slot = -1;  // meaning owned by the tier's pool (a T0/T1 slot, or unused on T2)
  friend bool operator==(const BlockLocation&, const BlockLocation&) = default;
};

// A stable name for a block: a slab slot and the slot's generation, so a handle to a removed
// block is detected (is_live) instead of silently naming the slot's next occupant.
struct BlockHandle {
  uint32_t index = UINT32_MAX;
  uint32_t generation = 0;
  bool is_null() const { return index == UINT32_MAX; }
  friend bool operator==(const BlockHandle&, const BlockHandle&) = default;
};

struct MatchedBlock {
  BlockHandle handle;
  BlockKey key;
  BlockLocation location;
};

// The result of match(): the longest cached run of full blocks that prefixes the tokens.
class PrefixMatch {
 public:
  std::span<const MatchedBlock> blocks() const { return blocks_; }
  size_t n_blocks() const { return blocks_.size(); }
  bool empty() const { return blocks_.empty(); }
  int64_t n_tokens() const { return static_cast<int64_t>(blocks_.size()) * block_size_; }
  const BlockKey& fingerprint() const { return fingerprint_; }
  // The parent for the next insert: the last matched block, null when nothing matched.
  BlockHandle last() const { return blocks_.empty() ? BlockHandle{} : blocks_.back().handle; }
  // The key the next block chains from: the last matched key, else the fingerprint.
  const BlockKey& last_key() const { return blocks_.empty() ? fingerprint_ : blocks_.back().key; }

 private:
  friend class RadixIndex;
  std::vector<MatchedBlock> blocks_;
  BlockKey fingerprint_;
  int32_t block_size_ = 0;
};

struct NewBlock {
  BlockKey key;                     // chain_key(parent's key, or the fingerprint at the root, tokens)
  std::span<const int32_t> tokens;  // (B) token ids
  BlockLocation location;
  uint64_t tick = 0;  // the last-use tick it starts with
};

struct InsertResult {
  BlockHandle handle;
  bool inserted = false;  // false: the key was already indexed; handle names the existing block
};

struct BlockInfo {
  BlockKey key;
  BlockLocation location;
  int32_t n_refs = 0;
  int32_t n_hits = 0;
  int32_t n_children = 0;
  int64_t position = 0;          // tokens before the block
  int64_t recompute_tokens = 0;  // position + B: the tokens attention spans to recompute it
  uint64_t last_use = 0;
  double eviction_score = 0;  // lower leaves first
};

// One node of the tree as the UI's prefix tree view sees it, in depth-first pre-order.
struct NodeView {
  int32_t id = -1;
  int32_t parent = -1;  // -1 for a root
  int32_t level = 0;    // 0 for a root, 1 for its children, ...
  bool is_root = false;
  BlockKey fingerprint;              // the tree's fingerprint
  int64_t position = 0;              // tokens before the node's first block
  std::span<const uint32_t> blocks;  // the run's slab indices (empty for a root); valid during the visit
  int32_t n_children = 0;
  int32_t n_hits = 0;  // hits of the first block: matches that reached this node
};

struct IndexStats {
  int64_t n_roots = 0;
  int64_t n_nodes = 0;  // nodes holding blocks (roots excluded)
  int64_t n_blocks = 0;
  int64_t n_branch_points = 0;  // nodes, roots included, with at least two children
  int64_t n_leaves = 0;
  int64_t n_referenced = 0;  // blocks with n_refs > 0
  int64_t n_hits = 0;        // sum over blocks
  std::array<int64_t, k_n_tiers> n_blocks_on_tier{};
  std::array<int64_t, k_n_tiers> n_evictable_on_tier{};
};

struct RadixIndexOptions {
  int32_t block_size = 16;  // B, tokens per block
  // Eviction score = last_use + ticks_per_cost_doubling * log2(recompute_tokens / B): a block
  // twice as deep (twice the attention work to recompute) is kept as if used that many ticks
  // later. In the manager's tick units; 0 gives plain LRU.
  double ticks_per_cost_doubling = 1.0;
  // Let an unreferenced block leave T0 or T1 while a child stays on a faster tier (leaving
  // the index still needs no children). With sliding windows the old blocks of a chain are
  // the ones nobody reads, so they must be able to move down under their live tails.
  bool demote_inner_blocks = false;
};

// Invariants (check_invariants() verifies all of them):
//  - slab and map agree: every live block is key_map_[key] and sits at
//    nodes_[node].blocks[index_in_run]; the map holds live blocks only;
//  - a root has an empty run, parent -1, at least one child, and is roots_[its fingerprint];
//    every other node has a non-empty run, a live parent that lists it exactly once, and zero or
//    at least two children (the tree is compressed);
//  - the first blocks of a node's children have pairwise different tokens;
//  - keys chain: key(b) = chain_key(key(parent block) or the fingerprint, tokens(b)), and
//    parent_block / position agree with the tree;
//  - n_refs >= 0, a referenced block's ancestors are all live, and hits(parent) >= hits(child);
//  - per-block counts of children per tier, per-tier block counts and the eviction queues
//    agree with a recomputation from scratch.
class RadixIndex {
 public:
  explicit RadixIndex(RadixIndexOptions options = {});

  int32_t block_size() const { return options_.block_size; }

  // The longest run of full blocks of `tokens` (floor(size / B) of them) already indexed under
  // `fingerprint`; each matched block's hit count goes up by one. Tokens are compared exactly;
  // one key is hashed per node boundary crossed, to pick the child in O(1).
  PrefixMatch match(const BlockKey& fingerprint, std::span<const int32_t> tokens);

  // Publishes one full block after `parent` (null: at the root of `fingerprint`'s tree).
  // A key already indexed returns the existing block (the caller frees its duplicate).
  InsertResult insert(const BlockKey& fingerprint, BlockHandle parent, const NewBlock& block);

  // O(1) lookup by key (storage, restarts).
  std::optional<BlockHandle> find(const BlockKey& key) const;
  bool is_live(BlockHandle h) const;

  // Reference counts pin blocks used by running sequences; releasing an unreferenced block is a bug.
  void acquire(BlockHandle h);
  void release(BlockHandle h);
  void acquire(std::span<const MatchedBlock> blocks);
  void release(std::span<const MatchedBlock> blocks);

  void set_location(BlockHandle h, BlockLocation location);
  void touch(BlockHandle h, uint64_t tick);

  // The unreferenced block on tier t with the lowest eviction score among those that may leave
  // t: none of its children is on t or a faster tier (unless demote_inner_blocks, for t0 and
  // t1), and for t2 and none, where leaving means leaving the index: no children at all. With every block on one tier
  // these are exactly the unreferenced tails of leaf runs. The caller demotes it (set_location) or removes it.
  std::optional<BlockHandle> eviction_candidate(Tier t) const;
  // All of them, best victim first.
  std::vector<BlockHandle> evictable_blocks(Tier t) const;

  // Drops an unreferenced block without children (a leaf run's tail). Handles to it go stale.
  void remove(BlockHandle h);

  BlockKey key(BlockHandle h) const;
  BlockLocation location(BlockHandle h) const;
  // (B) token ids; valid until the next insert.
  std::span<const int32_t> tokens(BlockHandle h) const;
  BlockInfo info(BlockHandle h) const;
  BlockHandle parent(BlockHandle h) const;      // null for a block at the root
  BlockHandle handle_of(uint32_t index) const;  // for NodeView::blocks

  size_t n_blocks() const { return key_map_.size(); }
  bool empty() const { return key_map_.empty(); }
  IndexStats stats() const;
  // Depth-first, pre-order, trees in fingerprint order, children in insertion order.
  void visit(const std::function<void(const NodeView&)>& fn) const;

  Status check_invariants() const;

 private:
  struct Block {
    BlockKey key;
    BlockLocation location;
    uint32_t generation = 0;
    int32_t node = -1;  // -1: a free slot
    int32_t index_in_run = 0;
    int32_t parent_block = -1;  // -1: first block under the root
    int32_t n_refs = 0;
    int32_t n_hits = 0;
    int32_t n_before = 0;  // blocks before it on its path
    uint64_t last_use = 0;
    std::array<int32_t, k_n_tiers> n_children_on{};  // child blocks per tier
    int8_t queued_on = -1;                           // tier whose eviction queue holds it, -1 for none
    double queued_score = 0;
  };
  struct Node {
    int32_t parent = -1;  // -1 for a root or a free node
    bool live = false;
    BlockKey fingerprint;           // of the node's tree
    std::vector<uint32_t> blocks;   // the run; empty for a root
    std::vector<int32_t> children;  // node ids
  };
  using Queue = std::set<std::pair<double, uint32_t>>;

  Block& live_block(BlockHandle h);
  const Block& live_block(BlockHandle h) const;
  BlockHandle handle(uint32_t index) const { return {index, blocks_[index].generation}; }
  std::span<const int32_t> tokens_of(uint32_t index) const;
  double score_of(const Block& b) const;
  bool evictable_from(const Block& b, Tier t) const;
  int32_t n_children(const Block& b) const;
  void refresh_queue(uint32_t index);
  uint32_t new_block_slot();
  int32_t new_node();
  void free_node(int32_t id);
  int32_t get_or_add_root(const BlockKey& fingerprint);
  void split_after(int32_t node_id, int32_t index_in_run);
  void merge_with_only_child(int32_t node_id);
  void visit_node(int32_t id, int32_t level, int64_t position, const std::function<void(const NodeView&)>& fn) const;

  RadixIndexOptions options_;
  std::vector<Block> blocks_;    // the slab
  std::vector<int32_t> tokens_;  // (slab slot, B) token ids
  std::vector<uint32_t> free_blocks_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_nodes_;
  std::unordered_map<BlockKey, uint32_t, BlockKeyHash> key_map_;
  std::unordered_map<BlockKey, int32_t, BlockKeyHash> roots_;
  std::array<Queue, k_n_tiers> queues_;  // (score, slab index) of evictable blocks per tier
  std::array<int64_t, k_n_tiers> n_on_tier_{};
};

}  // namespace kvc::kv

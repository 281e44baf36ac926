// Read-only views of the RadixIndex: stats, the tree visit for the UI, and check_invariants.
#include <algorithm>
#include <string>

#include "core/kv/radix_index.h"

namespace kvc::kv {

namespace {

Status broken(const std::string& what) { return make_error(ErrorCode::internal, "radix index: " + what); }

Status broken_at(const char* kind, size_t id, const std::string& what) {
  return broken(std::string(kind) + " " + std::to_string(id) + ": " + what);
}

}  // namespace

IndexStats RadixIndex::stats() const {
  IndexStats s;
  s.n_roots = static_cast<int64_t>(roots_.size());
  s.n_blocks = static_cast<int64_t>(key_map_.size());
  for (const Node& n : nodes_) {
    if (!n.live) continue;
    if (n.parent >= 0) ++s.n_nodes;
    if (n.children.size() >= 2) ++s.n_branch_points;
    if (n.parent >= 0 && n.children.empty()) ++s.n_leaves;
  }
  for (const Block& b : blocks_) {
    if (b.node < 0) continue;
    if (b.n_refs > 0) ++s.n_referenced;
    s.n_hits += b.n_hits;
  }
  for (size_t t = 0; t < k_n_tiers; ++t) {
    s.n_blocks_on_tier[t] = n_on_tier_[t];
    s.n_evictable_on_tier[t] = static_cast<int64_t>(queues_[t].size());
  }
  return s;
}

void RadixIndex::visit(const std::function<void(const NodeView&)>& fn) const {
  std::vector<std::pair<BlockKey, int32_t>> roots(roots_.begin(), roots_.end());
  std::sort(roots.begin(), roots.end());
  struct Item {
    int32_t id;
    int32_t level;
  };
  std::vector<Item> stack;
  for (const auto& [fingerprint, root] : roots) {
    stack.push_back({root, 0});
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      const Node& n = nodes_[static_cast<size_t>(it.id)];
      NodeView v;
      v.id = it.id;
      v.parent = n.parent;
      v.level = it.level;
      v.is_root = n.parent < 0;
      v.fingerprint = n.fingerprint;
      v.blocks = n.blocks;
      v.n_children = static_cast<int32_t>(n.children.size());
      if (!n.blocks.empty()) {
        const Block& first = blocks_[n.blocks.front()];
        v.position = static_cast<int64_t>(first.n_before) * options_.block_size;
        v.n_hits = first.n_hits;
      }
      fn(v);
      for (auto c = n.children.rbegin(); c != n.children.rend(); ++c) stack.push_back({*c, it.level + 1});
    }
  }
}

Status RadixIndex::check_invariants() const {
  const auto bs = static_cast<size_t>(options_.block_size);
  if (tokens_.size() != blocks_.size() * bs) return broken("token arena size disagrees with the slab");

  // Nodes.
  size_t n_live_nodes = 0;
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const Node& n = nodes_[id];
    if (!n.live) continue;
    ++n_live_nodes;
    if (n.parent < 0) {
      if (!n.blocks.empty()) return broken_at("node", id, "a root holds blocks");
      if (n.children.empty()) return broken_at("node", id, "an empty root was kept");
      const auto r = roots_.find(n.fingerprint);
      if (r == roots_.end() || r->second != static_cast<int32_t>(id))
        return broken_at("node", id, "root not in the root map");
    } else {
      if (n.blocks.empty()) return broken_at("node", id, "empty run");
      if (static_cast<size_t>(n.parent) >= nodes_.size() || !nodes_[static_cast<size_t>(n.parent)].live) {
        return broken_at("node", id, "dead parent");
      }
      const Node& p = nodes_[static_cast<size_t>(n.parent)];
      if (std::count(p.children.begin(), p.children.end(), static_cast<int32_t>(id)) != 1) {
        return broken_at("node", id, "not listed exactly once by its parent");
      }
      if (p.fingerprint != n.fingerprint) return broken_at("node", id, "fingerprint differs from its parent's");
      if (n.children.size() == 1) return broken_at("node", id, "a single child was not merged");
    }
    std::vector<std::span<const int32_t>> firsts;
    for (int32_t c : n.children) {
      if (c < 0 || static_cast<size_t>(c) >= nodes_.size() || !nodes_[static_cast<size_t>(c)].live) {
        return broken_at("node", id, "dead child");
      }
      const Node& child = nodes_[static_cast<size_t>(c)];
      if (child.parent != static_cast<int32_t>(id)) return broken_at("node", id, "child's parent link differs");
      if (child.blocks.empty()) return broken_at("node", id, "child without blocks");
      firsts.push_back(tokens_of(child.blocks.front()));
    }
    auto less = [](std::span<const int32_t> a, std::span<const int32_t> b) {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
    };
    std::sort(firsts.begin(), firsts.end(), less);
    for (size_t k = 1; k < firsts.size(); ++k) {
      if (!less(firsts[k - 1], firsts[k])) return broken_at("node", id, "two children start with the same tokens");
    }
    for (size_t k = 0; k < n.blocks.size(); ++k) {
      const uint32_t b = n.blocks[k];
      if (b >= blocks_.size() || blocks_[b].node != static_cast<int32_t>(id) ||
          blocks_[b].index_in_run != static_cast<int32_t>(k)) {
        return broken_at("node", id, "run entry " + std::to_string(k) + " disagrees with its block");
      }
    }
  }
  size_t n_reached = 0;
  for (const auto& [fingerprint, root] : roots_) {
    if (root < 0 || static_cast<size_t>(root) >= nodes_.size() || !nodes_[static_cast<size_t>(root)].live ||
        nodes_[static_cast<size_t>(root)].parent >= 0 || nodes_[static_cast<size_t>(root)].fingerprint != fingerprint) {
      return broken("root map entry names no root of its fingerprint");
    }
    std::vector<int32_t> stack{root};
    while (!stack.empty()) {
      const int32_t id = stack.back();
      stack.pop_back();
      if (++n_reached > n_live_nodes) return broken("cycle among nodes");
      for (int32_t c : nodes_[static_cast<size_t>(id)].children) stack.push_back(c);
    }
  }
  if (n_reached != n_live_nodes) return broken("live nodes unreachable from the roots");
  if (n_live_nodes + free_nodes_.size() != nodes_.size()) return broken("node free list disagrees");

  // Blocks.
  size_t n_live = 0;
  std::array<int64_t, k_n_tiers> on_tier{};
  std::vector<std::array<int32_t, k_n_tiers>> children_on(blocks_.size());
  std::array<size_t, k_n_tiers> n_queued{};
  for (uint32_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (b.node < 0) {
      if (b.queued_on >= 0) return broken("a free slot is queued for eviction");
      continue;
    }
    ++n_live;
    if (static_cast<size_t>(b.node) >= nodes_.size() || !nodes_[static_cast<size_t>(b.node)].live) {
      return broken_at("block", i, "in a dead node");
    }
    const Node& n = nodes_[static_cast<size_t>(b.node)];
    if (b.index_in_run < 0 || static_cast<size_t>(b.index_in_run) >= n.blocks.size() ||
        n.blocks[static_cast<size_t>(b.index_in_run)] != i) {
      return broken_at("block", i, "not at its place in its run");
    }
    const auto m = key_map_.find(b.key);
    if (m == key_map_.end() || m->second != i) return broken_at("block", i, "key map disagrees");
    int32_t expect_parent = -1;
    if (b.index_in_run > 0) {
      expect_parent = static_cast<int32_t>(n.blocks[static_cast<size_t>(b.index_in_run) - 1]);
    } else if (nodes_[static_cast<size_t>(n.parent)].parent >= 0) {
      expect_parent = static_cast<int32_t>(nodes_[static_cast<size_t>(n.parent)].blocks.back());
    }
    if (b.parent_block != expect_parent) return broken_at("block", i, "parent link disagrees with the tree");
    const Block* p = expect_parent >= 0 ? &blocks_[static_cast<size_t>(expect_parent)] : nullptr;
    if (b.key != chain_key(p ? p->key : n.fingerprint, tokens_of(i)))
      return broken_at("block", i, "key does not chain");
    if (b.n_before != (p ? p->n_before + 1 : 0)) return broken_at("block", i, "wrong position");
    if (b.n_refs < 0) return broken_at("block", i, "negative reference count");
    if (p && p->n_hits < b.n_hits) return broken_at("block", i, "more hits than its parent");
    if (b.n_refs > 0) {
      for (int32_t a = b.parent_block; a >= 0; a = blocks_[static_cast<size_t>(a)].parent_block) {
        if (blocks_[static_cast<size_t>(a)].node < 0)
          return broken_at("block", i, "referenced, with a missing ancestor");
      }
    }
    const auto tier = static_cast<size_t>(tier_index(b.location.tier));
    ++on_tier[tier];
    if (p) ++children_on[static_cast<size_t>(expect_parent)][tier];

    if (b.queued_on >= 0) {
      ++n_queued[static_cast<size_t>(b.queued_on)];
      if (b.queued_score != score_of(b) || queues_[static_cast<size_t>(b.queued_on)].count({b.queued_score, i}) != 1) {
        return broken_at("block", i, "eviction queue entry stale");
      }
    }
  }
  if (n_live != key_map_.size()) return broken("key map holds blocks that are not live");
  if (n_live + free_blocks_.size() != blocks_.size()) return broken("block free list disagrees");
  if (on_tier != n_on_tier_) return broken("per-tier block counts disagree");
  for (uint32_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (b.node < 0) continue;
    if (b.n_children_on != children_on[i]) return broken_at("block", i, "child tier counts disagree");
    const int expect_queue = evictable_from(b, b.location.tier) ? tier_index(b.location.tier) : -1;
    if (b.queued_on != expect_queue) { return broken_at("block", i, "eviction queue membership wrong"); }
  }
  for (size_t t = 0; t < k_n_tiers; ++t) {
    if (queues_[t].size() != n_queued[t])
      return broken(std::string("tier ") + tier_name(static_cast<Tier>(t)) + ": queue size disagrees");
  }
  return {};
}

}  // namespace kvc::kv

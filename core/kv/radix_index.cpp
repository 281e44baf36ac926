// RadixIndex operations: match, insert (with splits), reference counts, locations, eviction, remove.
#include "core/kv/radix_index.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/util/assert.h"

namespace kvc::kv {

namespace {

// Whether a child on tier `child` keeps its parent on tier t from leaving t. Leaving t0 or t1
// is a demotion, fine while the children are on slower tiers; leaving t2 (or none) leaves the
// index, which only a block without children may do.
bool holds_back(Tier child, Tier t) {
  if (t == Tier::t2 || t == Tier::none) return true;
  return tier_index(child) <= tier_index(t);
}

}  // namespace

const char* tier_name(Tier t) {
  switch (t) {
    case Tier::t0: return "t0";
    case Tier::t1: return "t1";
    case Tier::t2: return "t2";
    case Tier::none: return "none";
  }
  return "?";
}

RadixIndex::RadixIndex(RadixIndexOptions options) : options_(options) {
  KVC_ASSERT(options_.block_size > 0);
  KVC_ASSERT(options_.ticks_per_cost_doubling >= 0);
}

RadixIndex::Block& RadixIndex::live_block(BlockHandle h) {
  KVC_ASSERT(is_live(h));
  return blocks_[h.index];
}

const RadixIndex::Block& RadixIndex::live_block(BlockHandle h) const {
  KVC_ASSERT(is_live(h));
  return blocks_[h.index];
}

bool RadixIndex::is_live(BlockHandle h) const {
  return h.index < blocks_.size() && blocks_[h.index].node >= 0 && blocks_[h.index].generation == h.generation;
}

std::span<const int32_t> RadixIndex::tokens_of(uint32_t index) const {
  const auto b = static_cast<size_t>(options_.block_size);
  return {tokens_.data() + index * b, b};
}

double RadixIndex::score_of(const Block& b) const {
  // recompute_tokens / B = n_before + 1.
  return static_cast<double>(b.last_use) +
         options_.ticks_per_cost_doubling * std::log2(static_cast<double>(b.n_before) + 1.0);
}

int32_t RadixIndex::n_children(const Block& b) const {
  int32_t n = 0;
  for (int32_t c : b.n_children_on) n += c;
  return n;
}

bool RadixIndex::evictable_from(const Block& b, Tier t) const {
  if (b.node < 0 || b.location.tier != t || b.n_refs != 0) return false;
  if (options_.demote_inner_blocks && (t == Tier::t0 || t == Tier::t1)) return true;
  for (int i = 0; i < k_n_tiers; ++i) {
    if (b.n_children_on[static_cast<size_t>(i)] > 0 && holds_back(static_cast<Tier>(i), t)) return false;
  }
  return true;
}

void RadixIndex::refresh_queue(uint32_t index) {
  Block& b = blocks_[index];
  const int8_t want =
      evictable_from(b, b.location.tier) ? static_cast<int8_t>(tier_index(b.location.tier)) : int8_t{-1};
  const double score = score_of(b);
  if (want == b.queued_on && (want < 0 || score == b.queued_score)) return;
  if (b.queued_on >= 0) queues_[static_cast<size_t>(b.queued_on)].erase({b.queued_score, index});
  b.queued_on = want;
  b.queued_score = score;
  if (want >= 0) queues_[static_cast<size_t>(want)].insert({score, index});
}

uint32_t RadixIndex::new_block_slot() {
  if (!free_blocks_.empty()) {
    const uint32_t i = free_blocks_.back();
    free_blocks_.pop_back();
    return i;
  }
  blocks_.emplace_back();
  tokens_.resize(blocks_.size() * static_cast<size_t>(options_.block_size));
  return static_cast<uint32_t>(blocks_.size() - 1);
}

int32_t RadixIndex::new_node() {
  int32_t id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    nodes_.emplace_back();
    id = static_cast<int32_t>(nodes_.size() - 1);
  }
  nodes_[static_cast<size_t>(id)].live = true;
  return id;
}

void RadixIndex::free_node(int32_t id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  n.live = false;
  n.parent = -1;
  n.fingerprint = {};
  n.blocks.clear();
  n.children.clear();
  free_nodes_.push_back(id);
}

int32_t RadixIndex::get_or_add_root(const BlockKey& fingerprint) {
  if (auto it = roots_.find(fingerprint); it != roots_.end()) return it->second;
  const int32_t id = new_node();
  nodes_[static_cast<size_t>(id)].fingerprint = fingerprint;
  roots_.emplace(fingerprint, id);
  return id;
}

PrefixMatch RadixIndex::match(const BlockKey& fingerprint, std::span<const int32_t> tokens) {
  PrefixMatch m;
  m.fingerprint_ = fingerprint;
  m.block_size_ = options_.block_size;
  const auto root = roots_.find(fingerprint);
  if (root == roots_.end()) return m;

  const auto bs = static_cast<size_t>(options_.block_size);
  const size_t n_full = tokens.size() / bs;
  m.blocks_.reserve(n_full);
  auto same_tokens = [&](uint32_t b, size_t i) {
    return std::memcmp(tokens_of(b).data(), tokens.data() + i * bs, bs * sizeof(int32_t)) == 0;
  };

  int32_t node = root->second;
  int32_t last_block = -1;
  BlockKey last_key = fingerprint;
  size_t i = 0;  // blocks of `tokens` matched so far
  while (i < n_full) {
    // A node boundary: the child whose first block holds tokens block i has key chain_key(last_key, ...).
    const auto it = key_map_.find(chain_key(last_key, tokens.subspan(i * bs, bs)));
    if (it == key_map_.end()) break;
    const Block& first = blocks_[it->second];
    if (first.parent_block != last_block || nodes_[static_cast<size_t>(first.node)].parent != node ||
        !same_tokens(it->second, i)) {
      break;  // a 128-bit key collision: never serve it
    }
    const Node& child = nodes_[static_cast<size_t>(first.node)];
    size_t j = 0;
    while (j < child.blocks.size() && i < n_full && (j == 0 || same_tokens(child.blocks[j], i))) {
      const uint32_t b = child.blocks[j];
      Block& blk = blocks_[b];
      ++blk.n_hits;
      m.blocks_.push_back({handle(b), blk.key, blk.location});
      ++j;
      ++i;
    }
    if (j < child.blocks.size()) break;
    node = first.node;
    last_block = static_cast<int32_t>(child.blocks.back());
    last_key = blocks_[child.blocks.back()].key;
  }
  return m;
}

void RadixIndex::split_after(int32_t node_id, int32_t index_in_run) {
  const int32_t lower_id = new_node();
  Node& n = nodes_[static_cast<size_t>(node_id)];
  Node& lower = nodes_[static_cast<size_t>(lower_id)];
  lower.parent = node_id;
  lower.fingerprint = n.fingerprint;
  lower.blocks.assign(n.blocks.begin() + index_in_run + 1, n.blocks.end());
  n.blocks.resize(static_cast<size_t>(index_in_run) + 1);
  lower.children = std::move(n.children);
  n.children.assign(1, lower_id);
  for (int32_t c : lower.children) nodes_[static_cast<size_t>(c)].parent = lower_id;
  for (size_t k = 0; k < lower.blocks.size(); ++k) {
    blocks_[lower.blocks[k]].node = lower_id;
    blocks_[lower.blocks[k]].index_in_run = static_cast<int32_t>(k);
  }
}

void RadixIndex::merge_with_only_child(int32_t node_id) {
  Node& n = nodes_[static_cast<size_t>(node_id)];
  KVC_ASSERT(n.children.size() == 1 && n.parent >= 0);
  const int32_t child_id = n.children[0];
  Node& child = nodes_[static_cast<size_t>(child_id)];
  for (uint32_t b : child.blocks) {
    blocks_[b].node = node_id;
    blocks_[b].index_in_run = static_cast<int32_t>(n.blocks.size());
    n.blocks.push_back(b);
  }
  n.children = std::move(child.children);
  for (int32_t c : n.children) nodes_[static_cast<size_t>(c)].parent = node_id;
  free_node(child_id);
}

InsertResult RadixIndex::insert(const BlockKey& fingerprint, BlockHandle parent, const NewBlock& block) {
  const auto bs = static_cast<size_t>(options_.block_size);
  KVC_ASSERT(block.tokens.size() == bs);
  int32_t parent_index = -1;
  BlockKey parent_key = fingerprint;
  int32_t n_before = 0;
  if (!parent.is_null()) {
    const Block& p = live_block(parent);
    KVC_ASSERT(nodes_[static_cast<size_t>(p.node)].fingerprint == fingerprint);
    parent_index = static_cast<int32_t>(parent.index);
    parent_key = p.key;
    n_before = p.n_before + 1;
  }
  KVC_ASSERT(block.key == chain_key(parent_key, block.tokens));

  if (const auto it = key_map_.find(block.key); it != key_map_.end()) {
    const Block& e = blocks_[it->second];
    // Same key, different parent or tokens: a 128-bit collision or a caller's wrong key.
    KVC_ASSERT(e.parent_block == parent_index && nodes_[static_cast<size_t>(e.node)].fingerprint == fingerprint &&
               std::equal(block.tokens.begin(), block.tokens.end(), tokens_of(it->second).begin()));
    return {handle(it->second), false};
  }

  const uint32_t b = new_block_slot();
  {
    Block& nb = blocks_[b];
    nb.key = block.key;
    nb.location = block.location;
    nb.parent_block = parent_index;
    nb.n_refs = 0;
    nb.n_hits = 0;
    nb.n_before = n_before;
    nb.last_use = block.tick;
    nb.n_children_on = {};
    nb.queued_on = -1;
    std::copy(block.tokens.begin(), block.tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(b * bs));
  }

  int32_t node_id;
  if (parent_index < 0) {
    const int32_t root = get_or_add_root(fingerprint);
    node_id = new_node();
    nodes_[static_cast<size_t>(node_id)].parent = root;
    nodes_[static_cast<size_t>(root)].children.push_back(node_id);
  } else {
    const int32_t pn = blocks_[static_cast<size_t>(parent_index)].node;
    const int32_t pi = blocks_[static_cast<size_t>(parent_index)].index_in_run;
    if (static_cast<size_t>(pi) + 1 < nodes_[static_cast<size_t>(pn)].blocks.size()) split_after(pn, pi);
    if (nodes_[static_cast<size_t>(pn)].children.empty()) {
      node_id = pn;  // the parent ends a leaf run: extend the run
    } else {
      node_id = new_node();
      nodes_[static_cast<size_t>(node_id)].parent = pn;
      nodes_[static_cast<size_t>(pn)].children.push_back(node_id);
    }
  }
  Node& n = nodes_[static_cast<size_t>(node_id)];
  n.fingerprint = fingerprint;
  blocks_[b].node = node_id;
  blocks_[b].index_in_run = static_cast<int32_t>(n.blocks.size());
  n.blocks.push_back(b);

  key_map_.emplace(block.key, b);
  ++n_on_tier_[static_cast<size_t>(tier_index(block.location.tier))];
  if (parent_index >= 0) {
    ++blocks_[static_cast<size_t>(parent_index)].n_children_on[static_cast<size_t>(tier_index(block.location.tier))];
    refresh_queue(static_cast<uint32_t>(parent_index));
  }
  refresh_queue(b);
  return {handle(b), true};
}

std::optional<BlockHandle> RadixIndex::find(const BlockKey& key) const {
  const auto it = key_map_.find(key);
  if (it == key_map_.end()) return std::nullopt;
  return handle(it->second);
}

void RadixIndex::acquire(BlockHandle h) {
  Block& b = live_block(h);
  if (++b.n_refs == 1) refresh_queue(h.index);
}

void RadixIndex::release(BlockHandle h) {
  Block& b = live_block(h);
  KVC_ASSERT(b.n_refs > 0);
  if (--b.n_refs == 0) refresh_queue(h.index);
}

void RadixIndex::acquire(std::span<const MatchedBlock> blocks) {
  for (const MatchedBlock& m : blocks) acquire(m.handle);
}

void RadixIndex::release(std::span<const MatchedBlock> blocks) {
  for (const MatchedBlock& m : blocks) release(m.handle);
}

void RadixIndex::set_location(BlockHandle h, BlockLocation location) {
  Block& b = live_block(h);
  const auto old_tier = static_cast<size_t>(tier_index(b.location.tier));
  const auto new_tier = static_cast<size_t>(tier_index(location.tier));
  b.location = location;
  if (old_tier != new_tier) {
    --n_on_tier_[old_tier];
    ++n_on_tier_[new_tier];
    if (b.parent_block >= 0) {
      Block& p = blocks_[static_cast<size_t>(b.parent_block)];
      --p.n_children_on[old_tier];
      ++p.n_children_on[new_tier];
      refresh_queue(static_cast<uint32_t>(b.parent_block));
    }
  }
  refresh_queue(h.index);
}

void RadixIndex::touch(BlockHandle h, uint64_t tick) {
  live_block(h).last_use = tick;
  refresh_queue(h.index);
}

std::optional<BlockHandle> RadixIndex::eviction_candidate(Tier t) const {
  const Queue& q = queues_[static_cast<size_t>(tier_index(t))];
  if (q.empty()) return std::nullopt;
  return handle(q.begin()->second);
}

std::vector<BlockHandle> RadixIndex::evictable_blocks(Tier t) const {
  std::vector<BlockHandle> out;
  for (const auto& [score, index] : queues_[static_cast<size_t>(tier_index(t))]) out.push_back(handle(index));
  return out;
}

void RadixIndex::remove(BlockHandle h) {
  Block& b = live_block(h);
  KVC_ASSERT(b.n_refs == 0);
  KVC_ASSERT(n_children(b) == 0);
  const int32_t node_id = b.node;
  Node& n = nodes_[static_cast<size_t>(node_id)];
  KVC_ASSERT(n.blocks.back() == h.index && n.children.empty());
  n.blocks.pop_back();

  if (b.queued_on >= 0) queues_[static_cast<size_t>(b.queued_on)].erase({b.queued_score, h.index});
  key_map_.erase(b.key);
  const auto tier = static_cast<size_t>(tier_index(b.location.tier));
  --n_on_tier_[tier];
  const int32_t parent_block = b.parent_block;
  b = Block{};
  b.generation = h.generation + 1;
  free_blocks_.push_back(h.index);
  if (parent_block >= 0) {
    --blocks_[static_cast<size_t>(parent_block)].n_children_on[tier];
    refresh_queue(static_cast<uint32_t>(parent_block));
  }

  if (!n.blocks.empty()) return;
  const int32_t parent_id = n.parent;
  free_node(node_id);
  Node& pn = nodes_[static_cast<size_t>(parent_id)];
  pn.children.erase(std::find(pn.children.begin(), pn.children.end(), node_id));
  if (pn.parent < 0) {  // a root
    if (pn.children.empty()) {
      roots_.erase(pn.fingerprint);
      free_node(parent_id);
    }
  } else if (pn.children.size() == 1) {
    merge_with_only_child(parent_id);
  }
}

BlockKey RadixIndex::key(BlockHandle h) const { return live_block(h).key; }

BlockLocation RadixIndex::location(BlockHandle h) const { return live_block(h).location; }

std::span<const int32_t> RadixIndex::tokens(BlockHandle h) const {
  live_block(h);
  return tokens_of(h.index);
}

BlockHandle RadixIndex::parent(BlockHandle h) const {
  const Block& b = live_block(h);
  return b.parent_block < 0 ? BlockHandle{} : handle(static_cast<uint32_t>(b.parent_block));
}

BlockHandle RadixIndex::handle_of(uint32_t index) const {
  KVC_ASSERT(index < blocks_.size() && blocks_[index].node >= 0);
  return handle(index);
}

BlockInfo RadixIndex::info(BlockHandle h) const {
  const Block& b = live_block(h);
  BlockInfo i;
  i.key = b.key;
  i.location = b.location;
  i.n_refs = b.n_refs;
  i.n_hits = b.n_hits;
  i.n_children = n_children(b);
  i.position = static_cast<int64_t>(b.n_before) * options_.block_size;
  i.recompute_tokens = i.position + options_.block_size;
  i.last_use = b.last_use;
  i.eviction_score = score_of(b);
  return i;
}

}  // namespace kvc::kv

// KvCache::describe: telemetry's read-only producer of KvView (metrics, blocks, prefix tree) for the memory view.
#include <algorithm>
#include <unordered_map>

#include "core/kv/kv_cache.h"
#include "core/kv/kv_view.h"
#include "core/util/assert.h"

namespace kvc::kv {

namespace {

bool starts_with(std::span<const int32_t> s, std::span<const int32_t> prefix) {
  return s.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), s.begin());
}

}  // namespace

void KvCache::describe(KvView& out) const { describe(out, KvViewOptions{}); }

void KvCache::describe(KvView& out, const KvViewOptions& options) const {
  const int64_t B = block_tokens();
  const int64_t bb = layout().block_bytes;
  const RadixIndex& index = store_->index();
  const ColdStore* cold = store_->cold_store();
  const auto& seqs = seqs_->sequences();
  std::vector<SeqId> seq_ids;
  seq_ids.reserve(seqs.size());
  for (const auto& [id, s] : seqs) seq_ids.push_back(id);
  std::sort(seq_ids.begin(), seq_ids.end());

  std::vector<KvOwner> owners(options.owners.begin(), options.owners.end());
  const bool owners_are_seqs = owners.empty();
  if (owners_are_seqs) {
    for (SeqId id : seq_ids) owners.push_back(KvOwner{id, seqs.at(id).tokens, {}, {}});
  }

  // Full blocks: an owner holds the chain of indexed keys its tokens spell.
  std::unordered_map<uint32_t, std::vector<int64_t>> held;  // slab index -> owner ids
  for (const KvOwner& o : owners) {
    if (!o.keys.empty()) {
      KVC_ASSERT(o.keys.size() <= o.tokens.size() / static_cast<size_t>(B));
      for (const BlockKey& key : o.keys) {
        const std::optional<BlockHandle> h = index.find(key);
        if (!h) break;
        held[h->index].push_back(o.id);
      }
      continue;
    }
    BlockKey key = fingerprint();
    for (int64_t p = 0; p + B <= static_cast<int64_t>(o.tokens.size()); p += B) {
      key = chain_key(key, o.tokens.subspan(static_cast<size_t>(p), static_cast<size_t>(B)));
      const std::optional<BlockHandle> h = index.find(key);
      if (!h) break;
      held[h->index].push_back(o.id);
    }
  }

  out.tick = store_->now_tick();
  out.block_bytes = bb;
  out.blocks.clear();
  out.nodes.clear();
  out.n_blocks_left_out = 0;
  out.n_nodes_left_out = 0;
  out.n_shared_blocks = 0;
  out.n_blocks_on_tier = {};
  out.n_blocks_on_cold = 0;
  std::array<std::vector<int64_t>, k_n_data_tiers> share_bytes;
  for (auto& v : share_bytes) v.assign(owners.size(), 0);
  std::unordered_map<int64_t, size_t> owner_slot;
  for (size_t i = 0; i < owners.size(); ++i) owner_slot.emplace(owners[i].id, i);

  // Adds a block's bytes to each of its holders' shares (bytes / n_holders each).
  auto count = [&](const KvBlockView& b, std::span<const int64_t> holder_ids) {
    if (b.is_shared()) ++out.n_shared_blocks;
    if (!is_data_tier(b.tier)) return;
    const auto t = static_cast<size_t>(tier_index(b.tier));
    ++out.n_blocks_on_tier[t];
    for (int64_t id : holder_ids) share_bytes[t][owner_slot.at(id)] += bb / b.n_owners;
  };
  std::vector<int64_t> ids;

  std::unordered_map<int32_t, int32_t> node_at;  // radix node id -> index in out.nodes
  index.visit([&](const NodeView& n) {
    int32_t node_index = -1;
    if (out.nodes.size() < options.max_nodes) {
      KvNodeView v;
      const auto parent = node_at.find(n.parent);
      v.parent = parent == node_at.end() ? -1 : parent->second;
      v.level = n.level;
      v.is_root = n.is_root;
      v.position = n.position;
      v.n_blocks = static_cast<int32_t>(n.blocks.size());
      v.n_children = n.n_children;
      v.n_hits = n.n_hits;
      if (!n.blocks.empty()) v.tier = index.location(index.handle_of(n.blocks.front())).tier;
      node_index = static_cast<int32_t>(out.nodes.size());
      node_at.emplace(n.id, node_index);
      out.nodes.push_back(v);
    } else {
      ++out.n_nodes_left_out;
    }
    for (uint32_t bi : n.blocks) {
      const BlockInfo info = index.info(index.handle_of(bi));
      KvBlockView b;
      b.key = info.key;
      b.tier = info.location.tier;
      b.slot = info.location.tier == Tier::t2 ? -1 : info.location.slot;
      b.n_tokens = static_cast<int32_t>(B);
      b.n_refs = info.n_refs;
      b.n_hits = info.n_hits;
      b.last_use = info.last_use;
      b.position = info.position;
      b.node = node_index;
      b.on_cold = b.tier == Tier::t2 || (cold && cold->contains(b.key));
      out.n_blocks_on_cold += b.on_cold;
      ids.clear();
      if (const auto h = held.find(bi); h != held.end()) ids = h->second;
      for (int64_t o : ids) {
        b.owner_id = b.n_owners == 0 ? o : std::min(b.owner_id, o);
        ++b.n_owners;
      }
      count(b, ids);
      if (out.blocks.size() < options.max_blocks) {
        if (node_index >= 0 && out.nodes[static_cast<size_t>(node_index)].first_block < 0) {
          out.nodes[static_cast<size_t>(node_index)].first_block = static_cast<int32_t>(out.blocks.size());
        }
        out.blocks.push_back(b);
      } else {
        ++out.n_blocks_left_out;
      }
    }
  });

  // Private blocks: partial tails and blocks reserved ahead, on T0 only.
  std::vector<int64_t> seq_lengths;
  for (SeqId id : seq_ids) {
    const SequenceTable::Sequence& s = seqs.at(id);
    seq_lengths.push_back(static_cast<int64_t>(s.tokens.size()));
    for (size_t i = 0; i < s.table.blocks.size(); ++i) {
      const SequenceTable::SeqBlock& sb = s.table.blocks[i];
      if (!sb.shared.is_null() || sb.t0_slot < 0) continue;
      KvBlockView b;
      b.tier = Tier::t0;
      b.slot = sb.t0_slot;
      b.position = static_cast<int64_t>(i) * B;
      b.n_tokens = static_cast<int32_t>(std::clamp<int64_t>(static_cast<int64_t>(s.tokens.size()) - b.position, 0, B));
      b.last_use = s.pinned ? store_->now_tick() : s.parked_tick;
      b.is_private = true;
      ids.clear();
      if (owners_are_seqs) {
        ids.push_back(id);
      } else {
        for (const KvOwner& o : owners) {
          if (starts_with(o.tokens, s.tokens)) ids.push_back(o.id);
        }
      }
      for (int64_t o : ids) {
        b.owner_id = b.n_owners == 0 ? o : std::min(b.owner_id, o);
        ++b.n_owners;
      }
      count(b, ids);
      if (out.blocks.size() < options.max_blocks) {
        out.blocks.push_back(b);
      } else {
        ++out.n_blocks_left_out;
      }
    }
  }

  KvMetrics& m = out.metrics;
  m.t_us = now_us();
  m.block_size = B;
  for (Tier t : {Tier::t0, Tier::t1, Tier::t2}) {
    const TierUsageBytes u = tier_usage(t);
    m.tiers[static_cast<size_t>(tier_index(t))] =
        TierUsage{u.used_bytes, u.capacity_bytes, u.used_blocks, u.capacity_blocks};
  }
  m.shares.clear();
  for (size_t i = 0; i < owners.size(); ++i) {
    SequenceShare sh;
    sh.seq_id = owners[i].id;
    for (size_t t = 0; t < k_n_data_tiers; ++t) sh.bytes[t] = share_bytes[t][i];
    m.shares.push_back(sh);
  }
  m.counters = telemetry_->counters();
  m.fragmentation = internal_fragmentation(seq_lengths, B, bb);

  out.n_layers = layout().n_layer;
  out.window = window();
  for (Tier t : {Tier::t0, Tier::t1}) {
    const TierUsageBytes u = store_->tier_usage(t);
    out.group_tiers[static_cast<size_t>(tier_index(t))] =
        TierUsage{u.used_bytes, u.capacity_bytes, u.used_blocks, u.capacity_blocks};
  }
  TierUsage& t2 = out.group_tiers[static_cast<size_t>(tier_index(Tier::t2))];
  t2 = m.tiers[static_cast<size_t>(tier_index(Tier::t2))];
  t2.used_blocks = out.n_blocks_on_cold;
  t2.used_bytes = out.n_blocks_on_cold * bb;

  // The other KV groups, each by its own describe(), its owners keyed by its own chain.
  out.group = 0;
  out.more_groups.resize(more_.size());
  std::vector<KvOwner> group_owners;
  for (size_t g = 0; g < more_.size(); ++g) {
    group_owners.clear();
    for (const KvOwner& o : options.owners) {
      KvOwner owner{o.id, o.tokens, {}, {}};
      if (g < o.more_keys.size()) owner.keys = o.more_keys[g];
      group_owners.push_back(owner);
    }
    KvViewOptions group_options = options;
    group_options.owners = group_owners;
    more_[g]->describe(out.more_groups[g], group_options);
    out.more_groups[g].group = static_cast<int32_t>(g + 1);
  }
}

}  // namespace kvc::kv

// KvCache::describe: the block list, tiers, shares and prefix tree agree with tier_usage() and the index.
#include <catch2/catch.hpp>

#include <map>

#include "core/backend/backend.h"
#include "core/kv/cold_store.h"
#include "core/kv/kv_cache.h"
#include "core/kv/kv_view.h"
#include "core/kv/stream_keys.h"

using namespace kvc;
using kv::Tier;

namespace {

constexpr int k_b = 4;  // tokens per block

struct Cache {
  std::unique_ptr<backend::Backend> be = backend::make_cpu_backend(1);
  std::unique_ptr<kv::KvCache> cache;
  explicit Cache(int n_t0_blocks = 32, int n_t1_blocks = 32, kv::ColdStore* cold = nullptr) {
    auto layout = kernels::make_kv_block_layout(1, 1, 32, k_b, kernels::KvType::f16, kernels::KvType::f16);
    REQUIRE(layout);
    kv::KvCacheConfig c;
    c.layout = *layout;
    c.t0_bytes = n_t0_blocks * layout->block_bytes;
    c.t1_bytes = n_t1_blocks * layout->block_bytes;
    c.fingerprint = kv::BlockKey{1, 2};
    auto r = kv::KvCache::create(c, *be, cold);
    REQUIRE(r.ok());
    cache = std::move(*r);
  }
  // Runs one prompt through prepare / reserve / commit (KV bytes are not computed: the view
  // only looks at the bookkeeping).
  kv::SeqId run(const std::vector<int32_t>& prompt) {
    const kv::SeqId id = cache->create_sequence();
    auto p = cache->prepare(id, prompt);
    REQUIRE(p.ok());
    const auto rest = std::span<const int32_t>(prompt).subspan(static_cast<size_t>(p->n_cached));
    REQUIRE(cache->reserve(id, static_cast<int64_t>(rest.size())));
    cache->commit(id, rest);
    return id;
  }
};

std::vector<int32_t> seq(int n, int salt, int shared = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(i < shared ? 100 + i : 1000 * salt + i);
  return t;
}

int64_t used_blocks(const kv::KvView& v, Tier t) {
  int64_t n = 0;
  for (const auto& b : v.blocks) n += b.tier == t;
  return n;
}

}  // namespace

TEST_CASE("kv view: blocks, tiers and shares agree with the cache after a shared prefix", "[core][kv]") {
  Cache c;
  // a: 3 full blocks + 2 tokens; b shares a's first 2 blocks (8 tokens), then 1 own full block + 1 token.
  const auto a_tokens = seq(14, 1, 8);
  const auto b_tokens = seq(13, 2, 8);
  const kv::SeqId a = c.run(a_tokens);
  const kv::SeqId b = c.run(b_tokens);
  REQUIRE(c.cache->check_invariants().ok());

  kv::KvView v;
  c.cache->describe(v);
  REQUIRE(v.n_blocks_left_out == 0);
  REQUIRE(v.n_nodes_left_out == 0);
  CHECK(v.block_bytes == c.cache->layout().block_bytes);

  // Every used T0 slot is one listed block, and slots are distinct.
  const kv::TierUsageBytes t0 = c.cache->tier_usage(Tier::t0);
  CHECK(used_blocks(v, Tier::t0) == t0.used_blocks);
  CHECK(v.n_blocks_on_tier[0] == t0.used_blocks);
  CHECK(v.metrics.tiers[0].used_bytes == t0.used_bytes);
  CHECK(v.metrics.tiers[0].capacity_blocks == t0.capacity_blocks);
  std::map<int32_t, int> slots;
  for (const auto& blk : v.blocks) {
    if (blk.tier == Tier::t0) ++slots[blk.slot];
  }
  CHECK(slots.size() == static_cast<size_t>(t0.used_blocks));

  // The index's blocks are listed once each, with their keys; the private tails have none.
  const kv::IndexStats st = c.cache->index().stats();
  int64_t n_indexed = 0, n_private = 0;
  for (const auto& blk : v.blocks) {
    if (blk.is_private) {
      ++n_private;
      CHECK(blk.key.is_null());
      CHECK(blk.n_owners == 1);
    } else {
      ++n_indexed;
      CHECK(c.cache->index().find(blk.key).has_value());
    }
  }
  CHECK(n_indexed == st.n_blocks);
  CHECK(n_indexed == 4);  // a's 3 full blocks and b's own third block
  CHECK(n_private == 2);  // a's 2-token tail, b's 1-token tail

  // Exactly the two common blocks are shared, and they belong to a (lower id) first.
  CHECK(v.n_shared_blocks == 2);
  for (const auto& blk : v.blocks) {
    if (blk.is_shared()) {
      CHECK(blk.n_owners == 2);
      CHECK(blk.owner_id == a);
      CHECK(blk.position < 8);
    }
  }

  // Shares: one per sequence, each block's bytes split among its owners, summing to at most used.
  REQUIRE(v.metrics.shares.size() == 2);
  CHECK(v.metrics.shares[0].seq_id == a);
  CHECK(v.metrics.shares[1].seq_id == b);
  const int64_t bb = v.block_bytes;
  // Each: 2 shared blocks at half their bytes + 1 own full block + 1 tail.
  CHECK(v.metrics.shares[0].bytes[0] == bb + bb + bb);
  CHECK(v.metrics.shares[1].bytes[0] == bb + bb + bb);
  CHECK(v.metrics.shares[0].bytes[0] + v.metrics.shares[1].bytes[0] <= v.metrics.tiers[0].used_bytes);
  CHECK(v.metrics.check_invariants());

  // Fragmentation: a wastes 2 slots, b wastes 3.
  CHECK(v.metrics.fragmentation.n_wasted_tokens == c.cache->internal_fragmentation_tokens());
  CHECK(v.metrics.fragmentation.n_wasted_tokens == 5);

  // Counters come from the cache's own events (no event log is set): one publication per indexed block.
  CHECK(v.metrics.counters.n_published == st.n_blocks);

  // Tree: a root, the shared node (2 blocks) branching into a's and b's nodes.
  REQUIRE(v.nodes.size() == static_cast<size_t>(st.n_roots + st.n_nodes));
  int n_branch = 0;
  for (size_t i = 0; i < v.nodes.size(); ++i) {
    const auto& n = v.nodes[i];
    if (n.n_children >= 2) ++n_branch;
    if (n.parent >= 0) CHECK(static_cast<size_t>(n.parent) < i);  // pre-order
    if (!n.is_root) {
      REQUIRE(n.first_block >= 0);
      CHECK(v.blocks[static_cast<size_t>(n.first_block)].position == n.position);
    }
  }
  CHECK(n_branch == st.n_branch_points);
  CHECK(n_branch == 1);
}

TEST_CASE("kv view: demoted blocks show on T1, owners given by the caller colour the blocks", "[core][kv]") {
  Cache c;
  const auto a_tokens = seq(12, 1, 8);
  const auto b_tokens = seq(12, 2, 8);
  const kv::SeqId a = c.run(a_tokens);
  c.cache->park(a);
  const kv::SeqId b = c.run(b_tokens);
  c.cache->park(b);
  c.cache->demote_all_unpinned(Tier::t1);
  REQUIRE(c.cache->check_invariants().ok());

  const kv::KvOwner owners[] = {{7, a_tokens, {}, {}}, {9, b_tokens, {}, {}}};
  kv::KvViewOptions o;
  o.owners = owners;
  kv::KvView v;
  c.cache->describe(v, o);
  const kv::TierUsageBytes t1 = c.cache->tier_usage(Tier::t1);
  CHECK(t1.used_blocks == 4);  // 2 shared + 1 each: every full block left T0
  CHECK(used_blocks(v, Tier::t1) == t1.used_blocks);
  CHECK(used_blocks(v, Tier::t0) == c.cache->tier_usage(Tier::t0).used_blocks);
  CHECK(v.metrics.counters.n_demotions[0][1] == 4);
  REQUIRE(v.metrics.shares.size() == 2);
  CHECK(v.metrics.shares[0].seq_id == 7);
  CHECK(v.metrics.shares[1].seq_id == 9);
  const int64_t bb = v.block_bytes;
  CHECK(v.metrics.shares[0].bytes[1] == bb / 2 * 2 + bb);
  CHECK(v.metrics.shares[1].bytes[1] == bb / 2 * 2 + bb);
  CHECK(v.n_shared_blocks == 2);
  for (const auto& blk : v.blocks) {
    if (!blk.is_private) {
      CHECK(blk.tier == Tier::t1);
      CHECK((blk.owner_id == 7 || blk.owner_id == 9));
    }
  }
  CHECK(v.metrics.check_invariants());
}

TEST_CASE("kv view: owners' precomputed block keys colour the blocks as their tokens do", "[core][kv]") {
  Cache c;
  const auto a_tokens = seq(12, 1, 8);
  const auto b_tokens = seq(12, 2, 8);
  c.cache->park(c.run(a_tokens));
  c.cache->park(c.run(b_tokens));
  const auto a_keys = kv::stream_block_keys(c.cache->fingerprint(), k_b, a_tokens);
  const auto b_keys = kv::stream_block_keys(c.cache->fingerprint(), k_b, b_tokens);
  REQUIRE(a_keys.size() == 3);
  const kv::KvOwner by_tokens[] = {{7, a_tokens, {}, {}}, {9, b_tokens, {}, {}}};
  const kv::KvOwner by_keys[] = {{7, a_tokens, a_keys, {}}, {9, b_tokens, b_keys, {}}};
  kv::KvView v1, v2;
  kv::KvViewOptions o;
  o.owners = by_tokens;
  c.cache->describe(v1, o);
  o.owners = by_keys;
  c.cache->describe(v2, o);
  REQUIRE(v1.blocks.size() == v2.blocks.size());
  for (size_t i = 0; i < v1.blocks.size(); ++i) {
    CHECK(v1.blocks[i].owner_id == v2.blocks[i].owner_id);
    CHECK(v1.blocks[i].n_owners == v2.blocks[i].n_owners);
  }
  CHECK(v2.n_shared_blocks == 2);
  CHECK(v1.metrics.shares[0].bytes == v2.metrics.shares[0].bytes);
  // Keys that stop short (a stale list) attribute only the blocks they name.
  const kv::KvOwner short_keys[] = {{7, a_tokens, std::span(a_keys).first(1), {}}};
  o.owners = short_keys;
  c.cache->describe(v2, o);
  int n_owned = 0;
  for (const auto& blk : v2.blocks) n_owned += !blk.is_private && blk.owner_id == 7;
  CHECK(n_owned == 1);
}

TEST_CASE("kv view: blocks and nodes past the cap are counted, not listed", "[core][kv]") {
  Cache c;
  for (int s = 1; s <= 4; ++s) c.run(seq(8, s));
  kv::KvViewOptions o;
  o.max_blocks = 3;
  o.max_nodes = 2;
  kv::KvView v;
  c.cache->describe(v, o);
  CHECK(v.blocks.size() == 3);
  CHECK(v.nodes.size() == 2);
  CHECK(static_cast<int64_t>(v.blocks.size()) + v.n_blocks_left_out == 8);
  const kv::IndexStats st = c.cache->index().stats();
  CHECK(static_cast<int64_t>(v.nodes.size()) + v.n_nodes_left_out == st.n_roots + st.n_nodes);
  CHECK(v.n_blocks_on_tier[0] == 8);
}

TEST_CASE("kv view: published blocks written behind to the cold tier are marked on_cold", "[core][kv]") {
  kv::MemoryColdStore cold(int64_t{1} << 20);
  Cache c(32, 32, &cold);
  c.run(seq(10, 1));  // 2 full blocks (written behind) + a 2-token private tail
  kv::KvView v;
  c.cache->describe(v);
  int n_cold = 0;
  for (const auto& blk : v.blocks) {
    CHECK(blk.on_cold == (!blk.is_private && cold.contains(blk.key)));
    n_cold += blk.on_cold;
  }
  CHECK(n_cold == 2);
  CHECK(v.n_blocks_on_cold == 2);
  CHECK(v.metrics.tiers[2].used_blocks == cold.stats().n_blocks);
}

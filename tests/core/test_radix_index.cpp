// RadixIndex: splits, branches, sharing, eviction order and pinning, plus randomized operation
// sequences checked against a map from token prefixes to block state.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/kv/radix_index.h"

using namespace kvc::kv;

namespace {

BlockKey fingerprint(const std::string& name) {
  return hash_bytes({reinterpret_cast<const uint8_t*>(name.data()), name.size()});
}

const BlockKey k_fp_a = fingerprint("model a");
const BlockKey k_fp_b = fingerprint("model b");

// Token ids for a sequence of blocks of size bs, block value v holding v*100 + 0..bs-1.
std::vector<int32_t> blocks_of(std::initializer_list<int32_t> values, int32_t bs = 4) {
  std::vector<int32_t> t;
  for (int32_t v : values) {
    for (int32_t k = 0; k < bs; ++k) t.push_back(v * 100 + k);
  }
  return t;
}

void require_ok(const RadixIndex& idx) {
  const auto st = idx.check_invariants();
  INFO((st.ok() ? std::string() : st.error().what()));
  REQUIRE(st.ok());
}

struct Published {
  std::vector<BlockHandle> handles;  // every full block of the tokens, matched or new
  int n_inserted = 0;
};

// What the cache manager does for a prompt: match, then publish each further full block.
Published publish(RadixIndex& idx, const BlockKey& fp, std::span<const int32_t> tokens, Tier tier = Tier::t0,
                  uint64_t tick = 0) {
  const auto bs = static_cast<size_t>(idx.block_size());
  Published p;
  const PrefixMatch m = idx.match(fp, tokens);
  for (const MatchedBlock& b : m.blocks()) p.handles.push_back(b.handle);
  BlockKey key = m.last_key();
  BlockHandle parent = m.last();
  for (size_t i = m.n_blocks(); i < tokens.size() / bs; ++i) {
    const auto blk = tokens.subspan(i * bs, bs);
    key = chain_key(key, blk);
    const InsertResult r = idx.insert(fp, parent, {key, blk, {tier, static_cast<int32_t>(i)}, tick});
    p.n_inserted += r.inserted ? 1 : 0;
    p.handles.push_back(r.handle);
    parent = r.handle;
    require_ok(idx);
  }
  return p;
}

std::set<uint32_t> as_set(const std::vector<BlockHandle>& hs) {
  std::set<uint32_t> s;
  for (BlockHandle h : hs) s.insert(h.index);
  return s;
}

}  // namespace

TEST_CASE("radix: inserting after the middle of a run splits it and keeps handles", "[core]") {
  RadixIndex idx({4, 1.0});
  const auto a = blocks_of({1, 2, 3, 4});
  const Published pa = publish(idx, k_fp_a, a);
  REQUIRE(pa.n_inserted == 4);
  REQUIRE(idx.stats().n_nodes == 1);

  const auto b = blocks_of({1, 2, 5});
  const Published pb = publish(idx, k_fp_a, b);
  REQUIRE(pb.n_inserted == 1);
  const IndexStats s = idx.stats();
  REQUIRE(s.n_nodes == 3);  // [1 2] -> { [3 4], [5] }
  REQUIRE(s.n_branch_points == 1);
  REQUIRE(s.n_blocks == 5);
  REQUIRE(pb.handles[0] == pa.handles[0]);
  REQUIRE(pb.handles[1] == pa.handles[1]);

  const PrefixMatch ma = idx.match(k_fp_a, a);
  REQUIRE(ma.n_blocks() == 4);
  for (size_t i = 0; i < 4; ++i) {
    REQUIRE(ma.blocks()[i].handle == pa.handles[i]);
    REQUIRE(idx.is_live(pa.handles[i]));
  }
  const auto third = idx.tokens(pa.handles[2]);
  REQUIRE(std::vector<int32_t>(third.begin(), third.end()) == std::vector<int32_t>(a.begin() + 8, a.begin() + 12));
  REQUIRE(idx.match(k_fp_a, b).n_blocks() == 3);
  require_ok(idx);
}

TEST_CASE("radix: a branch at a run boundary adds a child without splitting", "[core]") {
  RadixIndex idx({4, 1.0});
  publish(idx, k_fp_a, blocks_of({1, 2, 3}));
  publish(idx, k_fp_a, blocks_of({1, 2, 4}));
  REQUIRE(idx.stats().n_nodes == 3);
  const Published p = publish(idx, k_fp_a, blocks_of({1, 2, 5}));
  REQUIRE(p.n_inserted == 1);
  const IndexStats s = idx.stats();
  REQUIRE(s.n_nodes == 4);
  REQUIRE(s.n_branch_points == 1);
  int n_children_of_prefix = -1;
  idx.visit([&](const NodeView& v) {
    if (!v.is_root && v.blocks.size() == 2) n_children_of_prefix = v.n_children;
  });
  REQUIRE(n_children_of_prefix == 3);
  // Extending a leaf run grows it in place.
  publish(idx, k_fp_a, blocks_of({1, 2, 5, 6, 7}));
  REQUIRE(idx.stats().n_nodes == 4);
}

TEST_CASE("radix: a shared system prompt is stored once", "[core]") {
  RadixIndex idx({4, 1.0});
  const Published c1 = publish(idx, k_fp_a, blocks_of({7, 8, 9, 10, 11}));
  const Published c2 = publish(idx, k_fp_a, blocks_of({7, 8, 9, 20}));
  REQUIRE(c2.n_inserted == 1);
  for (size_t i = 0; i < 3; ++i) REQUIRE(c1.handles[i] == c2.handles[i]);
  REQUIRE(idx.n_blocks() == 6);
  // The shared blocks saw both conversations' matches; the private ones only their own.
  REQUIRE(idx.info(c1.handles[0]).n_hits == 1);
  REQUIRE(idx.info(c1.handles[4]).n_hits == 0);
}

TEST_CASE("radix: regenerate reuses the prefix, an edit branches early", "[core]") {
  RadixIndex idx({4, 1.0});
  publish(idx, k_fp_a, blocks_of({1, 2, 3, 4, 5}));
  const Published regen = publish(idx, k_fp_a, blocks_of({1, 2, 3, 4, 6}));
  REQUIRE(regen.n_inserted == 1);
  const Published edit = publish(idx, k_fp_a, blocks_of({1, 9, 3, 4, 5}));
  REQUIRE(edit.n_inserted == 4);  // same later tokens, different prefix: different keys
  REQUIRE(idx.key(edit.handles[2]) != idx.key(regen.handles[2]));
  REQUIRE(idx.match(k_fp_a, blocks_of({1, 2, 3, 4, 5})).n_blocks() == 5);
  REQUIRE(idx.match(k_fp_a, blocks_of({1, 9, 3})).n_blocks() == 3);
  REQUIRE(idx.stats().n_branch_points == 2);
  require_ok(idx);
}

TEST_CASE("radix: partial prefixes match whole blocks only", "[core]") {
  RadixIndex idx({4, 1.0});
  const auto t = blocks_of({1, 2, 3, 4});
  const Published p = publish(idx, k_fp_a, t);
  std::span<const int32_t> all(t);
  REQUIRE(idx.match(k_fp_a, all.first(3)).n_blocks() == 0);   // less than a block
  REQUIRE(idx.match(k_fp_a, all.first(10)).n_blocks() == 2);  // a partial last block
  REQUIRE(idx.match(k_fp_a, all.first(10)).n_tokens() == 8);
  auto diverged = t;
  diverged[9] = -5;  // inside block 2
  const PrefixMatch m = idx.match(k_fp_a, diverged);
  REQUIRE(m.n_blocks() == 2);
  REQUIRE(m.last() == p.handles[1]);
  REQUIRE(m.last_key() == idx.key(p.handles[1]));
  REQUIRE(idx.match(k_fp_a, {}).empty());
  REQUIRE(idx.match(k_fp_a, {}).last_key() == k_fp_a);
}

TEST_CASE("radix: keys from different fingerprints never match", "[core]") {
  RadixIndex idx({4, 1.0});
  const auto t = blocks_of({1, 2, 3});
  const Published a = publish(idx, k_fp_a, t);
  REQUIRE(idx.match(k_fp_b, t).empty());
  const Published b = publish(idx, k_fp_b, t);
  REQUIRE(b.n_inserted == 3);
  for (size_t i = 0; i < 3; ++i) REQUIRE(idx.key(a.handles[i]) != idx.key(b.handles[i]));
  REQUIRE(idx.find(idx.key(a.handles[2])) == a.handles[2]);
  REQUIRE(idx.stats().n_roots == 2);
  REQUIRE(idx.match(k_fp_a, t).blocks()[2].handle == a.handles[2]);
  REQUIRE_FALSE(idx.find(chain_key(k_fp_b, std::span<const int32_t>(t).first(3))).has_value());
}

TEST_CASE("radix: inserting a known key returns the existing block", "[core]") {
  RadixIndex idx({4, 1.0});
  const auto t = blocks_of({1, 2});
  const Published p = publish(idx, k_fp_a, t);
  const BlockKey k1 = chain_key(k_fp_a, std::span<const int32_t>(t).first(4));
  const InsertResult r = idx.insert(k_fp_a, {}, {k1, std::span<const int32_t>(t).first(4), {Tier::t1, 9}, 5});
  REQUIRE_FALSE(r.inserted);
  REQUIRE(r.handle == p.handles[0]);
  REQUIRE(idx.location(r.handle).tier == Tier::t0);  // the existing copy is untouched
  REQUIRE(idx.n_blocks() == 2);
}

TEST_CASE("radix: references pin blocks and only leaf tails are evictable", "[core]") {
  RadixIndex idx({4, 1.0});
  const Published a = publish(idx, k_fp_a, blocks_of({1, 2, 3, 4}));
  const Published b = publish(idx, k_fp_a, blocks_of({1, 2, 5}));
  const Published c = publish(idx, k_fp_a, blocks_of({6}));
  REQUIRE(as_set(idx.evictable_blocks(Tier::t0)) == as_set({a.handles[3], b.handles[2], c.handles[0]}));
  REQUIRE(idx.evictable_blocks(Tier::t1).empty());

  idx.acquire(a.handles[3]);
  idx.acquire(c.handles[0]);
  REQUIRE(as_set(idx.evictable_blocks(Tier::t0)) == as_set({b.handles[2]}));
  idx.remove(b.handles[2]);
  REQUIRE_FALSE(idx.is_live(b.handles[2]));
  require_ok(idx);
  // [1 2] merged back with [3 4]; everything on the path to a pinned block stays.
  REQUIRE(idx.stats().n_nodes == 2);
  REQUIRE_FALSE(idx.eviction_candidate(Tier::t0).has_value());
  idx.release(a.handles[3]);
  REQUIRE(idx.eviction_candidate(Tier::t0) == a.handles[3]);
  idx.release(c.handles[0]);
  require_ok(idx);
}

TEST_CASE("radix: a demoted leaf lets its parent leave the faster tier", "[core]") {
  RadixIndex idx({4, 1.0});
  const Published a = publish(idx, k_fp_a, blocks_of({1, 2, 3}));
  REQUIRE(idx.eviction_candidate(Tier::t0) == a.handles[2]);
  idx.set_location(a.handles[2], {Tier::t1, 0});
  REQUIRE(idx.eviction_candidate(Tier::t0) == a.handles[1]);
  REQUIRE(idx.eviction_candidate(Tier::t1) == a.handles[2]);
  idx.set_location(a.handles[1], {Tier::t2, 0});
  // On t2, leaving means leaving the index: a block with children (on any tier) may not.
  REQUIRE_FALSE(idx.eviction_candidate(Tier::t2).has_value());
  REQUIRE(idx.stats().n_blocks_on_tier == std::array<int64_t, k_n_tiers>{1, 1, 1, 0});
  require_ok(idx);
}

TEST_CASE("radix: eviction order combines recency with recompute cost", "[core]") {
  const double w = 3.0;
  RadixIndex idx({4, w});
  const Published shallow = publish(idx, k_fp_a, blocks_of({1}), Tier::t0, 10);
  const Published deep = publish(idx, k_fp_a, blocks_of({2, 3, 4, 5, 6, 7, 8, 9}), Tier::t0, 10);
  const BlockInfo d = idx.info(deep.handles[7]);
  REQUIRE(d.recompute_tokens == 8 * 4);
  REQUIRE(d.eviction_score == Approx(10.0 + w * 3.0));              // log2(32 / 4) = 3
  REQUIRE(idx.eviction_candidate(Tier::t0) == shallow.handles[0]);  // same recency, cheaper
  idx.touch(shallow.handles[0], 12);                                // 12 < 10 + 9: still the cheaper loss
  REQUIRE(idx.eviction_candidate(Tier::t0) == shallow.handles[0]);
  idx.touch(shallow.handles[0], 20);
  REQUIRE(idx.eviction_candidate(Tier::t0) == deep.handles[7]);

  RadixIndex lru({4, 0.0});
  const Published old_deep = publish(lru, k_fp_a, blocks_of({2, 3, 4, 5}), Tier::t0, 1);
  publish(lru, k_fp_a, blocks_of({1}), Tier::t0, 2);
  REQUIRE(lru.eviction_candidate(Tier::t0) == old_deep.handles[3]);
}

TEST_CASE("radix: removing leaves up to the root empties the tree", "[core]") {
  RadixIndex idx({4, 1.0});
  std::vector<BlockHandle> all;
  for (auto t : {blocks_of({1, 2, 3}), blocks_of({1, 4}), blocks_of({5, 6}), blocks_of({1, 2, 7, 8})}) {
    for (BlockHandle h : publish(idx, k_fp_a, t).handles) all.push_back(h);
  }
  for (BlockHandle h : publish(idx, k_fp_b, blocks_of({1, 2})).handles) all.push_back(h);
  int n_removed = 0;
  while (auto v = idx.eviction_candidate(Tier::t0)) {
    REQUIRE(idx.info(*v).n_children == 0);
    idx.remove(*v);
    ++n_removed;
    require_ok(idx);
  }
  REQUIRE(n_removed == 10);
  REQUIRE(idx.empty());
  const IndexStats s = idx.stats();
  REQUIRE(s.n_roots == 0);
  REQUIRE(s.n_nodes == 0);
  for (BlockHandle h : all) REQUIRE_FALSE(idx.is_live(h));
  int n_visited = 0;
  idx.visit([&](const NodeView&) { ++n_visited; });
  REQUIRE(n_visited == 0);
}

TEST_CASE("radix: matching a 4000-token prompt takes microseconds", "[core]") {
  RadixIndex idx({16, 1.0});
  std::vector<int32_t> prompt(4000);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7919) % 32000);
  publish(idx, k_fp_a, prompt);
  for (int b = 0; b < 8; ++b) {  // branch points along the way
    auto other = prompt;
    other[static_cast<size_t>(b) * 400 + 5] = -1;
    publish(idx, k_fp_a, std::span<const int32_t>(other).first(static_cast<size_t>(b) * 400 + 64));
  }
  const int n_reps = 2000;
  size_t n_matched = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < n_reps; ++r) n_matched += idx.match(k_fp_a, prompt).n_blocks();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n_reps;
  std::printf("radix: match of 4000 tokens (250 blocks, %lld nodes): %.2f us\n",
              static_cast<long long>(idx.stats().n_nodes), us);
  REQUIRE(n_matched == static_cast<size_t>(n_reps) * 250);
  REQUIRE(us < 500.0);  // loose: sanitizer builds on a loaded CI machine

  // Publishing the same prompt block by block into a fresh index (keys hashed by the caller).
  std::vector<BlockKey> keys;
  BlockKey k = k_fp_a;
  for (size_t i = 0; i < 250; ++i)
    keys.push_back(k = chain_key(k, std::span<const int32_t>(prompt).subspan(i * 16, 16)));
  const int n_insert_reps = 20;
  const auto t1 = std::chrono::steady_clock::now();
  for (int r = 0; r < n_insert_reps; ++r) {
    RadixIndex fresh({16, 1.0});
    BlockHandle parent;
    for (size_t i = 0; i < 250; ++i) {
      parent =
          fresh
              .insert(k_fp_a, parent, {keys[i], std::span<const int32_t>(prompt).subspan(i * 16, 16), {Tier::t0, 0}, 0})
              .handle;
    }
    REQUIRE(fresh.n_blocks() == 250);
  }
  const double insert_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count() / n_insert_reps;
  std::printf("radix: inserting 250 blocks into a fresh index: %.1f us\n", insert_us);
}

namespace {

// The reference model: every indexed block, by (tree, all tokens up to and including it).
struct ModelBlock {
  BlockHandle handle;
  int32_t n_refs = 0;
  Tier tier = Tier::t0;
  uint64_t last_use = 0;
};
using ModelKey = std::pair<int, std::vector<int32_t>>;

class RandomDriver {
 public:
  RandomDriver(uint32_t seed, double w) : rng_(seed), w_(w), idx_({k_bs, w}) {}

  void run(int n_ops) {
    for (int op = 0; op < n_ops; ++op) {
      const int kind = pick(0, 99);
      if (kind < 25)
        publish_random();
      else if (kind < 40)
        match_random();
      else if (kind < 52)
        acquire_random();
      else if (kind < 64)
        release_random();
      else if (kind < 72)
        move_random();
      else if (kind < 80)
        touch_random();
      else if (kind < 95)
        evict_random();
      else
        remove_random_leaf();
      require_ok(idx_);
      if (op % 50 == 0) check_shape();
      max_blocks_ = std::max(max_blocks_, model_.size());
    }
    std::printf("radix random seed: up to %zu blocks\n", max_blocks_);
    for (auto& [k, b] : model_) {
      while (b.n_refs > 0) {
        idx_.release(b.handle);
        --b.n_refs;
      }
    }
    // Evicting from every tier in turn drains the whole index.
    for (int guard = 0; !model_.empty(); ++guard) {
      REQUIRE(guard < 100000);
      evict(static_cast<Tier>(guard % k_n_tiers));
      require_ok(idx_);
    }
    REQUIRE(idx_.empty());
    REQUIRE(idx_.stats().n_roots == 0);
  }

 private:
  static constexpr int32_t k_bs = 2;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  Tier random_tier() { return static_cast<Tier>(pick(0, k_n_tiers - 1)); }
  const BlockKey& fp(int tree) const { return tree == 0 ? k_fp_a : k_fp_b; }

  // Tokens over {0, 1}: 4 distinct blocks, so prefixes collide all the time.
  std::vector<int32_t> random_tokens(int n_blocks, bool ragged) {
    std::vector<int32_t> t(static_cast<size_t>(n_blocks * k_bs + (ragged ? pick(0, k_bs - 1) : 0)));
    for (auto& x : t) x = pick(0, 1);
    return t;
  }

  size_t model_match(int tree, const std::vector<int32_t>& t) const {
    size_t n = 0;
    while ((n + 1) * k_bs <= t.size() &&
           model_.count({tree, std::vector<int32_t>(t.begin(), t.begin() + static_cast<ptrdiff_t>((n + 1) * k_bs))})) {
      ++n;
    }
    return n;
  }

  // Looks up the 4 possible next blocks.
  std::vector<const ModelKey*> children(const ModelKey& k) const {
    std::vector<const ModelKey*> out;
    ModelKey c = k;
    c.second.resize(k.second.size() + k_bs);
    for (int32_t x = 0; x < 2; ++x) {
      for (int32_t y = 0; y < 2; ++y) {
        c.second[k.second.size()] = x;
        c.second[k.second.size() + 1] = y;
        if (const auto it = model_.find(c); it != model_.end()) out.push_back(&it->first);
      }
    }
    return out;
  }

  // Written apart from the index: may a block on t with these children leave t?
  bool may_leave(const ModelKey& k, Tier t) const {
    for (const ModelKey* c : children(k)) {
      const Tier ct = model_.at(*c).tier;
      if (t == Tier::t2 || t == Tier::none) return false;
      if (ct == Tier::t0 || (ct == Tier::t1 && t == Tier::t1)) return false;
    }
    return true;
  }

  double score(const ModelKey& k) const {
    const double depth = static_cast<double>(k.second.size() / k_bs);
    return static_cast<double>(model_.at(k).last_use) + w_ * std::log2(depth);
  }

  const ModelKey* random_block() {
    if (model_.empty()) return nullptr;
    auto it = model_.begin();
    std::advance(it, pick(0, static_cast<int>(model_.size()) - 1));
    return &it->first;
  }

  void match_random() {
    const int tree = pick(0, 1);
    const auto t = random_tokens(pick(0, 6), true);
    const PrefixMatch m = idx_.match(fp(tree), t);
    const size_t n = model_match(tree, t);
    REQUIRE(m.n_blocks() == n);
    for (size_t i = 0; i < n; ++i) {
      const ModelBlock& b =
          model_.at({tree, std::vector<int32_t>(t.begin(), t.begin() + static_cast<ptrdiff_t>((i + 1) * k_bs))});
      REQUIRE(m.blocks()[i].handle == b.handle);
      REQUIRE(m.blocks()[i].location.tier == b.tier);
      REQUIRE(m.blocks()[i].key == idx_.key(b.handle));
    }
  }

  void publish_random() {
    const int tree = pick(0, 1);
    const auto t = random_tokens(pick(1, 5), false);
    const PrefixMatch m = idx_.match(fp(tree), t);
    REQUIRE(m.n_blocks() == model_match(tree, t));
    // Sometimes republish from the root, exercising the existing-key path.
    const size_t start = pick(0, 3) == 0 ? 0 : m.n_blocks();
    BlockKey key = start == 0 ? fp(tree) : m.last_key();
    BlockHandle parent = start == 0 ? BlockHandle{} : m.last();
    for (size_t i = start; i < t.size() / k_bs; ++i) {
      const std::span<const int32_t> blk(t.data() + i * k_bs, k_bs);
      key = chain_key(key, blk);
      const Tier tier = random_tier();
      const InsertResult r = idx_.insert(fp(tree), parent, {key, blk, {tier, 0}, clock_});
      ModelKey mk{tree, std::vector<int32_t>(t.begin(), t.begin() + static_cast<ptrdiff_t>((i + 1) * k_bs))};
      const auto found = model_.find(mk);
      REQUIRE(r.inserted == (found == model_.end()));
      if (found == model_.end())
        model_.emplace(mk, ModelBlock{r.handle, 0, tier, clock_});
      else
        REQUIRE(found->second.handle == r.handle);
      parent = r.handle;
      require_ok(idx_);
    }
  }

  void acquire_random() {
    if (const ModelKey* k = random_block()) {
      idx_.acquire(model_.at(*k).handle);
      ++model_.at(*k).n_refs;
    }
  }

  void release_random() {
    const ModelKey* k = random_block();
    if (k && model_.at(*k).n_refs > 0) {
      idx_.release(model_.at(*k).handle);
      --model_.at(*k).n_refs;
    }
  }

  void move_random() {
    if (const ModelKey* k = random_block()) {
      const Tier t = random_tier();
      idx_.set_location(model_.at(*k).handle, {t, 1});
      model_.at(*k).tier = t;
    }
  }

  void touch_random() {
    if (const ModelKey* k = random_block()) {
      idx_.touch(model_.at(*k).handle, ++clock_);
      model_.at(*k).last_use = clock_;
    }
  }

  void evict_random() { evict(random_tier()); }

  void evict(Tier t) {
    std::set<uint32_t> expect;
    double best = 0;
    for (const auto& [k, b] : model_) {
      if (b.tier == t && b.n_refs == 0 && may_leave(k, t)) {
        if (expect.empty() || score(k) < best) best = score(k);
        expect.insert(b.handle.index);
      }
    }
    REQUIRE(as_set(idx_.evictable_blocks(t)) == expect);
    const auto v = idx_.eviction_candidate(t);
    REQUIRE(v.has_value() == !expect.empty());
    if (!v) return;
    const ModelKey* victim = nullptr;
    for (const auto& [k, b] : model_) {
      if (b.handle == *v) victim = &k;
    }
    REQUIRE(victim != nullptr);
    REQUIRE(score(*victim) == Approx(best));
    if (t == Tier::t0 || t == Tier::t1) {
      const Tier slower = static_cast<Tier>(tier_index(t) + 1);
      idx_.set_location(*v, {slower, 0});
      model_.at(*victim).tier = slower;
    } else {
      idx_.remove(*v);
      REQUIRE_FALSE(idx_.is_live(*v));
      model_.erase(*victim);
    }
  }

  void remove_random_leaf() {
    const ModelKey* k = random_block();
    if (!k || model_.at(*k).n_refs > 0 || !children(*k).empty()) return;
    const BlockHandle h = model_.at(*k).handle;
    idx_.remove(h);
    model_.erase(*k);
    REQUIRE_FALSE(idx_.is_live(h));
  }

  // Node and branch counts of a fully compressed tree, derived from the model alone.
  void check_shape() {
    std::map<ModelKey, int> n_children;  // parent prefix (the empty prefix is a root) -> children
    for (const auto& [k, b] : model_) {
      ++n_children[{k.first, std::vector<int32_t>(k.second.begin(), k.second.end() - k_bs)}];
    }
    int64_t n_nodes = 0;
    int64_t n_branch = 0;
    std::set<int> trees;
    for (const auto& [k, b] : model_) {
      const ModelKey parent{k.first, std::vector<int32_t>(k.second.begin(), k.second.end() - k_bs)};
      if (parent.second.empty() || n_children[parent] >= 2) ++n_nodes;
      trees.insert(k.first);
    }
    for (const auto& [p, n] : n_children) n_branch += n >= 2 ? 1 : 0;
    const IndexStats s = idx_.stats();
    REQUIRE(s.n_blocks == static_cast<int64_t>(model_.size()));
    REQUIRE(s.n_nodes == n_nodes);
    REQUIRE(s.n_branch_points == n_branch);
    REQUIRE(s.n_roots == static_cast<int64_t>(trees.size()));
  }

  std::mt19937 rng_;
  double w_;
  RadixIndex idx_;
  std::map<ModelKey, ModelBlock> model_;
  uint64_t clock_ = 0;
  size_t max_blocks_ = 0;
};

}  // namespace

TEST_CASE("radix: random operation sequences agree with a prefix map", "[core]") {
  for (uint32_t seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    RandomDriver(seed, seed == 3 ? 0.0 : 1.5).run(2500);
  }
}

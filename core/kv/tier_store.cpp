// TierStore: the T0/T1 pools, lookup with the tier each block was found on, promotion, demotion and write-behind.
#include "core/kv/tier_store.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "core/util/assert.h"

namespace kvc::kv {

namespace {

// Promotion reads T2 runs in batches of at most this many bytes (at least one block): enough
// blocks per query to amortise it, a buffer the cache keeps without noticing.
constexpr size_t k_cold_batch_bytes = size_t{8} << 20;

}  // namespace

size_t n_blocks_behind_window(int64_t window, int64_t block_tokens, int64_t n_tokens) {
  const int64_t W = window, B = block_tokens;
  if (W <= 0 || n_tokens < B) return 0;
  // A query at position q attends to [q + 1 - W, q]; the earliest is at q = n_tokens.
  const int64_t first_needed = (n_tokens + 1 - W) / B;
  return static_cast<size_t>(std::clamp<int64_t>(first_needed, 0, n_tokens / B - 1));
}

BlockPool::BlockPool(uint8_t* base, int64_t slot_bytes, int32_t n_slots)
    : base_(base), slot_bytes_(slot_bytes), n_slots_(n_slots), is_free_(static_cast<size_t>(n_slots), true) {
  free_.reserve(static_cast<size_t>(n_slots));
  for (int32_t i = n_slots - 1; i >= 0; --i) free_.push_back(i);  // low slots first
}

int32_t BlockPool::alloc() {
  if (free_.empty()) return -1;
  const int32_t s = free_.back();
  free_.pop_back();
  is_free_[static_cast<size_t>(s)] = false;
  return s;
}

void BlockPool::free(int32_t slot) {
  KVC_ASSERT(slot >= 0 && slot < n_slots_ && !is_free_[static_cast<size_t>(slot)]);
  is_free_[static_cast<size_t>(slot)] = true;
  free_.push_back(slot);
}

Result<std::unique_ptr<TierStore>> TierStore::create(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold,
                                                     KvTelemetry& telemetry) {
  if (!config.layout.check_invariants()) {
    return make_error(ErrorCode::invalid_argument, "the KV block layout is inconsistent");
  }
  const int64_t bb = config.layout.block_bytes;
  if (config.t0_bytes < bb) {
    return make_error(ErrorCode::invalid_argument, "the T0 KV budget (" + std::to_string(config.t0_bytes) +
                                                       " bytes) is smaller than one block (" + std::to_string(bb) +
                                                       " bytes); raise it");
  }
  std::unique_ptr<TierStore> c(new TierStore(config, be, cold, telemetry));
  const auto n0 = static_cast<int32_t>(std::min<int64_t>(config.t0_bytes / bb, INT32_MAX));
  const auto n1 = static_cast<int32_t>(std::min<int64_t>(config.t1_bytes / bb, INT32_MAX));
  c->t0_memory_ = static_cast<uint8_t*>(be.alloc(static_cast<size_t>(n0) * static_cast<size_t>(bb)));
  if (!c->t0_memory_) {
    return make_error(ErrorCode::out_of_memory, "cannot allocate " + std::to_string((int64_t{n0} * bb) >> 20) +
                                                    " MiB for the KV cache; lower the T0 budget");
  }
  c->t1_memory_.reset(new (std::nothrow) uint8_t[static_cast<size_t>(n1) * static_cast<size_t>(bb)]);
  if (!c->t1_memory_ && n1 > 0) {
    return make_error(ErrorCode::out_of_memory, "cannot reserve " + std::to_string((int64_t{n1} * bb) >> 20) +
                                                    " MiB of host RAM for the KV cache's T1 tier; lower its budget");
  }
  c->t0_ = BlockPool(c->t0_memory_, bb, n0);
  c->t1_ = BlockPool(c->t1_memory_.get(), bb, n1);
  c->staging_.resize(static_cast<size_t>(bb));
  return c;
}

TierStore::TierStore(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold, KvTelemetry& telemetry)
    : config_(config),
      be_(be),
      cold_(cold),
      telemetry_(telemetry),
      index_(RadixIndexOptions{config.layout.block_tokens, 4.0, config.window > 0}) {}

TierStore::~TierStore() {
  if (t0_memory_) be_.free(t0_memory_);
}

int32_t TierStore::alloc_t0() {
  int32_t slot = t0_.alloc();
  if (slot < 0 && make_room_t0(1)) slot = t0_.alloc();
  if (slot < 0) {
    telemetry_.emit(KvEventType::alloc_failed, Tier::none, Tier::t0, {}, -1, 0, config_.layout.block_bytes);
  } else {
    telemetry_.emit(KvEventType::block_allocated, Tier::none, Tier::t0, {}, slot);
  }
  return slot;
}

bool TierStore::make_room_t0(int32_t n_slots) {
  while (t0_.n_free() < n_slots) {
    if (!demote_one(Tier::t0) && !(reclaimer_ && reclaimer_->reclaim_one_t0())) return false;
  }
  return true;
}

bool TierStore::make_room_t1(int32_t n_slots) {
  while (t1_.n_free() < n_slots) {
    if (!demote_one(Tier::t1)) return false;
  }
  return true;
}

// Moves the best eviction candidate of `from` one tier down (T0 -> T1 -> T2), or drops it
// when there is no lower tier to take it.
bool TierStore::demote_one(Tier from) {
  auto victim = index_.eviction_candidate(from);
  if (!victim) return false;
  const BlockHandle h = *victim;
  const BlockLocation loc = index_.location(h);
  const auto bb = block_bytes();
  const uint8_t* src = from == Tier::t0 ? t0_.data(loc.slot) : t1_.data(loc.slot);
  if (from == Tier::t0 && t1_.n_slots() > 0 && (t1_.n_free() > 0 || make_room_t1(1))) {
    const int32_t dst = t1_.alloc();
    be_.copy_to_host(src, t1_.data(dst), bb);
    index_.set_location(h, {Tier::t1, dst});
    t0_.free(loc.slot);
    telemetry_.emit(KvEventType::block_demoted, Tier::t0, Tier::t1, index_.key(h), dst, block_tokens(),
                    static_cast<int64_t>(bb));
    return true;
  }
  // To T2 (already written behind at publish, unless the store refused it then) or gone. A
  // checkpoint-only group's block goes to T2 only if a checkpoint put it there already.
  const bool already_on_t2 = cold_ && cold_->contains(index_.key(h));
  const bool on_t2 =
      cold_ && (already_on_t2 || (!config_.checkpoints_only && [&] {
                  if (from == Tier::t0) {
                    be_.copy_to_host(src, staging_.data(), bb);
                    src = staging_.data();
                  }
                  const BlockHandle p = index_.parent(h);
                  const bool queued =
                      cold_->put(index_.key(h), p.is_null() ? fingerprint() : index_.key(p), fingerprint(), {src, bb});
                  if (queued) telemetry_.note_demotion_write(static_cast<int64_t>(bb));
                  return queued;
                }()));
  if (from == Tier::t0)
    t0_.free(loc.slot);
  else
    t1_.free(loc.slot);
  if (on_t2) {
    index_.set_location(h, {Tier::t2, -1});
    telemetry_.emit(KvEventType::block_demoted, from, Tier::t2, index_.key(h), -1, block_tokens(),
                    already_on_t2 ? 0 : static_cast<int64_t>(bb));
  } else {
    telemetry_.emit(KvEventType::block_evicted, from, Tier::none, index_.key(h), loc.slot, block_tokens(),
                    static_cast<int64_t>(bb));
    if (index_.info(h).n_children == 0) {
      index_.remove(h);
    } else {
      index_.set_location(h, {Tier::none, -1});
    }
  }
  return true;
}

Result<int32_t> TierStore::promote(BlockHandle h, int64_t& bad_tokens, ColdRunReader* run) {
  const BlockLocation loc = index_.location(h);
  if (loc.tier == Tier::t0) return loc.slot;
  const auto bb = block_bytes();
  const int32_t slot = alloc_t0();
  if (slot < 0) return make_error(ErrorCode::out_of_memory, "T0 is full");
  if (loc.tier == Tier::t1) {
    be_.copy_from_host(t1_.data(loc.slot), t0_.data(slot), bb);
    t1_.free(loc.slot);
    telemetry_.emit(KvEventType::block_promoted, Tier::t1, Tier::t0, index_.key(h), slot, block_tokens(),
                    static_cast<int64_t>(bb));
  } else {
    std::span<const uint8_t> payload = staging_;
    ColdRead r = ColdRead::missing;
    if (run)
      r = run->read(index_.key(h), payload);
    else if (cold_)
      r = cold_->read(index_.key(h), staging_);
    if (r != ColdRead::ok) {
      t0_.free(slot);
      if (r == ColdRead::corrupt) {
        telemetry_.emit(KvEventType::block_corrupt, Tier::t2, Tier::none, index_.key(h), -1, block_tokens(),
                        static_cast<int64_t>(bb));
      }
      index_.set_location(h, {Tier::none, -1});
      bad_tokens += block_tokens();
      return make_error(ErrorCode::io, "cold block missing or corrupt");
    }
    be_.copy_from_host(payload.data(), t0_.data(slot), bb);
    telemetry_.emit(KvEventType::block_promoted, Tier::t2, Tier::t0, index_.key(h), slot, block_tokens(),
                    static_cast<int64_t>(bb));
  }
  index_.set_location(h, {Tier::t0, slot});
  return slot;
}

std::unique_ptr<ColdRunReader> TierStore::cold_run(std::span<const FoundBlock> blocks) {
  if (!cold_) return nullptr;
  std::vector<BlockKey> keys;
  for (const FoundBlock& b : blocks) {
    if (index_.location(b.handle).tier == Tier::t2) keys.push_back(b.key);
  }
  if (keys.empty()) return nullptr;
  return std::make_unique<ColdRunReader>(*cold_, std::move(keys), block_bytes(), k_cold_batch_bytes, cold_batch_);
}

std::vector<FoundBlock> TierStore::lookup(std::span<const int32_t> tokens) {
  const int64_t B = block_tokens();
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  // The index, on any tier; blocks without data end the match, unless they are behind the
  // sliding window of the match (their keys still chain it; their KV is never read).
  PrefixMatch match = index_.match(fingerprint(), tokens);
  std::span<const MatchedBlock> matched = match.blocks();
  if (config_.checkpoints_only) return lookup_windowed(tokens, matched);
  const auto dataless = [](const MatchedBlock& b) { return b.location.tier == Tier::none; };
  size_t n = matched.size();
  if (config_.window > 0) {
    for (;;) {
      const auto first = matched.first(n);
      const auto last = std::find_if(first.rbegin(), first.rend(), dataless);
      if (last == first.rend()) break;
      const auto d = static_cast<size_t>(first.rend() - last - 1);
      if (d < n_behind_window(static_cast<int64_t>(n - 1) * B)) break;
      n = d;
    }
  } else {
    n = static_cast<size_t>(std::find_if(matched.begin(), matched.end(), dataless) - matched.begin());
  }
  std::vector<FoundBlock> blocks;
  blocks.reserve(n);
  for (size_t i = 0; i < n; ++i)
    blocks.push_back(FoundBlock{matched[i].handle, matched[i].key, matched[i].location.tier});
  // After a restart the index is empty but the cold store may hold the chain: continue it.
  if (cold_) {
    BlockKey parent_key = blocks.empty() ? fingerprint() : blocks.back().key;
    BlockHandle parent = blocks.empty() ? BlockHandle{} : blocks.back().handle;
    for (auto b = static_cast<int64_t>(blocks.size()); (b + 1) * B <= n_tokens; ++b) {
      const auto toks = tokens.subspan(static_cast<size_t>(b * B), static_cast<size_t>(B));
      const BlockKey key = chain_key(parent_key, toks);
      if (!cold_->contains(key)) break;
      if (index_.find(key)) break;  // indexed without data: it failed before
      const InsertResult r = index_.insert(fingerprint(), parent, NewBlock{key, toks, {Tier::t2, -1}, tick()});
      blocks.push_back(FoundBlock{r.handle, key, Tier::t2});
      parent_key = key;
      parent = r.handle;
    }
  }
  return blocks;
}

// A checkpoint-only (windowed) group: the chain goes on through blocks without data anywhere,
// and the match is the longest prefix whose window has data (on any tier). Blocks past the
// index are entered (on T2, or without data) only up to that end.
std::vector<FoundBlock> TierStore::lookup_windowed(std::span<const int32_t> tokens,
                                                   std::span<const MatchedBlock> matched) {
  const int64_t B = block_tokens();
  std::vector<FoundBlock> all;
  for (const MatchedBlock& m : matched) all.push_back(FoundBlock{m.handle, m.key, m.location.tier});
  const size_t n_indexed = all.size();
  if (cold_) {
    BlockKey parent_key = all.empty() ? fingerprint() : all.back().key;
    for (auto b = static_cast<int64_t>(all.size()); (b + 1) * B <= static_cast<int64_t>(tokens.size()); ++b) {
      const BlockKey key = chain_key(parent_key, tokens.subspan(static_cast<size_t>(b * B), static_cast<size_t>(B)));
      if (index_.find(key)) break;  // indexed off this path: it failed before
      all.push_back(FoundBlock{{}, key, cold_->contains(key) ? Tier::t2 : Tier::none});
      parent_key = key;
    }
  }
  // The longest n whose blocks [behind the window of n - 1 blocks, n) all have data.
  size_t n = all.size();
  for (;;) {
    const size_t lo = n == 0 ? 0 : n_behind_window(static_cast<int64_t>(n - 1) * B);
    size_t d = n;
    for (size_t i = n; i > lo; --i) {
      if (all[i - 1].found_on == Tier::none) {
        d = i - 1;
        break;
      }
    }
    if (d == n) break;
    n = d;
  }
  all.resize(n);
  BlockHandle parent = n_indexed == 0 || n == 0 ? BlockHandle{} : all[std::min(n, n_indexed) - 1].handle;
  for (size_t i = n_indexed; i < n; ++i) {
    const auto toks = tokens.subspan(i * static_cast<size_t>(B), static_cast<size_t>(B));
    const InsertResult r =
        index_.insert(fingerprint(), parent, NewBlock{all[i].key, toks, {all[i].found_on, -1}, tick()});
    all[i].handle = r.handle;
    parent = r.handle;
  }
  return all;
}

int64_t TierStore::write_checkpoint(std::span<const int32_t> tokens) {
  if (!cold_ || !config_.checkpoints_only) return 0;
  const int64_t B = block_tokens();
  const auto n_full = static_cast<size_t>(static_cast<int64_t>(tokens.size()) / B);
  if (n_full == 0) return 0;
  const size_t lo = n_behind_window(static_cast<int64_t>(n_full - 1) * B);
  // The chain's keys, from the fingerprint; the blocks are found by key (no match, no hits).
  BlockKey key = fingerprint();
  int64_t n_queued = 0;
  const auto bb = block_bytes();
  for (size_t i = 0; i < n_full; ++i) {
    key = chain_key(key, tokens.subspan(i * static_cast<size_t>(B), static_cast<size_t>(B)));
    if (i < lo) continue;
    const std::optional<BlockHandle> h = index_.find(key);
    if (!h) continue;
    const BlockLocation loc = index_.location(*h);
    if ((loc.tier != Tier::t0 && loc.tier != Tier::t1) || cold_->contains(key)) continue;
    if (loc.tier == Tier::t0) {
      be_.copy_to_host(t0_.data(loc.slot), staging_.data(), bb);
    } else {
      std::memcpy(staging_.data(), t1_.data(loc.slot), bb);
    }
    const BlockHandle p = index_.parent(*h);
    if (cold_->put(key, p.is_null() ? fingerprint() : index_.key(p), fingerprint(), {staging_.data(), bb})) {
      telemetry_.emit(KvEventType::cold_write_queued, loc.tier, Tier::t2, key, -1, B, static_cast<int64_t>(bb));
      ++n_queued;
    }
  }
  return n_queued;
}

PrefixInfo TierStore::prefetch(std::span<const int32_t> tokens, std::vector<MovedUp>* moved) {
  PrefixInfo info;
  info.n_prompt = static_cast<int64_t>(tokens.size());
  std::vector<FoundBlock> blocks = lookup(tokens);
  for (const FoundBlock& b : blocks) index_.acquire(b.handle);  // pinned while promoting
  const auto run = cold_run(blocks);
  // Blocks behind the window of the stream are not read by its next turn: left where they are.
  const size_t first = blocks.empty() ? 0 : n_behind_window(static_cast<int64_t>(blocks.size() - 1) * block_tokens());
  for (size_t i = first; i < blocks.size(); ++i) {
    const FoundBlock& b = blocks[i];
    if (!promote(b.handle, info.n_recomputed_bad, run.get()).ok()) break;
    index_.touch(b.handle, tick());
    if (moved && b.found_on != Tier::t0) moved->push_back({b.handle, b.found_on, Tier::t0});
    info.n_cached += block_tokens();
    info.n_from_tier[tier_index(b.found_on)] += block_tokens();
  }
  for (const FoundBlock& b : blocks) index_.release(b.handle);
  return info;
}

TierStore::Published TierStore::publish(BlockHandle parent, std::span<const int32_t> tokens, int32_t t0_slot,
                                        int64_t seq) {
  const BlockKey parent_key = parent.is_null() ? fingerprint() : index_.key(parent);
  const BlockKey key = chain_key(parent_key, tokens);
  const InsertResult r = index_.insert(fingerprint(), parent, NewBlock{key, tokens, {Tier::t0, t0_slot}, tick()});
  if (r.inserted) {
    telemetry_.emit(KvEventType::block_published, Tier::none, Tier::t0, key, t0_slot, block_tokens(), 0, seq);
    write_behind(r.handle, t0_.data(t0_slot));
    return {r.handle, t0_slot};
  }
  // Someone published the same block first: use theirs, or give them our T0 copy.
  const BlockLocation loc = index_.location(r.handle);
  if (loc.tier == Tier::t0) {
    t0_.free(t0_slot);
    return {r.handle, loc.slot};
  }
  if (loc.tier == Tier::t1) t1_.free(loc.slot);
  index_.set_location(r.handle, {Tier::t0, t0_slot});
  // A block whose disk copy was missing or corrupt was just recomputed: store it again.
  if (loc.tier == Tier::none) write_behind(r.handle, t0_.data(t0_slot));
  return {r.handle, t0_slot};
}

void TierStore::write_behind(BlockHandle h, const uint8_t* t0_data) {
  if (!cold_ || config_.checkpoints_only) return;  // such a group writes checkpoints only
  const auto bb = block_bytes();
  be_.copy_to_host(t0_data, staging_.data(), bb);
  const BlockHandle p = index_.parent(h);
  if (cold_->put(index_.key(h), p.is_null() ? fingerprint() : index_.key(p), fingerprint(), {staging_.data(), bb})) {
    telemetry_.emit(KvEventType::cold_write_queued, Tier::t0, Tier::t2, index_.key(h), -1, block_tokens(),
                    static_cast<int64_t>(bb));
  }
}

TierUsageBytes TierStore::tier_usage(Tier t) const {
  TierUsageBytes u;
  const int64_t bb = config_.layout.block_bytes;
  if (t == Tier::t0 || t == Tier::t1) {
    const BlockPool& p = pool(t);
    u.capacity_blocks = p.n_slots();
    u.used_blocks = p.n_slots() - p.n_free();
    u.capacity_bytes = int64_t{u.capacity_blocks} * bb;
    u.used_bytes = int64_t{u.used_blocks} * bb;
  } else if (t == Tier::t2 && cold_) {
    const ColdStoreStats st = cold_->stats();
    u.used_bytes = st.used_bytes;
    u.capacity_bytes = st.capacity_bytes;
    u.used_blocks = static_cast<int32_t>(st.n_blocks);
    u.capacity_blocks = static_cast<int32_t>(st.capacity_bytes / std::max<int64_t>(bb, 1));
  }
  return u;
}

std::array<TierUsageBytes, k_n_data_tiers> TierStore::tier_usages() const {
  return {tier_usage(Tier::t0), tier_usage(Tier::t1), tier_usage(Tier::t2)};
}

void TierStore::demote_all_unpinned(Tier to) {
  if (to == Tier::t1) {
    while (t1_.n_free() > 0 && demote_one(Tier::t0)) {}
    return;
  }
  while (demote_one(Tier::t0)) {}
  while (demote_one(Tier::t1)) {}
}

}  // namespace kvc::kv

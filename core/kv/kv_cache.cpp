// The tiered, prefix-shared KV block cache.
#include "core/kv/kv_cache.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <set>

#include "core/util/assert.h"

namespace kvc::kv {

namespace {

// Promotion reads T2 runs in batches of at most this many bytes (at least one block): enough
// blocks per query to amortise it, a buffer the cache keeps without noticing.
constexpr size_t k_cold_batch_bytes = size_t{8} << 20;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

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

void KvCache::emit(KvEventType type, Tier from, Tier to, const BlockKey& key, int32_t slot, int64_t n_tokens,
                   int64_t n_bytes, int64_t seq) {
  KvEvent e;
  e.t_us = events_ ? now_us() : 0;  // counters need no clock
  e.type = type;
  e.from = from;
  e.to = to;
  e.slot = slot;
  e.key = key;
  e.seq_id = seq;
  e.request_id = request_id_;
  e.n_tokens = n_tokens;
  e.n_bytes = n_bytes;
  event_counters_.apply(e);
  if (events_) events_->append(e);
}

void KvCache::emit_tier_usage() {
  for (Tier t : {Tier::t0, Tier::t1, Tier::t2}) {
    const TierUsageBytes u = tier_usage(t);
    emit(KvEventType::tier_usage, Tier::none, t, {}, -1, u.used_blocks, u.used_bytes);
  }
  if (!cold_) return;
  const int64_t bb = config_.layout.block_bytes;
  const int64_t written = cold_->stats().bytes_written;
  int64_t fresh = written - cold_written_seen_;
  const int64_t by_demotion = std::min(fresh, cold_demoted_unseen_);
  cold_demoted_unseen_ -= by_demotion;
  fresh -= by_demotion;
  for (; fresh >= bb; fresh -= bb) {
    emit(KvEventType::cold_write_done, Tier::t0, Tier::t2, {}, -1, block_tokens(), bb);
  }
  cold_written_seen_ = written - fresh;  // a part-block remainder is reported with the next
}

Result<std::unique_ptr<KvCache>> KvCache::create(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold) {
  if (!config.layout.check_invariants()) {
    return make_error(ErrorCode::invalid_argument, "the KV block layout is inconsistent");
  }
  const int64_t bb = config.layout.block_bytes;
  if (config.t0_bytes < bb) {
    return make_error(ErrorCode::invalid_argument, "the T0 KV budget (" + std::to_string(config.t0_bytes) +
                                                       " bytes) is smaller than one block (" + std::to_string(bb) +
                                                       " bytes); raise it");
  }
  std::unique_ptr<KvCache> c(new KvCache(config, be, cold));
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

KvCache::KvCache(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold)
    : config_(config),
      be_(be),
      cold_(cold),
      index_(RadixIndexOptions{config.layout.block_tokens, 4.0, config.window > 0}),
      cold_written_seen_(cold ? cold->stats().bytes_written : 0) {}

KvCache::~KvCache() {
  if (t0_memory_) be_.free(t0_memory_);
}

KvCache::Sequence& KvCache::seq(SeqId id) {
  auto it = seqs_.find(id);
  KVC_ASSERT(it != seqs_.end());
  return it->second;
}

const KvCache::Sequence& KvCache::seq(SeqId id) const {
  auto it = seqs_.find(id);
  KVC_ASSERT(it != seqs_.end());
  return it->second;
}

SeqId KvCache::create_sequence() {
  const SeqId id = next_seq_++;
  Sequence s;
  s.pinned = true;  // active: the shared blocks it publishes hold its references
  seqs_.emplace(id, std::move(s));
  return id;
}

void KvCache::destroy_sequence(SeqId id) {
  Sequence& s = seq(id);
  release_blocks_from(s, 0);
  seqs_.erase(id);
}

void KvCache::rebuild_table(Sequence& s) {
  s.table.resize(s.blocks.size());
  for (size_t i = 0; i < s.blocks.size(); ++i) {
    s.table[i] = s.blocks[i].t0_slot >= 0 ? t0_.data(s.blocks[i].t0_slot) : nullptr;
  }
}

// Drops blocks [first_block, end) from the sequence: shared ones are unpinned (they stay
// cached), private ones freed.
void KvCache::release_blocks_from(Sequence& s, size_t first_block) {
  for (size_t i = first_block; i < s.blocks.size(); ++i) {
    SeqBlock& b = s.blocks[i];
    if (b.shared.is_null()) {
      if (b.t0_slot >= 0) t0_.free(b.t0_slot);  // a parked sequence's forgotten blocks have none
    } else if (s.pinned) {
      index_.release(b.shared);
    }
  }
  s.blocks.resize(std::min(first_block, s.blocks.size()));
  s.n_retired = std::min(s.n_retired, s.blocks.size());
  rebuild_table(s);
}

size_t KvCache::n_behind_window(int64_t n_tokens) const {
  const int64_t W = config_.window, B = block_tokens();
  if (W <= 0 || n_tokens < B) return 0;
  // A query at position q attends to [q + 1 - W, q]; the earliest is at q = n_tokens.
  const int64_t first_needed = (n_tokens + 1 - W) / B;
  return static_cast<size_t>(std::clamp<int64_t>(first_needed, 0, n_tokens / B - 1));
}

void KvCache::retire_behind_window(Sequence& s) {
  const size_t n = std::min(n_behind_window(static_cast<int64_t>(s.tokens.size())), s.blocks.size());
  for (size_t i = s.n_retired; i < n; ++i) {
    SeqBlock& b = s.blocks[i];
    if (!b.shared.is_null()) {
      if (s.pinned) index_.release(b.shared);
    } else if (b.t0_slot >= 0) {
      t0_.free(b.t0_slot);
    }
    b = SeqBlock{};
  }
  s.n_retired = std::max(s.n_retired, n);
}

// Keeps the first n tokens. A kept shared block that will be written into (n inside it) is
// copied first.
void KvCache::truncate(Sequence& s, int64_t n) {
  const int64_t B = block_tokens();
  KVC_ASSERT(n <= static_cast<int64_t>(s.tokens.size()));
  const auto keep_blocks = static_cast<size_t>((n + B - 1) / B);
  KVC_ASSERT(n == 0 || keep_blocks > s.n_retired);  // the window never retires a block still written
  release_blocks_from(s, keep_blocks);
  s.tokens.resize(static_cast<size_t>(n));
  if (n % B != 0) {
    SeqBlock& last = s.blocks.back();
    if (!last.shared.is_null()) {
      // Copy on write: the tail block becomes private before any position in it changes.
      const int32_t slot = alloc_t0();
      if (slot < 0) {
        // No room for the copy: give the partial block up and recompute its positions.
        release_blocks_from(s, keep_blocks - 1);
        s.tokens.resize(static_cast<size_t>((keep_blocks - 1) * static_cast<size_t>(B)));
        return;
      }
      be_.copy(t0_.data(last.t0_slot), t0_.data(slot), static_cast<size_t>(config_.layout.block_bytes));
      if (s.pinned) index_.release(last.shared);
      emit(KvEventType::block_copied_on_write, Tier::t0, Tier::t0, index_.key(last.shared), slot, B);
      last = SeqBlock{slot, {}};
      ++counters_.n_cow;
      rebuild_table(s);
    }
  }
}

int32_t KvCache::alloc_t0() {
  int32_t slot = t0_.alloc();
  if (slot < 0 && make_room_t0(1)) slot = t0_.alloc();
  if (slot < 0) {
    ++counters_.n_alloc_failures;
    emit(KvEventType::alloc_failed, Tier::none, Tier::t0, {}, -1, 0, config_.layout.block_bytes);
  } else {
    emit(KvEventType::block_allocated, Tier::none, Tier::t0, {}, slot);
  }
  return slot;
}

bool KvCache::make_room_t0(int32_t n_slots) {
  while (t0_.n_free() < n_slots) {
    if (!demote_one(Tier::t0) && !reclaim_parked_tail()) return false;
  }
  return true;
}

// Frees the private tail block of the longest-parked sequence: its positions will be
// recomputed when the conversation comes back.
bool KvCache::reclaim_parked_tail() {
  Sequence* victim = nullptr;
  for (auto& [id, s] : seqs_) {
    if (s.pinned || s.blocks.empty() || s.blocks.back().t0_slot < 0) continue;
    if (!victim || s.parked_tick < victim->parked_tick) victim = &s;
  }
  if (!victim) return false;
  t0_.free(victim->blocks.back().t0_slot);
  victim->blocks.pop_back();
  victim->tokens.resize(victim->blocks.size() * static_cast<size_t>(block_tokens()));
  ++counters_.n_dropped;
  return true;
}

bool KvCache::make_room_t1(int32_t n_slots) {
  while (t1_.n_free() < n_slots) {
    if (!demote_one(Tier::t1)) return false;
  }
  return true;
}

// Moves the best eviction candidate of `from` one tier down (T0 -> T1 -> T2), or drops it
// when there is no lower tier to take it.
bool KvCache::demote_one(Tier from) {
  auto victim = index_.eviction_candidate(from);
  if (!victim) return false;
  const BlockHandle h = *victim;
  const BlockLocation loc = index_.location(h);
  const auto bb = static_cast<size_t>(config_.layout.block_bytes);
  const uint8_t* src = from == Tier::t0 ? t0_.data(loc.slot) : t1_.data(loc.slot);
  if (from == Tier::t0 && t1_.n_slots() > 0 && (t1_.n_free() > 0 || make_room_t1(1))) {
    const int32_t dst = t1_.alloc();
    be_.copy_to_host(src, t1_.data(dst), bb);
    index_.set_location(h, {Tier::t1, dst});
    t0_.free(loc.slot);
    emit(KvEventType::block_demoted, Tier::t0, Tier::t1, index_.key(h), dst, block_tokens(), static_cast<int64_t>(bb));
    ++counters_.n_demoted_t0_t1;
    counters_.bytes_t0_t1 += static_cast<int64_t>(bb);
    return true;
  }
  // To T2 (already written behind at publish, unless the store refused it then) or gone.
  const bool already_on_t2 = cold_ && cold_->contains(index_.key(h));
  const bool on_t2 = cold_ && (already_on_t2 || [&] {
                       if (from == Tier::t0) {
                         be_.copy_to_host(src, staging_.data(), bb);
                         src = staging_.data();
                       }
                       const BlockHandle p = index_.parent(h);
                       const bool queued = cold_->put(index_.key(h), p.is_null() ? fingerprint() : index_.key(p),
                                                      fingerprint(), {src, bb});
                       if (queued) cold_demoted_unseen_ += static_cast<int64_t>(bb);  // the demotion event carries it
                       return queued;
                     }());
  if (from == Tier::t0)
    t0_.free(loc.slot);
  else
    t1_.free(loc.slot);
  if (on_t2) {
    index_.set_location(h, {Tier::t2, -1});
    emit(KvEventType::block_demoted, from, Tier::t2, index_.key(h), -1, block_tokens(),
         already_on_t2 ? 0 : static_cast<int64_t>(bb));
    ++counters_.n_demoted_to_t2;
    counters_.bytes_to_t2 += static_cast<int64_t>(bb);
  } else {
    emit(KvEventType::block_evicted, from, Tier::none, index_.key(h), loc.slot, block_tokens(),
         static_cast<int64_t>(bb));
    if (index_.info(h).n_children == 0) {
      index_.remove(h);
    } else {
      index_.set_location(h, {Tier::none, -1});
    }
    ++counters_.n_dropped;
  }
  return true;
}

// Brings a matched block to T0 and returns its slot; on a missing or corrupt T2 block the
// block is marked as having no data and an error is returned (the caller recomputes).
Result<int32_t> KvCache::promote(BlockHandle h, int64_t& bad_tokens, ColdRunReader* run) {
  const BlockLocation loc = index_.location(h);
  if (loc.tier == Tier::t0) return loc.slot;
  const auto bb = static_cast<size_t>(config_.layout.block_bytes);
  const int32_t slot = alloc_t0();
  if (slot < 0) return make_error(ErrorCode::out_of_memory, "T0 is full");
  if (loc.tier == Tier::t1) {
    be_.copy_from_host(t1_.data(loc.slot), t0_.data(slot), bb);
    t1_.free(loc.slot);
    emit(KvEventType::block_promoted, Tier::t1, Tier::t0, index_.key(h), slot, block_tokens(),
         static_cast<int64_t>(bb));
    ++counters_.n_promoted[1];
    counters_.bytes_t1_t0 += static_cast<int64_t>(bb);
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
        ++counters_.n_cold_corrupt;
        emit(KvEventType::block_corrupt, Tier::t2, Tier::none, index_.key(h), -1, block_tokens(),
             static_cast<int64_t>(bb));
      }
      index_.set_location(h, {Tier::none, -1});
      bad_tokens += block_tokens();
      return make_error(ErrorCode::io, "cold block missing or corrupt");
    }
    be_.copy_from_host(payload.data(), t0_.data(slot), bb);
    emit(KvEventType::block_promoted, Tier::t2, Tier::t0, index_.key(h), slot, block_tokens(),
         static_cast<int64_t>(bb));
    ++counters_.n_promoted[2];
    counters_.bytes_t2_t0 += static_cast<int64_t>(bb);
  }
  index_.set_location(h, {Tier::t0, slot});
  return slot;
}

std::unique_ptr<ColdRunReader> KvCache::cold_run(std::span<const MatchedBlock> blocks) {
  if (!cold_) return nullptr;
  std::vector<BlockKey> keys;
  for (const MatchedBlock& mb : blocks) {
    if (index_.location(mb.handle).tier == Tier::t2) keys.push_back(mb.key);
  }
  if (keys.empty()) return nullptr;
  return std::make_unique<ColdRunReader>(*cold_, std::move(keys), static_cast<size_t>(config_.layout.block_bytes),
                                         k_cold_batch_bytes, cold_batch_);
}

// The cached full blocks that prefix `prompt`: the index on any tier, continued through
// the cold store (after a restart the index is empty but the disk still holds the chain).
std::vector<MatchedBlock> KvCache::cached_prefix(std::span<const int32_t> prompt) {
  const int64_t B = block_tokens();
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  // The index, on any tier; blocks without data end the match, unless they are behind the
  // sliding window of the match (their keys still chain it; their KV is never read).
  PrefixMatch match = index_.match(fingerprint(), prompt);
  std::vector<MatchedBlock> blocks(match.blocks().begin(), match.blocks().end());
  const auto dataless = [](const MatchedBlock& b) { return b.location.tier == Tier::none; };
  if (config_.window > 0) {
    for (;;) {
      const auto last = std::find_if(blocks.rbegin(), blocks.rend(), dataless);
      if (last == blocks.rend()) break;
      const auto d = static_cast<size_t>(blocks.rend() - last - 1);
      if (d < n_behind_window(static_cast<int64_t>(blocks.size() - 1) * B)) break;
      blocks.resize(d);
    }
  } else {
    blocks.erase(std::find_if(blocks.begin(), blocks.end(), dataless), blocks.end());
  }
  // After a restart the index is empty but the cold store may hold the chain: continue it.
  if (cold_) {
    BlockKey parent_key = blocks.empty() ? fingerprint() : blocks.back().key;
    BlockHandle parent = blocks.empty() ? BlockHandle{} : blocks.back().handle;
    for (auto b = static_cast<int64_t>(blocks.size()); (b + 1) * B <= n_prompt; ++b) {
      const auto toks = prompt.subspan(static_cast<size_t>(b * B), static_cast<size_t>(B));
      const BlockKey key = chain_key(parent_key, toks);
      if (!cold_->contains(key)) break;
      if (index_.find(key)) break;  // indexed without data: it failed before
      const InsertResult r = index_.insert(fingerprint(), parent, NewBlock{key, toks, {Tier::t2, -1}, tick()});
      blocks.push_back(MatchedBlock{r.handle, key, {Tier::t2, -1}});
      parent_key = key;
      parent = r.handle;
    }
  }
  return blocks;
}

PrefixInfo KvCache::prefetch(std::span<const int32_t> tokens) {
  PrefixInfo info;
  info.n_prompt = static_cast<int64_t>(tokens.size());
  std::vector<MatchedBlock> blocks = cached_prefix(tokens);
  for (const MatchedBlock& mb : blocks) index_.acquire(mb.handle);  // pinned while promoting
  const auto run = cold_run(blocks);
  // Blocks behind the window of the stream are not read by its next turn: left where they are.
  const size_t first = blocks.empty() ? 0 : n_behind_window(static_cast<int64_t>(blocks.size() - 1) * block_tokens());
  for (size_t i = first; i < blocks.size(); ++i) {
    const MatchedBlock& mb = blocks[i];
    const Tier was = index_.location(mb.handle).tier;
    if (!promote(mb.handle, info.n_recomputed_bad, run.get()).ok()) break;
    index_.touch(mb.handle, tick());
    info.n_cached += block_tokens();
    info.n_from_tier[tier_index(was)] += block_tokens();
  }
  for (const MatchedBlock& mb : blocks) index_.release(mb.handle);
  return info;
}

Result<PrefixInfo> KvCache::prepare(SeqId id, std::span<const int32_t> prompt) {
  Sequence& s = seq(id);
  const int64_t B = block_tokens();
  PrefixInfo info;
  info.n_prompt = static_cast<int64_t>(prompt.size());
  const auto t_lookup = std::chrono::steady_clock::now();

  // The block where the prompt leaves the sequence's own history (a regenerate, an edit, or
  // simply the previous turn's partial tail) still holds the positions before the
  // divergence. Keep it aside: used in place when private, copied first when shared (copy on
  // write), before the pins below are dropped.
  size_t lcp = 0;
  while (lcp < s.tokens.size() && lcp < prompt.size() && s.tokens[lcp] == prompt[lcp]) ++lcp;
  const auto tail_block = static_cast<size_t>(static_cast<int64_t>(lcp) / B);
  const auto tail_n = static_cast<size_t>(static_cast<int64_t>(lcp) % B);
  SeqBlock tail;
  if (tail_n > 0 && tail_block < s.blocks.size() && s.blocks[tail_block].t0_slot >= 0) {
    if (s.blocks[tail_block].shared.is_null()) {
      tail = s.blocks[tail_block];
      s.blocks[tail_block].t0_slot = -1;  // moved out: not freed with the rest
    } else if (const int32_t slot = alloc_t0(); slot >= 0) {
      be_.copy(t0_.data(s.blocks[tail_block].t0_slot), t0_.data(slot), static_cast<size_t>(config_.layout.block_bytes));
      tail = SeqBlock{slot, {}};
      emit(KvEventType::block_copied_on_write, Tier::t0, Tier::t0, index_.key(s.blocks[tail_block].shared), slot, B);
      ++counters_.n_cow;
    }
  }
  release_blocks_from(s, 0);
  s.tokens.clear();
  s.pinned = true;

  std::vector<MatchedBlock> blocks = cached_prefix(prompt);
  info.lookup_ms = ms_since(t_lookup);

  // Pin and promote, in order; a block that cannot be restored ends the prefix there. With a
  // sliding window, blocks behind it are only counted (their keys chain the prefix), not
  // promoted; if the prefix ends early the window moves back, and so does promotion.
  const auto t_promote = std::chrono::steady_clock::now();
  for (const MatchedBlock& mb : blocks) index_.acquire(mb.handle);
  const auto run = cold_run(blocks);
  std::vector<Tier> was(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) was[i] = index_.location(blocks[i].handle).tier;
  std::vector<int32_t> slots(blocks.size(), -1);
  size_t n_ok = blocks.size();
  // Behind the window of a prefix of n blocks, with a block of margin (prepare may end one
  // block short of it when a copy on write finds no room).
  auto behind = [&](size_t n) { return n == 0 ? size_t{0} : n_behind_window(static_cast<int64_t>(n - 1) * B); };
  size_t lo = behind(n_ok), promoted_lo = n_ok;  // [promoted_lo, n_ok) are on T0
  while (lo < promoted_lo) {
    for (size_t i = lo; i < promoted_lo && i < n_ok; ++i) {
      auto slot = promote(blocks[i].handle, info.n_recomputed_bad, run.get());
      if (!slot.ok()) {
        n_ok = i;
        break;
      }
      slots[i] = *slot;
    }
    promoted_lo = std::min(lo, n_ok);
    lo = behind(n_ok);
  }
  const size_t n_retired = std::min(promoted_lo, n_ok);
  for (size_t i = 0; i < n_ok; ++i) {
    index_.touch(blocks[i].handle, tick());
    if (i < n_retired) {
      index_.release(blocks[i].handle);
      s.blocks.push_back(SeqBlock{});
    } else {
      s.blocks.push_back(SeqBlock{slots[i], blocks[i].handle});
    }
    emit(KvEventType::block_hit, was[i], i < n_retired ? was[i] : Tier::t0, blocks[i].key, slots[i], B, 0, id);
    info.n_from_tier[tier_index(was[i])] += B;
    ++counters_.n_hits_blocks[tier_index(was[i])];
  }
  s.n_retired = n_retired;
  for (size_t i = n_ok; i < blocks.size(); ++i) index_.release(blocks[i].handle);
  s.tokens.assign(prompt.begin(), prompt.begin() + static_cast<int64_t>(n_ok) * B);

  // The kept block continues right after the shared blocks it followed.
  if (tail.t0_slot >= 0) {
    if (n_ok == tail_block) {
      s.blocks.push_back(tail);
      s.tokens.insert(s.tokens.end(), prompt.begin() + static_cast<int64_t>(tail_block) * B,
                      prompt.begin() + static_cast<int64_t>(lcp));
      info.n_from_tier[0] += static_cast<int64_t>(tail_n);
    } else {
      t0_.free(tail.t0_slot);
    }
  }
  rebuild_table(s);
  // Leave at least one token to compute: its logits are the point of the call.
  if (!s.tokens.empty() && s.tokens.size() == prompt.size()) truncate(s, static_cast<int64_t>(s.tokens.size()) - 1);
  retire_behind_window(s);
  rebuild_table(s);
  // Tokens given up since they were counted come off the tiers that served the last blocks.
  int64_t excess =
      info.n_from_tier[0] + info.n_from_tier[1] + info.n_from_tier[2] - static_cast<int64_t>(s.tokens.size());
  for (int t = 2; t >= 0 && excess > 0; --t) {
    const int64_t take = std::min(excess, info.n_from_tier[t]);
    info.n_from_tier[t] -= take;
    excess -= take;
  }
  info.n_cached = static_cast<int64_t>(s.tokens.size());
  info.promote_ms = ms_since(t_promote);
  emit(KvEventType::block_miss, Tier::none, Tier::none, {}, -1, info.n_prompt - info.n_cached, 0, id);
  return info;
}

bool KvCache::reserve(SeqId id, int64_t n_new) {
  Sequence& s = seq(id);
  KVC_ASSERT(s.pinned);  // a parked sequence is resumed by prepare()
  const int64_t B = block_tokens();
  const auto need = static_cast<size_t>((static_cast<int64_t>(s.tokens.size()) + n_new + B - 1) / B);
  while (s.blocks.size() < need) {
    const int32_t slot = alloc_t0();
    if (slot < 0) {
      rebuild_table(s);
      return false;
    }
    s.blocks.push_back(SeqBlock{slot, {}});
  }
  rebuild_table(s);
  return true;
}

void KvCache::commit(SeqId id, std::span<const int32_t> tokens) {
  Sequence& s = seq(id);
  KVC_ASSERT(s.pinned);
  const int64_t B = block_tokens();
  const int64_t old_n = static_cast<int64_t>(s.tokens.size());
  KVC_ASSERT(static_cast<int64_t>(s.blocks.size()) * B >= old_n + static_cast<int64_t>(tokens.size()));
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  const int64_t new_full = static_cast<int64_t>(s.tokens.size()) / B;
  for (int64_t b = old_n / B; b < new_full; ++b) {
    SeqBlock& sb = s.blocks[static_cast<size_t>(b)];
    if (!sb.shared.is_null()) continue;
    const BlockHandle parent = b == 0 ? BlockHandle{} : s.blocks[static_cast<size_t>(b - 1)].shared;
    const BlockKey parent_key = b == 0 ? fingerprint() : index_.key(parent);
    const auto toks = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(b * B), static_cast<size_t>(B));
    const BlockKey key = chain_key(parent_key, toks);
    const InsertResult r = index_.insert(fingerprint(), parent, NewBlock{key, toks, {Tier::t0, sb.t0_slot}, tick()});
    if (r.inserted) {
      emit(KvEventType::block_published, Tier::none, Tier::t0, key, sb.t0_slot, B, 0, id);
      write_behind(r.handle, t0_.data(sb.t0_slot));
    } else {
      // Someone published the same block first: use theirs, or give them our T0 copy.
      ++counters_.n_dedup;
      const BlockLocation loc = index_.location(r.handle);
      if (loc.tier == Tier::t0) {
        t0_.free(sb.t0_slot);
        sb.t0_slot = loc.slot;
      } else {
        if (loc.tier == Tier::t1) t1_.free(loc.slot);
        index_.set_location(r.handle, {Tier::t0, sb.t0_slot});
        // A block whose disk copy was missing or corrupt was just recomputed: store it again.
        if (loc.tier == Tier::none) write_behind(r.handle, t0_.data(sb.t0_slot));
      }
    }
    index_.acquire(r.handle);
    sb.shared = r.handle;
  }
  retire_behind_window(s);
  rebuild_table(s);
}

void KvCache::write_behind(BlockHandle h, const uint8_t* t0_data) {
  if (!cold_) return;
  const auto bb = static_cast<size_t>(config_.layout.block_bytes);
  be_.copy_to_host(t0_data, staging_.data(), bb);
  const BlockHandle p = index_.parent(h);
  if (cold_->put(index_.key(h), p.is_null() ? fingerprint() : index_.key(p), fingerprint(), {staging_.data(), bb})) {
    emit(KvEventType::cold_write_queued, Tier::t0, Tier::t2, index_.key(h), -1, block_tokens(),
         static_cast<int64_t>(bb));
  }
}

void KvCache::park(SeqId id) {
  Sequence& s = seq(id);
  if (!s.pinned) return;
  // Parked form: the full blocks are forgotten (found again through the index, wherever
  // eviction moves them meanwhile); only the private tail keeps its slot, at its position.
  const int64_t B = block_tokens();
  const auto n_full = static_cast<size_t>(static_cast<int64_t>(s.tokens.size()) / B);
  const bool has_tail = static_cast<int64_t>(s.tokens.size()) % B != 0;
  std::vector<SeqBlock> parked(n_full, SeqBlock{});
  for (size_t i = 0; i < s.blocks.size(); ++i) {
    const SeqBlock& b = s.blocks[i];
    if (!b.shared.is_null()) {
      index_.release(b.shared);
    } else if (has_tail && i == n_full) {
      parked.push_back(b);
    } else if (b.t0_slot >= 0) {
      t0_.free(b.t0_slot);  // reserved ahead, never written
    }
  }
  s.blocks = std::move(parked);
  s.n_retired = 0;  // the parked form holds no full block at all
  s.pinned = false;
  s.parked_tick = tick();
  s.table.clear();
}

std::span<uint8_t* const> KvCache::block_table(SeqId id) const { return seq(id).table; }
int64_t KvCache::n_tokens(SeqId id) const { return static_cast<int64_t>(seq(id).tokens.size()); }
std::span<const int32_t> KvCache::tokens(SeqId id) const { return seq(id).tokens; }

TierUsageBytes KvCache::tier_usage(Tier t) const {
  TierUsageBytes u;
  const int64_t bb = config_.layout.block_bytes;
  if (t == Tier::t0 || t == Tier::t1) {
    const BlockPool& p = t == Tier::t0 ? t0_ : t1_;
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

int64_t KvCache::internal_fragmentation_tokens() const {
  const int64_t B = block_tokens();
  int64_t waste = 0;
  for (const auto& [id, s] : seqs_) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n % B != 0) waste += B - n % B;
  }
  return waste;
}

void KvCache::demote_all_unpinned(Tier to) {
  if (to == Tier::t1) {
    while (t1_.n_free() > 0 && demote_one(Tier::t0)) {}
    return;
  }
  while (demote_one(Tier::t0)) {}
  while (demote_one(Tier::t1)) {}
}

}  // namespace kvc::kv

// SequenceTable: block tables of the sequences, prefix reuse at prepare(), copy on write, windows and parking.
#include "core/kv/sequence_table.h"

#include <algorithm>
#include <chrono>

#include "core/util/assert.h"
#include "core/util/clock.h"

namespace kvc::kv {

size_t SequenceTable::lookup_span(size_t n_prompt, size_t cap) const {
  const auto B = static_cast<size_t>(store_.block_tokens());
  return std::min(n_prompt, (cap + B - 1) / B * B);
}

SequenceTable::SequenceTable(TierStore& store) : store_(store), index_(store.index()), telemetry_(store.telemetry()) {
  store_.set_reclaimer(this);
}

SequenceTable::Sequence& SequenceTable::seq(SeqId id) {
  auto it = seqs_.find(id);
  KVC_ASSERT(it != seqs_.end());
  return it->second;
}

const SequenceTable::Sequence& SequenceTable::seq(SeqId id) const {
  auto it = seqs_.find(id);
  KVC_ASSERT(it != seqs_.end());
  return it->second;
}

SeqId SequenceTable::create_sequence() {
  const SeqId id = next_seq_++;
  Sequence s;
  s.pinned = true;  // active: the shared blocks it publishes hold its references
  if (k_per_channel()) {
    const kernels::KvBlockLayout& l = store_.config().layout;
    s.kv_tail.assign(static_cast<size_t>(int64_t{l.n_layer} * l.tail_layer_elems()), 0);
  }
  seqs_.emplace(id, std::move(s));
  return id;
}

void SequenceTable::destroy_sequence(SeqId id) {
  Sequence& s = seq(id);
  release_blocks_from(s, 0);
  seqs_.erase(id);
}

std::span<uint8_t* const> SequenceTable::block_table(SeqId id, KvGroup group) const {
  KVC_ASSERT(group >= 0 && group < n_groups());
  return seq(id).table.t0_table;
}

void SequenceTable::rebuild_table(Sequence& s) {
  BlockTable& t = s.table;
  t.t0_table.resize(t.blocks.size());
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    t.t0_table[i] = t.blocks[i].t0_slot >= 0 ? store_.t0_data(t.blocks[i].t0_slot) : nullptr;
  }
}

// Drops blocks [first_block, end) from the sequence: shared ones are unpinned (they stay
// cached), private ones freed.
void SequenceTable::release_blocks_from(Sequence& s, size_t first_block) {
  BlockTable& t = s.table;
  for (size_t i = first_block; i < t.blocks.size(); ++i) {
    SeqBlock& b = t.blocks[i];
    if (b.shared.is_null()) {
      if (b.t0_slot >= 0) store_.free_t0(b.t0_slot);  // a parked sequence's forgotten blocks have none
    } else if (s.pinned) {
      index_.release(b.shared);
    }
  }
  t.blocks.resize(std::min(first_block, t.blocks.size()));
  t.n_retired = std::min(t.n_retired, t.blocks.size());
  rebuild_table(s);
}

void SequenceTable::retire_behind_window(Sequence& s) {
  BlockTable& t = s.table;
  const size_t n = std::min(store_.n_behind_window(static_cast<int64_t>(s.tokens.size())), t.blocks.size());
  for (size_t i = t.n_retired; i < n; ++i) {
    SeqBlock& b = t.blocks[i];
    if (!b.shared.is_null()) {
      if (s.pinned) index_.release(b.shared);
    } else if (b.t0_slot >= 0) {
      store_.free_t0(b.t0_slot);
    }
    b = SeqBlock{};
  }
  t.n_retired = std::max(t.n_retired, n);
}

// Keeps the first n tokens. A kept shared block that will be written into (n inside it) is
// copied first.
void SequenceTable::truncate(Sequence& s, int64_t n) {
  const int64_t B = store_.block_tokens();
  BlockTable& t = s.table;
  KVC_ASSERT(n <= static_cast<int64_t>(s.tokens.size()));
  // Recurrent: a partial block's state is after the old last token, not after n - 1; give it up.
  if (store_.config().recurrent && n < static_cast<int64_t>(s.tokens.size())) n = n / B * B;
  const auto keep_blocks = static_cast<size_t>((n + B - 1) / B);
  KVC_ASSERT(n == 0 || keep_blocks > t.n_retired);  // the window never retires a block still written
  release_blocks_from(s, keep_blocks);
  s.tokens.resize(static_cast<size_t>(n));
  if (n % B != 0) {
    SeqBlock& last = t.blocks.back();
    if (!last.shared.is_null()) {
      // Copy on write: the tail block becomes private before any position in it changes.
      // (K per channel: a sealed block has no F16 K rows for the holding area; recompute.)
      const int32_t slot = k_per_channel() ? -1 : store_.alloc_t0();
      if (slot < 0) {
        // No room for the copy: give the partial block up and recompute its positions.
        release_blocks_from(s, keep_blocks - 1);
        s.tokens.resize(static_cast<size_t>((keep_blocks - 1) * static_cast<size_t>(B)));
        return;
      }
      store_.copy_t0(last.t0_slot, slot);
      if (s.pinned) index_.release(last.shared);
      telemetry_.emit(KvEventType::block_copied_on_write, Tier::t0, Tier::t0, index_.key(last.shared), slot, B);
      last = SeqBlock{slot, {}};
      rebuild_table(s);
    }
  }
}

bool SequenceTable::reclaim_one_t0() {
  Sequence* victim = nullptr;
  SeqId victim_id = -1;
  for (auto& [id, s] : seqs_) {
    if (s.pinned || s.table.blocks.empty() || s.table.blocks.back().t0_slot < 0) continue;
    if (!victim || s.parked_tick < victim->parked_tick) {
      victim = &s;
      victim_id = id;
    }
  }
  if (!victim) return false;
  const int32_t slot = victim->table.blocks.back().t0_slot;
  const auto n_full = victim->table.blocks.size() - 1;
  const int64_t n_tail =
      static_cast<int64_t>(victim->tokens.size() - n_full * static_cast<size_t>(store_.block_tokens()));
  store_.free_t0(slot);
  victim->table.blocks.pop_back();
  victim->tokens.resize(n_full * static_cast<size_t>(store_.block_tokens()));
  telemetry_.emit(KvEventType::block_evicted, Tier::t0, Tier::none, {}, slot, n_tail,
                  static_cast<int64_t>(store_.block_bytes()), victim_id);
  return true;
}

void SequenceTable::checkpoint(SeqId id) {
  if (store_.config().checkpoints_only) store_.write_checkpoint(seq(id).tokens);
}

int64_t SequenceTable::probe(SeqId id, std::span<const int32_t> prompt, int64_t max_reuse) {
  const Sequence& s = seq(id);
  const int64_t B = store_.block_tokens();
  const auto cap = static_cast<size_t>(std::clamp<int64_t>(max_reuse, 0, static_cast<int64_t>(prompt.size())));
  size_t lcp = 0;
  while (lcp < s.tokens.size() && lcp < cap && s.tokens[lcp] == prompt[lcp]) ++lcp;
  // A block that straddles the cap is used in part (its first positions).
  const auto n_full = static_cast<int64_t>(store_.lookup(prompt.first(lookup_span(prompt.size(), cap))).size());
  const int64_t tail_block = static_cast<int64_t>(lcp) / B;
  const auto& blocks = s.table.blocks;
  int64_t n = n_full * B;
  if (static_cast<int64_t>(lcp) % B != 0 && tail_block == n_full && tail_block < static_cast<int64_t>(blocks.size()) &&
      blocks[static_cast<size_t>(tail_block)].t0_slot >= 0 &&
      (!k_per_channel() || blocks[static_cast<size_t>(tail_block)].shared.is_null())) {
    n = static_cast<int64_t>(lcp);
  }
  n = std::min<int64_t>({n, static_cast<int64_t>(cap), static_cast<int64_t>(prompt.size()) - 1});
  // A recurrent group's partial block holds the state after the sequence's last token only.
  if (store_.config().recurrent && n % B != 0 && n != static_cast<int64_t>(s.tokens.size())) n = n / B * B;
  return n;
}

int64_t SequenceTable::shorten(SeqId id, int64_t n) {
  Sequence& s = seq(id);
  KVC_ASSERT(s.pinned);
  if (n < static_cast<int64_t>(s.tokens.size())) truncate(s, std::max<int64_t>(n, 0));
  retire_behind_window(s);
  rebuild_table(s);
  return static_cast<int64_t>(s.tokens.size());
}

Result<PrefixInfo> SequenceTable::prepare(SeqId id, std::span<const int32_t> prompt, int64_t max_reuse) {
  Sequence& s = seq(id);
  BlockTable& t = s.table;
  const int64_t B = store_.block_tokens();
  PrefixInfo info;
  info.n_prompt = static_cast<int64_t>(prompt.size());
  const auto t_lookup = std::chrono::steady_clock::now();
  // The sequence's history ends at a turn boundary: a checkpoint-only group keeps its window.
  if (store_.config().checkpoints_only) store_.write_checkpoint(s.tokens);
  const auto cap = static_cast<size_t>(std::clamp<int64_t>(max_reuse, 0, static_cast<int64_t>(prompt.size())));

  // The block where the prompt leaves the sequence's own history (a regenerate, an edit, or
  // simply the previous turn's partial tail) still holds the positions before the
  // divergence. Keep it aside: used in place when private, copied first when shared (copy on
  // write), before the pins below are dropped.
  size_t lcp = 0;
  while (lcp < s.tokens.size() && lcp < cap && s.tokens[lcp] == prompt[lcp]) ++lcp;
  const auto tail_block = static_cast<size_t>(static_cast<int64_t>(lcp) / B);
  const auto tail_n = static_cast<size_t>(static_cast<int64_t>(lcp) % B);
  SeqBlock tail;
  // A recurrent group's tail block holds the state after the sequence's last token: of use only
  // when the prompt continues the whole history.
  const bool tail_usable = !store_.config().recurrent || lcp == s.tokens.size();
  if (tail_n > 0 && tail_usable && tail_block < t.blocks.size() && t.blocks[tail_block].t0_slot >= 0) {
    if (t.blocks[tail_block].shared.is_null()) {
      tail = t.blocks[tail_block];
      t.blocks[tail_block].t0_slot = -1;  // moved out: not freed with the rest
    } else if (const int32_t slot = k_per_channel() ? -1 : store_.alloc_t0(); slot >= 0) {
      store_.copy_t0(t.blocks[tail_block].t0_slot, slot);
      tail = SeqBlock{slot, {}};
      telemetry_.emit(KvEventType::block_copied_on_write, Tier::t0, Tier::t0, index_.key(t.blocks[tail_block].shared),
                      slot, B);
    }
  }
  release_blocks_from(s, 0);
  s.tokens.clear();
  s.pinned = true;

  // The lookup records the tier every block was found on; that record is what is reported. A
  // block that a prefetch or staging read moved up for this sequence, and that is still where
  // it was moved to, was found by that earlier lookup.
  std::vector<FoundBlock> blocks = store_.lookup(prompt.first(lookup_span(prompt.size(), cap)));
  for (const MovedUp& m : s.moved_up) {
    for (FoundBlock& b : blocks) {
      if (b.handle == m.handle && b.found_on == m.to) b.found_on = m.from;
    }
  }
  s.moved_up.clear();
  info.lookup_ms = ms_since(t_lookup);

  // Pin and promote, in order; a block that cannot be restored ends the prefix there. With a
  // sliding window, blocks behind it are only counted (their keys chain the prefix), not
  // promoted; if the prefix ends early the window moves back, and so does promotion.
  const auto t_promote = std::chrono::steady_clock::now();
  for (const FoundBlock& b : blocks) index_.acquire(b.handle);
  const auto run = store_.cold_run(blocks);
  std::vector<int32_t> slots(blocks.size(), -1);
  size_t n_ok = blocks.size();
  // Behind the window of a prefix of n blocks, with a block of margin (prepare may end one
  // block short of it when a copy on write finds no room).
  auto behind = [&](size_t n) { return n == 0 ? size_t{0} : store_.n_behind_window(static_cast<int64_t>(n - 1) * B); };
  size_t lo = behind(n_ok), promoted_lo = n_ok;  // [promoted_lo, n_ok) are on T0
  while (lo < promoted_lo) {
    for (size_t i = lo; i < promoted_lo && i < n_ok; ++i) {
      auto slot = store_.promote(blocks[i].handle, info.n_recomputed_bad, run.get());
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
    index_.touch(blocks[i].handle, store_.tick());
    if (i < n_retired) {
      index_.release(blocks[i].handle);
      t.blocks.push_back(SeqBlock{});
    } else {
      t.blocks.push_back(SeqBlock{slots[i], blocks[i].handle});
    }
  }
  t.n_retired = n_retired;
  for (size_t i = n_ok; i < blocks.size(); ++i) index_.release(blocks[i].handle);
  s.tokens.assign(prompt.begin(), prompt.begin() + static_cast<int64_t>(n_ok) * B);

  // The kept block continues right after the shared blocks it followed.
  bool kept_tail = false;
  if (tail.t0_slot >= 0) {
    if (n_ok == tail_block) {
      t.blocks.push_back(tail);
      s.tokens.insert(s.tokens.end(), prompt.begin() + static_cast<int64_t>(tail_block) * B,
                      prompt.begin() + static_cast<int64_t>(lcp));
      kept_tail = true;
    } else {
      store_.free_t0(tail.t0_slot);
    }
  }
  rebuild_table(s);
  if (s.tokens.size() > cap) truncate(s, static_cast<int64_t>(cap));  // KV groups agreed on fewer
  // Leave at least one token to compute: its logits are the point of the call.
  if (!s.tokens.empty() && s.tokens.size() == prompt.size()) truncate(s, static_cast<int64_t>(s.tokens.size()) - 1);
  retire_behind_window(s);
  rebuild_table(s);

  // What the sequence now holds, by the tier each block was found on: a hit per block that
  // still serves tokens (a block given up for want of room for its copy is none).
  const auto n_kept = static_cast<int64_t>(s.tokens.size());
  for (size_t i = 0; i < n_ok; ++i) {
    const int64_t kept = std::clamp<int64_t>(n_kept - static_cast<int64_t>(i) * B, 0, B);
    if (kept == 0) break;
    const Tier was = blocks[i].found_on;
    telemetry_.emit(KvEventType::block_hit, was, i < n_retired ? was : Tier::t0, blocks[i].key, slots[i], kept, 0, id);
    // Positions behind the window whose block has no data need none: counted with T0.
    info.n_from_tier[is_data_tier(was) ? tier_index(was) : 0] += kept;
  }
  if (kept_tail) {
    info.n_from_tier[0] +=
        std::clamp<int64_t>(n_kept - static_cast<int64_t>(n_ok) * B, 0, static_cast<int64_t>(tail_n));
  }
  info.n_cached = n_kept;
  info.promote_ms = ms_since(t_promote);
  telemetry_.emit(KvEventType::block_miss, Tier::none, Tier::none, {}, -1, info.n_prompt - info.n_cached, 0, id);
  return info;
}

void SequenceTable::note_moved_up(SeqId id, std::span<const MovedUp> moved) {
  Sequence& s = seq(id);
  s.moved_up.insert(s.moved_up.end(), moved.begin(), moved.end());
}

bool SequenceTable::reserve(SeqId id, int64_t n_new) {
  Sequence& s = seq(id);
  KVC_ASSERT(s.pinned);  // a parked sequence is resumed by prepare()
  const int64_t B = store_.block_tokens();
  const auto need = static_cast<size_t>((static_cast<int64_t>(s.tokens.size()) + n_new + B - 1) / B);
  while (s.table.blocks.size() < need) {
    const int32_t slot = store_.alloc_t0();
    if (slot < 0) {
      rebuild_table(s);
      return false;
    }
    s.table.blocks.push_back(SeqBlock{slot, {}});
  }
  rebuild_table(s);
  return true;
}

void SequenceTable::commit(SeqId id, std::span<const int32_t> tokens) {
  Sequence& s = seq(id);
  BlockTable& t = s.table;
  KVC_ASSERT(s.pinned);
  const int64_t B = store_.block_tokens();
  const int64_t old_n = static_cast<int64_t>(s.tokens.size());
  KVC_ASSERT(static_cast<int64_t>(t.blocks.size()) * B >= old_n + static_cast<int64_t>(tokens.size()));
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  const int64_t new_full = static_cast<int64_t>(s.tokens.size()) / B;
  for (int64_t b = old_n / B; b < new_full; ++b) {
    SeqBlock& sb = t.blocks[static_cast<size_t>(b)];
    if (!sb.shared.is_null()) continue;
    const BlockHandle parent = b == 0 ? BlockHandle{} : t.blocks[static_cast<size_t>(b - 1)].shared;
    const auto toks = std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(b * B), static_cast<size_t>(B));
    const TierStore::Published p = store_.publish(parent, toks, sb.t0_slot, id);
    index_.acquire(p.handle);
    sb = SeqBlock{p.t0_slot, p.handle};
  }
  retire_behind_window(s);
  rebuild_table(s);
}

void SequenceTable::park(SeqId id) {
  Sequence& s = seq(id);
  if (!s.pinned) return;
  if (store_.config().checkpoints_only) store_.write_checkpoint(s.tokens);  // a turn boundary
  // Parked form: the full blocks are forgotten (found again through the index, wherever
  // eviction moves them meanwhile); only the private tail keeps its slot, at its position.
  const int64_t B = store_.block_tokens();
  const auto n_full = static_cast<size_t>(static_cast<int64_t>(s.tokens.size()) / B);
  const bool has_tail = static_cast<int64_t>(s.tokens.size()) % B != 0;
  std::vector<SeqBlock> parked(n_full, SeqBlock{});
  for (size_t i = 0; i < s.table.blocks.size(); ++i) {
    const SeqBlock& b = s.table.blocks[i];
    if (!b.shared.is_null()) {
      index_.release(b.shared);
    } else if (has_tail && i == n_full) {
      parked.push_back(b);
    } else if (b.t0_slot >= 0) {
      store_.free_t0(b.t0_slot);  // reserved ahead, never written
    }
  }
  s.table.blocks = std::move(parked);
  s.table.n_retired = 0;  // the parked form holds no full block at all
  s.pinned = false;
  s.parked_tick = store_.tick();
  s.table.t0_table.clear();
}

int64_t SequenceTable::internal_fragmentation_tokens() const {
  const int64_t B = store_.block_tokens();
  int64_t waste = 0;
  for (const auto& [id, s] : seqs_) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (n % B != 0) waste += B - n % B;
  }
  return waste;
}

}  // namespace kvc::kv

// Invariants of the sequence table, and of the cache across its pieces: one owner per slot, pins match the sequences.
#include <string>
#include <unordered_map>
#include <vector>

#include "core/kv/kv_cache.h"

namespace kvc::kv {

Status SequenceTable::check_invariants() const {
  auto fail = [](const std::string& m) { return make_error(ErrorCode::internal, "SequenceTable invariant: " + m); };
  const int64_t B = store_.block_tokens();
  const kernels::KvBlockLayout& l = store_.config().layout;
  const auto tail_elems = static_cast<size_t>(k_per_channel() ? int64_t{l.n_layer} * l.tail_layer_elems() : 0);
  for (const auto& [id, s] : seqs_) {
    const BlockTable& t = s.table;
    if (s.kv_tail.size() != tail_elems)
      return fail("sequence " + std::to_string(id) + " has no holding area of its size");
    if (!s.pinned) {
      // Parked: no pin and no full block, at most the private tail at its position.
      for (size_t i = 0; i < t.blocks.size(); ++i) {
        const SeqBlock& b = t.blocks[i];
        if (!b.shared.is_null()) return fail("parked sequence " + std::to_string(id) + " holds a shared block");
        if (b.t0_slot >= 0 && i + 1 != t.blocks.size()) return fail("a parked sequence holds more than its tail");
      }
      continue;
    }
    if (static_cast<int64_t>(t.blocks.size()) * B < static_cast<int64_t>(s.tokens.size())) {
      return fail("sequence " + std::to_string(id) + " has fewer blocks than its tokens need");
    }
    if (t.t0_table.size() != t.blocks.size()) return fail("stale block table");
    if (t.n_retired > t.blocks.size()) return fail("more retired blocks than blocks");
    if (t.n_retired > 0 && t.n_retired > store_.n_behind_window(static_cast<int64_t>(s.tokens.size()))) {
      return fail("a block inside the sliding window was retired");
    }
    for (size_t i = 0; i < t.blocks.size(); ++i) {
      const SeqBlock& b = t.blocks[i];
      if (i < t.n_retired) {
        if (b.t0_slot >= 0 || !b.shared.is_null() || t.t0_table[i] != nullptr)
          return fail("a retired block still holds T0");
        continue;
      }
      if (b.t0_slot < 0 || t.t0_table[i] != store_.t0_data(b.t0_slot)) return fail("block table disagrees with slots");
      const bool full = static_cast<int64_t>(i + 1) * B <= static_cast<int64_t>(s.tokens.size());
      if (b.shared.is_null()) {
        if (full) return fail("a full block of a running sequence is not published");
      } else {
        if (!index_.is_live(b.shared)) return fail("a sequence holds a removed block");
        const BlockLocation loc = index_.location(b.shared);
        if (loc.tier != Tier::t0 || loc.slot != b.t0_slot) return fail("a pinned block is not on T0 at its slot");
      }
    }
  }
  return {};
}

Status KvCache::check_invariants() const {
  auto fail = [](const std::string& m) { return make_error(ErrorCode::internal, "KvCache invariant: " + m); };
  KVC_TRY(telemetry_->check_invariants());
  KVC_TRY(store_->check_invariants());
  KVC_TRY(seqs_->check_invariants());
  const RadixIndex& index = store_->index();
  const BlockPool& t0 = store_->pool(Tier::t0);
  const BlockPool& t1 = store_->pool(Tier::t1);
  // Every T0/T1 slot is free or has exactly one owner.
  std::vector<int> owners0(static_cast<size_t>(t0.n_slots()), 0), owners1(static_cast<size_t>(t1.n_slots()), 0);
  std::unordered_map<uint32_t, int> refs;  // slab index -> pins by sequences
  for (const auto& [id, s] : seqs_->sequences()) {
    for (size_t i = s.pinned ? s.table.n_retired : 0; i < s.table.blocks.size(); ++i) {
      const SequenceTable::SeqBlock& b = s.table.blocks[i];
      if (b.shared.is_null()) {
        if (b.t0_slot >= 0) ++owners0[static_cast<size_t>(b.t0_slot)];
      } else if (s.pinned) {
        ++refs[b.shared.index];
      }
    }
  }
  bool refs_differ = false;
  index.visit([&](const NodeView& n) {
    for (uint32_t bi : n.blocks) {
      const BlockLocation loc = index.location(index.handle_of(bi));
      if (loc.tier == Tier::t0) ++owners0[static_cast<size_t>(loc.slot)];
      if (loc.tier == Tier::t1) ++owners1[static_cast<size_t>(loc.slot)];
      const int pins = refs.count(bi) ? refs[bi] : 0;
      if (index.info(index.handle_of(bi)).n_refs != pins) refs_differ = true;
    }
  });
  if (refs_differ) return fail("index reference counts differ from the sequences' pins");
  for (int32_t i = 0; i < t0.n_slots(); ++i) {
    const int want = t0.is_free(i) ? 0 : 1;
    if (owners0[static_cast<size_t>(i)] != want) {
      return fail("T0 slot " + std::to_string(i) + " has " + std::to_string(owners0[static_cast<size_t>(i)]) +
                  " owners");
    }
  }
  for (int32_t i = 0; i < t1.n_slots(); ++i) {
    const int want = t1.is_free(i) ? 0 : 1;
    if (owners1[static_cast<size_t>(i)] != want) return fail("T1 slot " + std::to_string(i) + " owners mismatch");
  }
  // KV groups: each holds its own invariants, and every running sequence the same tokens in each.
  for (const auto& g : more_) {
    KVC_TRY(g->check_invariants());
    if (g->seqs_->sequences().size() != seqs_->sequences().size()) return fail("KV groups hold different sequences");
    for (const auto& [id, s] : seqs_->sequences()) {
      const auto it = g->seqs_->sequences().find(id);
      if (it == g->seqs_->sequences().end()) return fail("sequence " + std::to_string(id) + " is missing a KV group");
      // (A parked sequence's tail may be reclaimed in one group and not another.)
      if (s.pinned && (!it->second.pinned || it->second.tokens != s.tokens)) {
        return fail("sequence " + std::to_string(id) + " holds different tokens in two KV groups");
      }
    }
  }
  return {};
}

}  // namespace kvc::kv

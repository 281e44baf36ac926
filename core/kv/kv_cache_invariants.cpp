// KvCache::check_invariants: every slot has one owner, pins match the sequences, tables agree.
#include <string>
#include <unordered_map>
#include <vector>

#include "core/kv/kv_cache.h"

namespace kvc::kv {

Status KvCache::check_invariants() const {
  auto fail = [](const std::string& m) { return make_error(ErrorCode::internal, "KvCache invariant: " + m); };
  KVC_TRY(index_.check_invariants());
  const int64_t B = block_tokens();
  // Every T0/T1 slot is free or has exactly one owner.
  std::vector<int> owners0(static_cast<size_t>(t0_.n_slots()), 0), owners1(static_cast<size_t>(t1_.n_slots()), 0);
  std::unordered_map<uint32_t, int> refs;  // slab index -> pins by sequences
  for (const auto& [id, s] : seqs_) {
    if (s.pinned) {
      if (static_cast<int64_t>(s.blocks.size()) * B < static_cast<int64_t>(s.tokens.size())) {
        return fail("sequence " + std::to_string(id) + " has fewer blocks than its tokens need");
      }
      if (s.table.size() != s.blocks.size()) return fail("stale block table");
      if (s.n_retired > s.blocks.size()) return fail("more retired blocks than blocks");
      if (s.n_retired > 0 && s.n_retired > n_behind_window(static_cast<int64_t>(s.tokens.size()))) {
        return fail("a block inside the sliding window was retired");
      }
      for (size_t i = 0; i < s.blocks.size(); ++i) {
        const SeqBlock& b = s.blocks[i];
        if (i < s.n_retired) {
          if (b.t0_slot >= 0 || !b.shared.is_null() || s.table[i] != nullptr)
            return fail("a retired block still holds T0");
          continue;
        }
        if (s.table[i] != t0_.data(b.t0_slot)) return fail("block table disagrees with slots");
        const bool full = static_cast<int64_t>(i + 1) * B <= static_cast<int64_t>(s.tokens.size());
        if (b.shared.is_null()) {
          ++owners0[static_cast<size_t>(b.t0_slot)];
          if (full) return fail("a full block of a running sequence is not published");
        } else {
          if (!index_.is_live(b.shared)) return fail("a sequence holds a removed block");
          const BlockLocation loc = index_.location(b.shared);
          if (loc.tier != Tier::t0 || loc.slot != b.t0_slot) return fail("a pinned block is not on T0 at its slot");
          ++refs[b.shared.index];
        }
      }
    } else {
      for (const SeqBlock& b : s.blocks) {
        if (b.t0_slot >= 0) ++owners0[static_cast<size_t>(b.t0_slot)];
      }
    }
  }
  index_.visit([&](const NodeView& n) {
    for (uint32_t bi : n.blocks) {
      const BlockLocation loc = index_.location(index_.handle_of(bi));
      if (loc.tier == Tier::t0) ++owners0[static_cast<size_t>(loc.slot)];
      if (loc.tier == Tier::t1) ++owners1[static_cast<size_t>(loc.slot)];
      const int pins = refs.count(bi) ? refs[bi] : 0;
      if (index_.info(index_.handle_of(bi)).n_refs != pins) {
        owners0[0] = -1000;  // reported below
      }
    }
  });
  for (int32_t i = 0; i < t0_.n_slots(); ++i) {
    const int want = t0_.is_free(i) ? 0 : 1;
    if (owners0[static_cast<size_t>(i)] != want) {
      return fail(owners0[0] == -1000 ? "index reference counts differ from the sequences' pins"
                                      : "T0 slot " + std::to_string(i) + " has " +
                                            std::to_string(owners0[static_cast<size_t>(i)]) + " owners");
    }
  }
  for (int32_t i = 0; i < t1_.n_slots(); ++i) {
    const int want = t1_.is_free(i) ? 0 : 1;
    if (owners1[static_cast<size_t>(i)] != want) return fail("T1 slot " + std::to_string(i) + " owners mismatch");
  }
  return {};
}

}  // namespace kvc::kv

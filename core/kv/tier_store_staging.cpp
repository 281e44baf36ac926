// TierStore staging (disk blocks read off the engine thread land on host RAM), forgetting, and its invariants.
#include <cstring>
#include <string>

#include "core/kv/tier_store.h"
#include "core/util/assert.h"

namespace kvc::kv {

std::vector<BlockKey> TierStore::cold_prefix_keys(std::span<const int32_t> prompt) {
  std::vector<BlockKey> keys;
  if (!cold_ || t1_.n_slots() == 0) return keys;
  const std::vector<FoundBlock> blocks = lookup(prompt);
  const size_t first = blocks.empty() ? 0 : n_behind_window(static_cast<int64_t>(blocks.size() - 1) * block_tokens());
  for (size_t i = first; i < blocks.size() && keys.size() < static_cast<size_t>(t1_.n_slots()); ++i) {
    if (index_.location(blocks[i].handle).tier == Tier::t2) keys.push_back(blocks[i].key);
  }
  return keys;
}

int64_t TierStore::stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                              std::span<const uint8_t> payloads, std::vector<MovedUp>* moved) {
  const auto bb = block_bytes();
  KVC_ASSERT(results.size() == keys.size() && payloads.size() == keys.size() * bb);
  std::vector<std::span<const uint8_t>> each(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) each[i] = payloads.subspan(i * bb, bb);
  return stage_cold(keys, results, each, moved);
}

int64_t TierStore::stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                              std::span<const std::span<const uint8_t>> payloads, std::vector<MovedUp>* moved) {
  const auto bb = block_bytes();
  KVC_ASSERT(results.size() == keys.size() && payloads.size() == keys.size());
  int64_t n_staged = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (results[i] != ColdRead::ok) continue;  // prepare() reads it again and deals with it
    const std::optional<BlockHandle> h = index_.find(keys[i]);
    if (!h || index_.location(*h).tier != Tier::t2 || payloads[i].size() != bb) continue;
    if (t1_.n_free() == 0 && !make_room_t1(1)) break;
    const int32_t slot = t1_.alloc();
    std::memcpy(t1_.data(slot), payloads[i].data(), bb);
    index_.set_location(*h, {Tier::t1, slot});
    index_.touch(*h, tick());  // just staged: not the next to be demoted again
    if (moved) moved->push_back({*h, Tier::t2, Tier::t1});
    telemetry_.emit(KvEventType::block_promoted, Tier::t2, Tier::t1, keys[i], slot, block_tokens(),
                    static_cast<int64_t>(bb));
    ++n_staged;
  }
  return n_staged;
}

int64_t TierStore::forget(std::span<const BlockKey> keys) {
  // Children leave before their parents; keys come in chain order, so go from the back.
  std::vector<BlockKey> left(keys.rbegin(), keys.rend());
  int64_t n_dropped = 0;
  for (bool progress = true; progress && !left.empty();) {
    progress = false;
    for (auto it = left.begin(); it != left.end();) {
      const std::optional<BlockHandle> h = index_.find(*it);
      const BlockInfo info = h ? index_.info(*h) : BlockInfo{};
      if (!h || info.n_refs > 0) {
        it = left.erase(it);  // gone already, or in use
        continue;
      }
      if (info.n_children > 0) {
        ++it;
        continue;
      }
      const BlockLocation loc = index_.location(*h);
      if (loc.tier == Tier::t0) t0_.free(loc.slot);
      if (loc.tier == Tier::t1) t1_.free(loc.slot);
      telemetry_.emit(KvEventType::block_evicted, loc.tier, Tier::none, *it, loc.slot, block_tokens(), 0);
      index_.remove(*h);
      ++n_dropped;
      progress = true;
      it = left.erase(it);
    }
  }
  return n_dropped;
}

Status TierStore::check_invariants() const {
  auto fail = [](const std::string& m) { return make_error(ErrorCode::internal, "TierStore invariant: " + m); };
  KVC_TRY(index_.check_invariants());
  // Every indexed block on T0/T1 names an allocated slot no other indexed block names.
  std::vector<uint8_t> named0(static_cast<size_t>(t0_.n_slots()), 0), named1(static_cast<size_t>(t1_.n_slots()), 0);
  Status st;
  index_.visit([&](const NodeView& n) {
    for (uint32_t bi : n.blocks) {
      const BlockLocation loc = index_.location(index_.handle_of(bi));
      if (loc.tier != Tier::t0 && loc.tier != Tier::t1) continue;
      const BlockPool& p = pool(loc.tier);
      std::vector<uint8_t>& named = loc.tier == Tier::t0 ? named0 : named1;
      if (loc.slot < 0 || loc.slot >= p.n_slots() || p.is_free(loc.slot)) {
        if (st.ok()) st = fail(std::string("an indexed block names a free ") + tier_name(loc.tier) + " slot");
        continue;
      }
      if (named[static_cast<size_t>(loc.slot)]++ && st.ok()) {
        st = fail(std::string("two indexed blocks share ") + tier_name(loc.tier) + " slot " + std::to_string(loc.slot));
      }
    }
  });
  return st;
}

}  // namespace kvc::kv

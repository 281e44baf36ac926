// KvCache staging: disk (T2) blocks read off the engine thread land on host RAM (T1).
#include <cstring>

#include "core/kv/kv_cache.h"
#include "core/util/assert.h"

namespace kvc::kv {

std::vector<BlockKey> KvCache::cold_prefix_keys(std::span<const int32_t> prompt) {
  std::vector<BlockKey> keys;
  if (!cold_ || t1_.n_slots() == 0) return keys;
  const std::vector<MatchedBlock> blocks = cached_prefix(prompt);
  const size_t first = blocks.empty() ? 0 : n_behind_window(static_cast<int64_t>(blocks.size() - 1) * block_tokens());
  for (size_t i = first; i < blocks.size() && keys.size() < static_cast<size_t>(t1_.n_slots()); ++i) {
    if (index_.location(blocks[i].handle).tier == Tier::t2) keys.push_back(blocks[i].key);
  }
  return keys;
}

int64_t KvCache::stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                            std::span<const uint8_t> payloads) {
  const auto bb = static_cast<size_t>(config_.layout.block_bytes);
  KVC_ASSERT(results.size() == keys.size() && payloads.size() == keys.size() * bb);
  int64_t n_staged = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (results[i] != ColdRead::ok) continue;  // prepare() reads it again and deals with it
    const std::optional<BlockHandle> h = index_.find(keys[i]);
    if (!h || index_.location(*h).tier != Tier::t2) continue;
    if (t1_.n_free() == 0 && !make_room_t1(1)) break;
    const int32_t slot = t1_.alloc();
    std::memcpy(t1_.data(slot), payloads.data() + i * bb, bb);
    index_.set_location(*h, {Tier::t1, slot});
    index_.touch(*h, tick());  // just staged: not the next to be demoted again
    emit(KvEventType::block_promoted, Tier::t2, Tier::t1, keys[i], slot, block_tokens(), static_cast<int64_t>(bb));
    ++n_staged;
  }
  return n_staged;
}

}  // namespace kvc::kv

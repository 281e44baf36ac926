// The in-memory ColdStore.
#include "core/kv/cold_store.h"

#include <algorithm>

namespace kvc::kv {

bool MemoryColdStore::put(const BlockKey& key, const BlockKey& /*parent*/, const BlockKey& /*fingerprint*/,
                          std::span<const uint8_t> payload) {
  std::lock_guard lock(mu_);
  if (static_cast<int64_t>(payload.size()) > stats_.capacity_bytes) return false;
  auto [it, inserted] = blocks_.try_emplace(key);
  if (!inserted) {
    it->second.last_use = ++clock_;
    return true;
  }
  it->second.payload.assign(payload.begin(), payload.end());
  it->second.checksum = hash_bytes(payload);
  it->second.last_use = ++clock_;
  stats_.used_bytes += static_cast<int64_t>(payload.size());
  stats_.bytes_written += static_cast<int64_t>(payload.size());
  collect_locked();
  return true;
}

bool MemoryColdStore::contains(const BlockKey& key) const {
  std::lock_guard lock(mu_);
  return blocks_.count(key) != 0;
}

ColdRead MemoryColdStore::read(const BlockKey& key, std::span<uint8_t> out) {
  std::lock_guard lock(mu_);
  auto it = blocks_.find(key);
  if (it == blocks_.end()) return ColdRead::missing;
  Entry& e = it->second;
  if (e.payload.size() != out.size() || hash_bytes(e.payload) != e.checksum) {
    stats_.used_bytes -= static_cast<int64_t>(e.payload.size());
    ++stats_.n_corrupt;
    blocks_.erase(it);
    return ColdRead::corrupt;
  }
  std::copy(e.payload.begin(), e.payload.end(), out.begin());
  e.last_use = ++clock_;
  stats_.bytes_read += static_cast<int64_t>(out.size());
  return ColdRead::ok;
}

void MemoryColdStore::release(std::span<const BlockKey> keys) {
  std::lock_guard lock(mu_);
  for (const auto& k : keys) {
    if (auto it = blocks_.find(k); it != blocks_.end()) it->second.last_use = 0;
  }
}

ColdStoreStats MemoryColdStore::stats() const {
  std::lock_guard lock(mu_);
  ColdStoreStats s = stats_;
  s.n_blocks = static_cast<int64_t>(blocks_.size());
  return s;
}

bool MemoryColdStore::corrupt_for_test(const BlockKey& key) {
  std::lock_guard lock(mu_);
  auto it = blocks_.find(key);
  if (it == blocks_.end() || it->second.payload.empty()) return false;
  it->second.payload[it->second.payload.size() / 2] ^= 0x5a;
  return true;
}

void MemoryColdStore::collect_locked() {
  while (stats_.used_bytes > stats_.capacity_bytes && !blocks_.empty()) {
    auto oldest = std::min_element(blocks_.begin(), blocks_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
    stats_.used_bytes -= static_cast<int64_t>(oldest->second.payload.size());
    ++stats_.n_collected;
    blocks_.erase(oldest);
  }
}

}  // namespace kvc::kv

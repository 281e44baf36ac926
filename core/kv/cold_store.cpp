// The in-memory ColdStore.
#include "core/kv/cold_store.h"

#include <algorithm>

#include "core/util/assert.h"

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

std::vector<ColdRead> ColdStore::read_many(std::span<const BlockKey> keys, std::span<const std::span<uint8_t>> outs) {
  KVC_ASSERT(keys.size() == outs.size());
  std::vector<ColdRead> results(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) results[i] = read(keys[i], outs[i]);
  return results;
}

void MemoryColdStore::release(std::span<const BlockKey> keys) {
  std::lock_guard lock(mu_);
  for (const auto& k : keys) {
    auto it = blocks_.find(k);
    if (it == blocks_.end()) continue;
    stats_.used_bytes -= static_cast<int64_t>(it->second.payload.size());
    ++stats_.n_released;
    blocks_.erase(it);
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

ColdRunReader::ColdRunReader(ColdStore& cold, std::vector<BlockKey> keys, size_t block_bytes, size_t max_batch_bytes,
                             std::vector<uint8_t>& buffer)
    : cold_(cold),
      keys_(std::move(keys)),
      block_bytes_(block_bytes),
      max_batch_blocks_(std::max<size_t>(1, max_batch_bytes / std::max<size_t>(block_bytes, 1))),
      buffer_(buffer) {
  for (size_t i = 0; i < keys_.size(); ++i) position_.emplace(keys_[i], i);
}

ColdRead ColdRunReader::read(const BlockKey& key, std::span<const uint8_t>& payload) {
  const auto it = position_.find(key);
  const bool in_batch =
      it != position_.end() && it->second >= batch_begin_ && it->second < batch_begin_ + results_.size();
  if (!in_batch) {
    // Start a new batch at this key: the rest of the run, up to the batch size.
    const size_t begin = it != position_.end() ? it->second : 0;
    const size_t n = it != position_.end() ? std::min(max_batch_blocks_, keys_.size() - begin) : 1;
    std::span<const BlockKey> keys(&key, 1);
    if (it != position_.end()) keys = std::span<const BlockKey>(keys_).subspan(begin, n);
    if (buffer_.size() < n * block_bytes_) buffer_.resize(n * block_bytes_);
    std::vector<std::span<uint8_t>> outs(n);
    for (size_t i = 0; i < n; ++i) outs[i] = std::span(buffer_).subspan(i * block_bytes_, block_bytes_);
    results_ = cold_.read_many(keys, outs);
    ++n_batches_;
    if (it == position_.end()) {
      // A stray key: served, but the run's batch is gone; the next run key starts a new one.
      batch_begin_ = keys_.size();
      payload = outs[0];
      const ColdRead r = results_[0];
      results_.clear();
      return r;
    }
    batch_begin_ = begin;
  }
  const size_t i = it->second - batch_begin_;
  payload = std::span<const uint8_t>(buffer_).subspan(i * block_bytes_, block_bytes_);
  return results_[i];
}

}  // namespace kvc::kv

// KvEventLog: the single-writer, many-reader ring of KV cache events (see kv_events.h for the ordering argument).
#include "core/kv/kv_events.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>

#include "core/util/assert.h"
#include "core/util/clock.h"

namespace kvc::kv {

namespace {

constexpr std::string_view k_type_names[k_n_event_types] = {
    "block_allocated",   "block_published", "block_hit",       "block_miss",
    "block_promoted",    "block_demoted",   "block_evicted",   "block_copied_on_write",
    "cold_write_queued", "cold_write_done", "block_corrupt",   "alloc_failed",
    "seq_preempted",     "seq_resumed",     "request_started", "lookup_done",
    "promote_done",      "prefill_done",    "first_token",     "request_finished",
    "tier_usage",
};

}  // namespace

std::string_view event_type_name(KvEventType type) {
  const auto i = static_cast<size_t>(type);
  return i < std::size(k_type_names) ? k_type_names[i] : std::string_view("?");
}

bool parse_event_type(std::string_view name, KvEventType& out) {
  for (size_t i = 0; i < std::size(k_type_names); ++i) {
    if (k_type_names[i] == name) {
      out = static_cast<KvEventType>(i);
      return true;
    }
  }
  return false;
}

bool transfer_of(const KvEvent& e, Tier& from, Tier& to, int64_t& n_bytes) {
  switch (e.type) {
    case KvEventType::block_promoted:
    case KvEventType::block_demoted:
    case KvEventType::cold_write_done:
    case KvEventType::seq_preempted:
    case KvEventType::seq_resumed: break;
    default: return false;
  }
  if (!is_data_tier(e.from) || !is_data_tier(e.to) || e.from == e.to) return false;
  from = e.from;
  to = e.to;
  n_bytes = e.n_bytes;
  return true;
}

int64_t now_us() { return kvc::now_us(); }

KvEventLog::KvEventLog(size_t capacity)
    : mask_(std::bit_ceil(std::max<size_t>(capacity, 2)) - 1), slots_(std::make_unique<Slot[]>(mask_ + 1)) {}

void KvEventLog::append(const KvEvent& event) noexcept {
  const uint64_t i = head_.load(std::memory_order_relaxed);  // only this thread stores head_
  uint64_t words[k_words];
  std::memcpy(words, &event, sizeof(event));
  Slot& slot = slots_[i & mask_];
  slot.seq.store(k_busy, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t j = 0; j < k_words; ++j) slot.words[j].store(words[j], std::memory_order_relaxed);
  slot.seq.store(i + 1, std::memory_order_release);
  head_.store(i + 1, std::memory_order_release);
}

bool KvEventLog::try_read(uint64_t i, KvEvent& out) const {
  const Slot& slot = slots_[i & mask_];
  const uint64_t s1 = slot.seq.load(std::memory_order_acquire);
  if (s1 != i + 1) return false;
  uint64_t words[k_words];
  for (size_t j = 0; j < k_words; ++j) words[j] = slot.words[j].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (slot.seq.load(std::memory_order_relaxed) != s1) return false;
  std::memcpy(&out, words, sizeof(out));
  return true;
}

uint64_t KvEventLog::oldest() const {
  const uint64_t h = head();
  return h > capacity() ? h - capacity() : 0;
}

bool KvEventLog::check_invariants() const {
  const uint64_t h = head();
  for (uint64_t i = oldest(); i < h; ++i) {
    if (slots_[i & mask_].seq.load(std::memory_order_relaxed) != i + 1) return false;
  }
  for (uint64_t i = h; i < capacity(); ++i) {  // slots never written yet (first lap only)
    if (slots_[i].seq.load(std::memory_order_relaxed) != 0) return false;
  }
  return true;
}

EventReadResult KvEventLog::read_since(uint64_t cursor, std::vector<KvEvent>& out, size_t max_events) const {
  const uint64_t cap = capacity();
  const uint64_t h = head();
  KVC_ASSERT(cursor <= h);  // a cursor from the future came from another log
  EventReadResult r;
  uint64_t c = cursor;
  if (h - c > cap) {
    r.n_lost += h - cap - c;
    c = h - cap;
  }
  out.reserve(out.size() + static_cast<size_t>(std::min<uint64_t>(h - c, max_events)));
  KvEvent e;
  while (c < h && r.n_read < max_events) {
    if (try_read(c, e)) {
      out.push_back(e);
      ++c;
      ++r.n_read;
      continue;
    }
    // The writer lapped us: event c is gone. Skip to the oldest event that may still be held.
    const uint64_t h_now = head();
    const uint64_t next = std::max(c + 1, h_now > cap ? h_now - cap : 0);
    r.n_lost += next - c;
    c = next;
  }
  r.cursor = c;
  return r;
}

}  // namespace kvc::kv

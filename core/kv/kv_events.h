// KvEvent and KvEventLog: the timestamped stream of what the KV cache does, for the UI and exporters.
//
// The KV cache manager and the engine thread PRODUCE events (one writer); the GUI, kvchat-cli
// and the trace exporters CONSUME them through cursors (any number of readers, other threads).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/kv/block_key.h"
#include "core/kv/radix_index.h"

namespace kvc::kv {

// Tiers that hold data (t0, t1, t2); Tier::none is "nowhere" (a miss, a dropped block).
constexpr int k_n_data_tiers = 3;
constexpr bool is_data_tier(Tier t) { return tier_index(t) < k_n_data_tiers; }

// What the fields of a KvEvent mean for each type. Unused fields keep their defaults
// (tiers none, key null, ids -1, counts 0). n_bytes is always the KV payload size.
enum class KvEventType : uint8_t {
  // Block events (key: the block; seq_id / request_id: who caused it, if anyone).
  block_allocated,  // to: tier of the new slot; slot: its index there
  block_published,  // became shared: entered the prefix index; to: its tier
  block_hit,        // lookup found the block; from: its tier; n_tokens: the block's tokens
  block_miss,  // once per lookup: n_tokens prompt tokens that must be computed; key: first uncached full block, if any
  block_promoted,  // from -> to (faster); n_bytes copied
  block_demoted,   // from -> to (slower); n_bytes copied (0 when the target already had it, e.g. written behind to t2)
  block_evicted,   // dropped from tier `from` for good (to: none); n_bytes freed
  block_copied_on_write,  // a shared block a sequence keeps only part of was copied for it; to: tier of the copy
  cold_write_queued,      // write-behind to t2 scheduled; from: source tier
  cold_write_done,        // write-behind finished; from: source tier, to: t2; n_bytes written
  block_corrupt,          // checksum failed; from: tier it was read from; the block is dropped and recomputed
  alloc_failed,           // no slot on tier `to` for n_bytes; the scheduler evicts or preempts next
  // Sequence events.
  seq_preempted,  // swapped out from `from` to `to` (none: dropped, recomputed later); n_tokens: its length; n_bytes
                  // moved
  seq_resumed,    // swapped back from `from` into `to`; n_tokens; n_bytes moved
  // Request phases, in this order; their time stamps split TTFT (see TurnTimeline).
  request_started,   // n_tokens: prompt tokens
  lookup_done,       // n_tokens: prompt tokens found cached (all tiers)
  promote_done,      // n_bytes promoted for this request (optional phase: absent = 0 ms)
  prefill_done,      // n_tokens: prompt tokens computed
  first_token,       // first generated token sampled
  request_finished,  // n_tokens: tokens generated
  // A counter sample for plots: tier `to` now holds n_bytes in n_tokens blocks (yes, blocks).
  tier_usage,
};
constexpr int k_n_event_types = static_cast<int>(KvEventType::tier_usage) + 1;

// Stable snake_case name ("block_hit"), used in CSV; parse_event_type() inverts it.
std::string_view event_type_name(KvEventType type);
bool parse_event_type(std::string_view name, KvEventType& out);
// Phase and counter events describe a request or a tier rather than a block.
constexpr bool is_request_phase(KvEventType t) {
  return t >= KvEventType::request_started && t <= KvEventType::request_finished;
}

// Invariant: a small POD, 64 bytes, trivially copyable (copied word by word through the log).
struct KvEvent {
  int64_t t_us = 0;  // steady clock, microseconds (now_us())
  KvEventType type = KvEventType::block_allocated;
  Tier from = Tier::none;
  Tier to = Tier::none;
  uint8_t reserved = 0;  // padding, always 0
  int32_t slot = -1;     // slot in the tier's pool, for the block map; -1 when not meaningful
  BlockKey key;
  int64_t seq_id = -1;
  int64_t request_id = -1;
  int64_t n_tokens = 0;
  int64_t n_bytes = 0;
};
static_assert(std::is_trivially_copyable_v<KvEvent>);
static_assert(sizeof(KvEvent) == 64);

// The tier pair and byte count of an event that moved KV bytes between two data tiers
// (promoted, demoted, cold_write_done, seq_preempted, seq_resumed); false for anything else.
// The single definition of "bytes moved" shared by KvCounters and BandwidthMeter.
bool transfer_of(const KvEvent& e, Tier& from, Tier& to, int64_t& n_bytes);

// Microseconds on the steady clock: the time base of every KvEvent.
int64_t now_us();

// What one read_since() call did. Cursors count events: cursor c names the c-th event ever appended.
struct EventReadResult {
  uint64_t cursor = 0;  // pass this to the next read_since()
  uint64_t n_read = 0;  // events appended to `out`
  uint64_t n_lost = 0;  // events after the old cursor that were overwritten before they could be read
};

// KvEventLog: a bounded ring of the most recent events, appended by ONE writer thread without
// locks or allocation, read by any number of threads through cursors.
//
//   event index i lives in slots_[i & mask_]; head_ = number of events appended so far;
//   the readable window is [max(0, head_ - capacity), head_).
//
// Memory ordering (a per-slot seqlock whose payload is atomics, so no read is a data race):
//   writer, event i:  slot.seq = k_busy (relaxed); fence(release); payload words (relaxed);
//                     slot.seq = i + 1 (release); head_ = i + 1 (release)
//   reader, event i:  s1 = slot.seq (acquire); payload words (relaxed); fence(acquire);
//                     s2 = slot.seq (relaxed); the copy is event i iff s1 == s2 == i + 1.
// A reader that acquires head_ > i sees slot.seq >= i + 1 (it was released before head_). If it
// read any word of a later lap, the fences order that lap's k_busy store before its s2 load,
// so s2 != i + 1 and the copy is discarded: counted as lost, never returned torn. Sequence
// values of a slot (i+1, busy, i+1+cap, busy, ...) never repeat, so there is no ABA.
class KvEventLog {
 public:
  // capacity is rounded up to a power of two (at least 2).
  explicit KvEventLog(size_t capacity = size_t{1} << 16);
  KvEventLog(const KvEventLog&) = delete;
  KvEventLog& operator=(const KvEventLog&) = delete;

  // Writer thread only. Wait-free, never allocates.
  void append(const KvEvent& event) noexcept;

  // Any thread. Appends the events in [cursor, head) to out, at most max_events of them.
  // Events that were overwritten before this call could copy them are skipped and counted.
  EventReadResult read_since(uint64_t cursor, std::vector<KvEvent>& out, size_t max_events = SIZE_MAX) const;

  uint64_t head() const { return head_.load(std::memory_order_acquire); }  // cursor of "now"
  uint64_t oldest() const;                                                 // cursor of the oldest event still held
  size_t capacity() const { return mask_ + 1; }

  // Every held slot names the event its position says it holds. Call from the writer thread
  // (or when it is idle): for asserts and tests.
  bool check_invariants() const;

 private:
  static constexpr size_t k_words = sizeof(KvEvent) / sizeof(uint64_t);
  static constexpr uint64_t k_busy = UINT64_MAX;
  struct Slot {
    std::atomic<uint64_t> seq{0};  // i + 1 when it holds event i; k_busy while being written; 0 never written
    std::atomic<uint64_t> words[k_words];
  };
  // True and `out` = event i when slot (i & mask_) still holds it.
  bool try_read(uint64_t i, KvEvent& out) const;

  size_t mask_;
  std::unique_ptr<Slot[]> slots_;  // (capacity)
  alignas(64) std::atomic<uint64_t> head_{0};
};

}  // namespace kvc::kv

// Snapshot<T>: the latest value of T, published by one writer and copied by many readers, lock-free for both.
//
// Why not std::atomic<std::shared_ptr<const T>>: in libstdc++ 12 it is not lock-free
// (is_always_lock_free == false; load and store spin on a lock bit kept in the control-block
// pointer), so a reader preempted inside load() stalls the writer, and the writer allocates
// a new T per publish. A seqlock would be lock-free but is only correct for trivially copyable
// T; KvMetrics holds vectors. This scheme works for any copyable T:
//
//   values_[n_slots]   slot-owned copies of T, reused by every publish (capacity is kept,
//                      so publishing a same-sized T does not allocate)
//   pins_[n_slots]     how many readers are copying out of each slot right now
//   current_           (version << 8) | slot of the latest publish; version 0 = never published
//
//   writer: pick a slot s != current with pins_[s] == 0; values_[s] = value; current_ = (v+1, s)
//   reader: c = current_; ++pins_[slot(c)]; if current_ != c { --pins; retry }
//           out = values_[slot(c)]; --pins_[slot(c)]
//
// Correctness: pins_ increments and current_ accesses are seq_cst, so either the reader's
// re-check sees the writer's newer current_ (and retries), or the writer's later pin load sees
// the reader's pin (and skips the slot): the Dekker pattern. The writer only writes slots that
// are neither current nor pinned; a reader only copies a slot that was current after it pinned
// it; the unpin is a release that the writer's pin load (acquire) synchronizes with. Versions
// never repeat (56 bits), so a re-check cannot be fooled by ABA.
// Progress: the writer never waits; it fails (returns false) only when every non-current slot
// is pinned, impossible while at most n_slots - 2 readers copy at once. A reader retries only
// when a publish lands between its two loads of current_, not during its copy.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace kvc {

template <typename T, size_t n_slots = 8>
class Snapshot {
  static_assert(n_slots >= 3 && n_slots <= 256);

 public:
  // Readers that may copy at the same moment while publish() is still guaranteed to succeed.
  static constexpr size_t k_max_concurrent_readers = n_slots - 2;

  Snapshot() = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  // Writer thread only. Never blocks; false (nothing published) only when all free slots are
  // pinned by more than k_max_concurrent_readers readers; publish again later.
  template <typename U>
  bool publish(U&& value) {
    const uint64_t cur = current_.load(std::memory_order_relaxed);  // only the writer stores it
    const size_t cur_slot = slot_of(cur);
    for (size_t k = 1; k < n_slots; ++k) {
      const size_t s = (cur_slot + k) % n_slots;
      if (pins_[s].n.load(std::memory_order_seq_cst) != 0) continue;
      values_[s] = std::forward<U>(value);
      current_.store(((version_of(cur) + 1) << 8) | s, std::memory_order_seq_cst);
      return true;
    }
    return false;
  }

  // Any thread: the version of the latest publish (0 before the first).
  uint64_t version() const { return version_of(current_.load(std::memory_order_acquire)); }

  // Any thread: copies the latest value into out (reusing out's capacity); returns its version.
  // Before the first publish, out becomes a default-constructed T and the version is 0.
  uint64_t read(T& out) const {
    const Pinned p = pin_current();
    Unpin unpin{pins_[p.slot].n};
    out = values_[p.slot];
    return p.version;
  }

  T read() const {
    T out{};
    read(out);
    return out;
  }

  // Copies only when something newer than seen_version was published; updates seen_version.
  bool read_if_newer(uint64_t& seen_version, T& out) const {
    if (version() == seen_version) return false;
    seen_version = read(out);
    return true;
  }

 private:
  struct alignas(64) Pin {
    mutable std::atomic<uint32_t> n{0};
  };
  struct Unpin {
    std::atomic<uint32_t>& n;
    ~Unpin() { n.fetch_sub(1, std::memory_order_release); }
  };
  static constexpr size_t slot_of(uint64_t c) { return static_cast<size_t>(c & 0xff); }
  static constexpr uint64_t version_of(uint64_t c) { return c >> 8; }

  struct Pinned {
    size_t slot;
    uint64_t version;
  };
  // Pins the slot that is current after the pin; the caller unpins it.
  Pinned pin_current() const {
    for (;;) {
      const uint64_t c = current_.load(std::memory_order_seq_cst);
      const size_t s = slot_of(c);
      pins_[s].n.fetch_add(1, std::memory_order_seq_cst);
      if (current_.load(std::memory_order_seq_cst) == c) return Pinned{s, version_of(c)};
      pins_[s].n.fetch_sub(1, std::memory_order_relaxed);  // never copied from it
    }
  }

  std::array<T, n_slots> values_{};
  std::array<Pin, n_slots> pins_{};
  alignas(64) std::atomic<uint64_t> current_{0};
};

}  // namespace kvc

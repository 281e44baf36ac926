// Tests of Snapshot<T>: consistent copies under a concurrent writer, and a writer that never waits for readers.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "core/kv/kv_metrics.h"
#include "core/util/snapshot.h"

namespace {

// Consistent iff every element equals version and the size is derived from it.
struct Versioned {
  uint64_t version = 0;
  std::vector<uint64_t> values;
};

size_t size_for(uint64_t v) { return 1 + v % 97; }

// A value whose copy blocks on reader threads until the gate opens, so a test can hold
// readers in the middle of a copy (pinning their slots) for as long as it likes.
std::atomic<bool> g_gate_open{true};
std::atomic<int> g_n_readers_in_copy{0};
thread_local bool t_is_reader = false;

struct Gated {
  int value = 0;
  Gated() = default;
  explicit Gated(int v) : value(v) {}
  Gated(const Gated& o) : value(o.value) {}
  Gated& operator=(const Gated& o) {
    if (t_is_reader) {
      g_n_readers_in_copy.fetch_add(1);
      while (!g_gate_open.load()) std::this_thread::yield();
      g_n_readers_in_copy.fetch_sub(1);
    }
    value = o.value;
    return *this;
  }
};

}  // namespace

TEST_CASE("snapshot: version 0 and a default value before the first publish", "[core][snapshot]") {
  kvc::Snapshot<Versioned> snap;
  CHECK(snap.version() == 0);
  Versioned v;
  v.version = 99;
  CHECK(snap.read(v) == 0);
  CHECK(v.version == 0);
  CHECK(v.values.empty());

  REQUIRE(snap.publish(Versioned{5, {5, 5}}));
  CHECK(snap.version() == 1);
  const Versioned got = snap.read();
  CHECK(got.version == 5);
  CHECK(got.values == std::vector<uint64_t>{5, 5});

  uint64_t seen = 0;
  Versioned out;
  CHECK(snap.read_if_newer(seen, out));
  CHECK(seen == 1);
  CHECK_FALSE(snap.read_if_newer(seen, out));
  REQUIRE(snap.publish(Versioned{6, {6}}));
  CHECK(snap.read_if_newer(seen, out));
  CHECK(out.version == 6);
  CHECK(seen == 2);
}

TEST_CASE("snapshot: readers always copy a consistent value under a concurrent writer", "[core][snapshot]") {
  constexpr uint64_t k_n_publishes = 20'000;
  constexpr int k_n_readers = 4;
  static_assert(k_n_readers <= kvc::Snapshot<Versioned>::k_max_concurrent_readers);
  kvc::Snapshot<Versioned> snap;
  std::atomic<bool> done{false};
  std::atomic<uint64_t> n_inconsistent{0}, n_backwards{0}, n_reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < k_n_readers; ++r) {
    readers.emplace_back([&] {
      Versioned v;
      uint64_t last_version = 0, last_published = 0;
      while (!done.load()) {
        const uint64_t published = snap.read(v);
        n_reads.fetch_add(1, std::memory_order_relaxed);
        if (published == 0) continue;
        bool ok = v.values.size() == size_for(v.version);
        for (uint64_t x : v.values) ok = ok && x == v.version;
        if (!ok) n_inconsistent.fetch_add(1);
        if (v.version < last_version || published < last_published) n_backwards.fetch_add(1);
        last_version = v.version;
        last_published = published;
      }
    });
  }
  // Publish until the readers have copied many times while the writer was running, so the
  // two really overlap even when the readers start late on a busy machine.
  uint64_t n_failed = 0, n_published = 0;
  Versioned w;
  for (uint64_t v = 1; v < 50'000'000; ++v) {
    w.version = v;
    w.values.assign(size_for(v), v);
    if (!snap.publish(w)) ++n_failed;
    n_published = v;
    if (v >= k_n_publishes && n_reads.load(std::memory_order_relaxed) >= 4000) break;
    if (v % 256 == 0) std::this_thread::yield();
  }
  done.store(true);
  for (auto& t : readers) t.join();
  CHECK(n_inconsistent.load() == 0);
  CHECK(n_backwards.load() == 0);
  CHECK(n_failed == 0);  // never more than k_max_concurrent_readers readers
  CHECK(n_reads.load() >= 4000);
  CHECK(snap.read().version == n_published);
  CHECK(snap.version() == n_published);
}

TEST_CASE("snapshot: a writer never waits for readers stuck in a copy", "[core][snapshot]") {
  kvc::Snapshot<Gated, 3> snap;  // room for one concurrent reader
  REQUIRE(snap.publish(Gated(1)));
  g_gate_open.store(false);
  std::vector<int> got(2, 0);
  auto stuck_reader = [&](int i) {
    return std::thread([&, i] {
      t_is_reader = true;
      got[static_cast<size_t>(i)] = snap.read().value;
    });
  };
  std::thread a = stuck_reader(0);  // pins the slot of value 1
  while (g_n_readers_in_copy.load() < 1) std::this_thread::yield();
  REQUIRE(snap.publish(Gated(2)));
  std::thread b = stuck_reader(1);  // pins the slot of value 2
  while (g_n_readers_in_copy.load() < 2) std::this_thread::yield();

  // With two of three slots pinned, one publish still fits; the next finds no free slot and
  // returns at once instead of waiting.
  CHECK(snap.publish(Gated(3)));
  CHECK_FALSE(snap.publish(Gated(4)));
  CHECK(snap.version() == 3);

  g_gate_open.store(true);
  a.join();
  b.join();
  CHECK(got[0] == 1);  // each reader got the value current when it pinned
  CHECK(got[1] == 2);
  CHECK(snap.publish(Gated(4)));
  CHECK(snap.read().value == 4);
}

TEST_CASE("snapshot: KvMetrics round-trips with its vectors", "[core][snapshot]") {
  kvc::Snapshot<kvc::kv::KvMetrics> snap;
  kvc::kv::KvMetrics m;
  m.block_size = 16;
  m.tiers[0] = {1024, 4096, 2, 8};
  m.shares = {{1, {512, 0, 0}}, {2, {512, 64, 0}}};
  m.counters.n_evictions[1] = 3;
  REQUIRE(snap.publish(m));
  const kvc::kv::KvMetrics got = snap.read();
  CHECK(got.block_size == 16);
  CHECK(got.tiers[0].used_bytes == 1024);
  CHECK(got.tiers[0].fill() == Approx(0.25));
  REQUIRE(got.shares.size() == 2);
  CHECK(got.shares[1].bytes[1] == 64);
  CHECK(got.counters.n_evictions[1] == 3);
}

// Tests of KvEventLog: ordering, wrap-around, exact loss counts, and concurrent single-writer / many-reader use.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "core/kv/kv_events.h"

using namespace kvc::kv;

namespace {

// Every field derived from i, so a copy mixing two events (a torn read) is detected.
KvEvent event_number(uint64_t i) {
  KvEvent e;
  e.t_us = static_cast<int64_t>(i);
  e.type = static_cast<KvEventType>(i % k_n_event_types);
  e.from = static_cast<Tier>(i % 4);
  e.to = static_cast<Tier>((i + 1) % 4);
  e.slot = static_cast<int32_t>(i % 1000);
  e.key = BlockKey{i * 0x9e3779b97f4a7c15ull, ~i};
  e.seq_id = static_cast<int64_t>(i % 7);
  e.request_id = static_cast<int64_t>(i / 3);
  e.n_tokens = static_cast<int64_t>(i * 3);
  e.n_bytes = static_cast<int64_t>(i * 5 + 1);
  return e;
}

bool is_event_number(const KvEvent& e, uint64_t i) {
  const KvEvent x = event_number(i);
  return e.t_us == x.t_us && e.type == x.type && e.from == x.from && e.to == x.to && e.slot == x.slot &&
         e.key == x.key && e.seq_id == x.seq_id && e.request_id == x.request_id && e.n_tokens == x.n_tokens &&
         e.n_bytes == x.n_bytes;
}

}  // namespace

TEST_CASE("event log: capacity rounds up to a power of two", "[core][kv_events]") {
  CHECK(KvEventLog(5).capacity() == 8);
  CHECK(KvEventLog(64).capacity() == 64);
  CHECK(KvEventLog(0).capacity() == 2);
  CHECK(KvEventLog().capacity() == 65536);
}

TEST_CASE("event log: a reader that keeps up gets every event in order", "[core][kv_events]") {
  KvEventLog log(16);
  std::vector<KvEvent> out;
  EventReadResult r = log.read_since(0, out);
  CHECK(r.n_read == 0);
  CHECK(r.cursor == 0);

  for (uint64_t i = 0; i < 10; ++i) log.append(event_number(i));
  CHECK(log.check_invariants());
  r = log.read_since(0, out);
  CHECK(r.n_read == 10);
  CHECK(r.n_lost == 0);
  CHECK(r.cursor == 10);
  REQUIRE(out.size() == 10);
  for (uint64_t i = 0; i < 10; ++i) CHECK(is_event_number(out[i], i));

  // Continuing from the cursor returns only what is new; the vector is appended to.
  for (uint64_t i = 10; i < 13; ++i) log.append(event_number(i));
  r = log.read_since(r.cursor, out);
  CHECK(r.n_read == 3);
  CHECK(r.cursor == 13);
  REQUIRE(out.size() == 13);
  CHECK(is_event_number(out[12], 12));
}

TEST_CASE("event log: wrap-around and exact loss counts when a reader falls behind", "[core][kv_events]") {
  KvEventLog log(8);
  for (uint64_t i = 0; i < 20; ++i) log.append(event_number(i));
  CHECK(log.head() == 20);
  CHECK(log.oldest() == 12);
  CHECK(log.check_invariants());

  std::vector<KvEvent> out;
  EventReadResult r = log.read_since(0, out);
  CHECK(r.n_lost == 12);  // events 0..11 were overwritten
  CHECK(r.n_read == 8);
  CHECK(r.cursor == 20);
  REQUIRE(out.size() == 8);
  for (uint64_t k = 0; k < 8; ++k) CHECK(is_event_number(out[k], 12 + k));

  // A cursor inside the window loses nothing.
  out.clear();
  r = log.read_since(15, out);
  CHECK(r.n_lost == 0);
  CHECK(r.n_read == 5);
  CHECK(is_event_number(out.front(), 15));

  // max_events bounds a read; the cursor resumes where it stopped.
  out.clear();
  r = log.read_since(13, out, 3);
  CHECK(r.n_read == 3);
  CHECK(r.cursor == 16);
  CHECK(is_event_number(out.back(), 15));

  // Exactly one lap behind plus one: one event lost.
  for (uint64_t i = 20; i < 29; ++i) log.append(event_number(i));
  out.clear();
  r = log.read_since(20, out);
  CHECK(r.n_lost == 1);
  CHECK(r.n_read == 8);
  CHECK(is_event_number(out.front(), 21));
}

TEST_CASE("event log: concurrent reader that keeps up loses nothing", "[core][kv_events]") {
  constexpr uint64_t k_n = 1 << 16;
  KvEventLog log(k_n);  // room for all: the reader can never be lapped
  std::atomic<bool> done{false};
  std::vector<KvEvent> got;
  uint64_t n_lost = 0;
  std::thread reader([&] {
    uint64_t cursor = 0;
    while (cursor < k_n) {
      const bool writer_done = done.load();
      const EventReadResult r = log.read_since(cursor, got, 1024);
      cursor = r.cursor;
      n_lost += r.n_lost;
      if (r.n_read == 0 && writer_done) break;
    }
  });
  for (uint64_t i = 0; i < k_n; ++i) log.append(event_number(i));
  done.store(true);
  reader.join();
  CHECK(n_lost == 0);
  REQUIRE(got.size() == k_n);
  bool all_ok = true;
  for (uint64_t i = 0; i < k_n; ++i) all_ok = all_ok && is_event_number(got[i], i);
  CHECK(all_ok);
}

TEST_CASE("event log: lapped readers never see a torn event and account for every index", "[core][kv_events]") {
  constexpr uint64_t k_n = 100'000;
  KvEventLog log(64);  // small: the writer laps the readers constantly
  std::atomic<bool> done{false};
  struct ReaderStats {
    uint64_t n_read = 0, n_lost = 0, n_torn = 0, n_disorder = 0, n_bad_accounting = 0, cursor = 0;
  };
  std::vector<ReaderStats> stats(2);
  std::atomic<int> n_ready{0};
  std::vector<std::thread> readers;
  for (auto& st : stats) {
    readers.emplace_back([&log, &done, &st, &n_ready] {
      std::vector<KvEvent> out;
      n_ready.fetch_add(1);
      int64_t last = -1;
      for (;;) {
        const bool writer_done = done.load();
        out.clear();
        const uint64_t before = st.cursor;
        const EventReadResult r = log.read_since(st.cursor, out);
        if (r.cursor - before != r.n_read + r.n_lost || out.size() != r.n_read) ++st.n_bad_accounting;
        for (const KvEvent& e : out) {
          const auto i = static_cast<uint64_t>(e.t_us);
          if (!is_event_number(e, i)) ++st.n_torn;
          if (e.t_us <= last || i < before || i >= r.cursor) ++st.n_disorder;
          last = e.t_us;
        }
        st.cursor = r.cursor;
        st.n_read += r.n_read;
        st.n_lost += r.n_lost;
        if (writer_done && st.cursor == log.head()) break;
      }
    });
  }
  while (n_ready.load() < 2) std::this_thread::yield();
  for (uint64_t i = 0; i < k_n; ++i) {
    log.append(event_number(i));
    if (i % 512 == 0) std::this_thread::yield();  // let the readers in between bursts
  }
  done.store(true);
  for (auto& t : readers) t.join();
  for (const ReaderStats& st : stats) {
    CHECK(st.n_torn == 0);
    CHECK(st.n_disorder == 0);
    CHECK(st.n_bad_accounting == 0);
    CHECK(st.cursor == k_n);
    CHECK(st.n_read + st.n_lost == k_n);
    CHECK(st.n_read > 0);
  }
}

TEST_CASE("event types: names are stable and parse back", "[core][kv_events]") {
  CHECK(event_type_name(KvEventType::block_hit) == "block_hit");
  CHECK(event_type_name(KvEventType::tier_usage) == "tier_usage");
  for (int i = 0; i < k_n_event_types; ++i) {
    KvEventType t{};
    REQUIRE(parse_event_type(event_type_name(static_cast<KvEventType>(i)), t));
    CHECK(static_cast<int>(t) == i);
  }
  KvEventType t{};
  CHECK_FALSE(parse_event_type("block_hat", t));
}

TEST_CASE("transfer_of: only moves between two different data tiers", "[core][kv_events]") {
  Tier from = Tier::none, to = Tier::none;
  int64_t n = 0;
  KvEvent e;
  e.type = KvEventType::block_promoted;
  e.from = Tier::t2;
  e.to = Tier::t0;
  e.n_bytes = 4096;
  REQUIRE(transfer_of(e, from, to, n));
  CHECK(from == Tier::t2);
  CHECK(to == Tier::t0);
  CHECK(n == 4096);
  e.to = Tier::t2;
  CHECK_FALSE(transfer_of(e, from, to, n));  // same tier
  e.type = KvEventType::block_evicted;
  e.from = Tier::t1;
  e.to = Tier::none;
  CHECK_FALSE(transfer_of(e, from, to, n));  // dropped, nothing moved
  e.type = KvEventType::block_hit;
  e.to = Tier::t0;
  CHECK_FALSE(transfer_of(e, from, to, n));  // not a transfer type
}

// The SQLite cold KV tier: round trips, restarts, the byte budget, corruption and a failing disk.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "storage/cold_store_test_helpers.h"
#include "storage/database.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;
using storage::ColdStoreOptions;
using storage::PayloadPlacement;
using storage::SqliteColdStore;
using test::key_of;
using test::open_store;

namespace {

std::vector<uint8_t> payload_of(int i, size_t n_bytes) {
  std::mt19937 rng(static_cast<unsigned>(i) + 100);
  std::vector<uint8_t> p(n_bytes);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  return p;
}

// Puts blocks [begin, end) of `n_bytes` each, chained, and waits until they are durable.
void put_blocks(SqliteColdStore& s, int begin, int end, size_t n_bytes) {
  for (int i = begin; i < end; ++i)
    REQUIRE(s.put(key_of(i), key_of(i - 1), kv::BlockKey{9, 9}, payload_of(i, n_bytes)));
  s.flush();
}

kv::ColdRead read_block(SqliteColdStore& s, int i, size_t n_bytes, bool* matches = nullptr) {
  std::vector<uint8_t> out(n_bytes);
  const kv::ColdRead r = s.read(key_of(i), out);
  if (matches) *matches = out == payload_of(i, n_bytes);
  return r;
}

std::vector<char> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Flips a byte inside block i's payload where it lies in the database file itself, as a bad
// sector would: SQLite does not know.
void flip_payload_in_db_file(const std::filesystem::path& db, int i, size_t n_bytes) {
  auto bytes = file_bytes(db);
  const auto payload = payload_of(i, n_bytes);
  const auto needle = std::vector<char>(payload.begin() + 1000, payload.begin() + 1032);
  auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  REQUIRE(at != bytes.end());
  at[5] = static_cast<char>(at[5] ^ 0x40);
  write_file(db, bytes);
}

std::string integrity(const std::filesystem::path& db) {
  auto d = storage::Database::open(db, {});
  REQUIRE(d.ok());
  auto st = d->prepare("PRAGMA integrity_check");
  REQUIRE(st.ok());
  auto row = st->step();
  REQUIRE((row.ok() && *row));
  return st->column_text(0);
}

}  // namespace

TEST_CASE("cold store: put, flush and read back, in both placements", "[storage]") {
  for (auto placement : {PayloadPlacement::blob, PayloadPlacement::files}) {
    kvc::test::TempDir tmp;
    ColdStoreOptions opt;
    opt.placement = placement;
    auto s = open_store(tmp.path(), opt);
    REQUIRE(s->put(key_of(0), {}, {9, 9}, payload_of(0, 4096)));
    CHECK(s->contains(key_of(0)));  // queued counts as stored
    bool same = false;
    CHECK(read_block(*s, 0, 4096, &same) == kv::ColdRead::ok);  // served from the queue
    CHECK(same);
    put_blocks(*s, 1, 3, 70000);
    auto st = s->stats();
    CHECK(st.n_blocks == 3);
    CHECK(st.n_pending == 0);
    CHECK(st.used_bytes == 4096 + 2 * 70000);
    CHECK(st.bytes_written == st.used_bytes);
    CHECK(st.healthy);
    CHECK(s->size_of(key_of(1)) == 70000);
    CHECK(read_block(*s, 1, 70000, &same) == kv::ColdRead::ok);
    CHECK(same);
    CHECK(read_block(*s, 7, 70000) == kv::ColdRead::missing);
    CHECK_FALSE(s->contains(key_of(7)));
    CHECK(s->put(key_of(1), {}, {}, payload_of(1, 70000)));  // again: no second copy
    s->flush();
    CHECK(s->stats().n_blocks == 3);
    CHECK(s->stats().bytes_read == 4096 + 70000);
    s->check_invariants();
    if (placement == PayloadPlacement::files) CHECK(std::filesystem::file_size(s->payload_path(key_of(1))) == 70000);
  }
}

TEST_CASE("cold store: blocks survive a restart", "[storage]") {
  for (auto placement : {PayloadPlacement::blob, PayloadPlacement::files}) {
    kvc::test::TempDir tmp;
    ColdStoreOptions opt;
    opt.placement = placement;
    { put_blocks(*open_store(tmp.path(), opt), 0, 5, 20000); }
    auto s = open_store(tmp.path(), opt);
    CHECK(s->stats().n_blocks == 5);
    CHECK(s->stats().used_bytes == 5 * 20000);
    for (int i = 0; i < 5; ++i) {
      bool same = false;
      CHECK(s->contains(key_of(i)));
      CHECK(read_block(*s, i, 20000, &same) == kv::ColdRead::ok);
      CHECK(same);
    }
    s->check_invariants();
  }
}

TEST_CASE("cold store: a batch window gathers puts into one commit, and flush and close do not wait it out",
          "[storage]") {
  using clock = std::chrono::steady_clock;
  kvc::test::TempDir tmp;
  ColdStoreOptions opt;
  opt.batch_window_ms = 60'000;  // far longer than the test: any wait for it shows
  {
    auto s = open_store(tmp.path(), opt);
    for (int i = 0; i < 8; ++i) {
      REQUIRE(s->put(key_of(i), key_of(i - 1), kv::BlockKey{9, 9}, payload_of(i, 4096)));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // arrivals spread, as while streaming
    }
    bool same = false;
    CHECK(read_block(*s, 3, 4096, &same) == kv::ColdRead::ok);  // served from the queue meanwhile
    CHECK(same);
    CHECK(s->extra_stats().n_batches == 0);
    const auto t0 = clock::now();
    s->flush();
    CHECK(clock::now() - t0 < std::chrono::seconds(20));
    CHECK(s->extra_stats().n_batches == 1);  // eight puts, one transaction
    // The first put woke the idle writer and the flush ended its window; the seven puts inside
    // the window did not wake it (a spurious wake-up or two allowed).
    CHECK(s->extra_stats().n_writer_wakeups <= 4);
    CHECK(s->stats().n_blocks == 8);
    REQUIRE(s->put(key_of(8), key_of(7), kv::BlockKey{9, 9}, payload_of(8, 4096)));
    const auto t1 = clock::now();
    s.reset();  // closing writes what is queued, without waiting out the window
    CHECK(clock::now() - t1 < std::chrono::seconds(20));
  }
  auto s = open_store(tmp.path(), opt);
  CHECK(s->stats().n_blocks == 9);
  s->check_invariants();

  ColdStoreOptions small = opt;  // a queue past half its limit is written at once
  small.max_queue_bytes = 3 * 4096;
  kvc::test::TempDir tmp2;
  auto q = open_store(tmp2.path(), small);
  REQUIRE(q->put(key_of(0), key_of(-1), kv::BlockKey{9, 9}, payload_of(0, 4096)));
  REQUIRE(q->put(key_of(1), key_of(0), kv::BlockKey{9, 9}, payload_of(1, 4096)));
  const auto t2 = clock::now();
  while (q->extra_stats().n_batches == 0 && clock::now() - t2 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(q->extra_stats().n_batches >= 1);
}

TEST_CASE("cold store: the byte budget collects the least recently used, across restarts", "[storage]") {
  kvc::test::TempDir tmp;
  ColdStoreOptions opt;
  opt.capacity_bytes = 4 * 1000;
  {
    auto s = open_store(tmp.path(), opt);
    put_blocks(*s, 0, 4, 1000);
    REQUIRE(read_block(*s, 0, 1000) == kv::ColdRead::ok);  // 0 is now the most recent
    put_blocks(*s, 4, 5, 1000);
    CHECK(s->stats().n_collected == 1);
    CHECK(s->stats().used_bytes == 4000);
    CHECK(s->contains(key_of(0)));
    CHECK_FALSE(s->contains(key_of(1)));
    s->check_invariants();
  }
  auto s = open_store(tmp.path(), opt);
  CHECK(s->stats().n_blocks == 4);
  put_blocks(*s, 5, 6, 1000);  // recency was kept on disk: 2 goes next, not 0
  CHECK_FALSE(s->contains(key_of(2)));
  CHECK(s->contains(key_of(0)));
  CHECK(s->contains(key_of(5)));
}

TEST_CASE("cold store: released blocks are deleted, durably, queued ones too", "[storage]") {
  kvc::test::TempDir tmp;
  {
    auto s = open_store(tmp.path());
    put_blocks(*s, 0, 4, 1000);
    const kv::BlockKey released[] = {key_of(1), key_of(3), key_of(99)};  // 99 was never stored
    s->release(released);
    CHECK_FALSE(s->contains(key_of(1)));
    CHECK_FALSE(s->contains(key_of(3)));
    CHECK(read_block(*s, 1, 1000) == kv::ColdRead::missing);
    CHECK(read_block(*s, 0, 1000) == kv::ColdRead::ok);
    CHECK(s->stats().n_released == 2);
    CHECK(s->stats().used_bytes == 2000);
    // A block released right after its put, queued or being written, never stays.
    REQUIRE(s->put(key_of(10), key_of(9), kv::BlockKey{9, 9}, payload_of(10, 1000)));
    const kv::BlockKey queued[] = {key_of(10)};
    s->release(queued);
    s->flush();
    CHECK_FALSE(s->contains(key_of(10)));
    s->check_invariants();
  }
  auto s = open_store(tmp.path());
  CHECK(s->stats().n_blocks == 2);
  CHECK_FALSE(s->contains(key_of(1)));
  CHECK_FALSE(s->contains(key_of(10)));
  CHECK(s->contains(key_of(2)));
  CHECK(integrity(tmp.path() / "kv_cache.db") == "ok");
}

TEST_CASE("cold store: a batched read equals single reads, in both placements", "[storage]") {
  for (PayloadPlacement placement : {PayloadPlacement::blob, PayloadPlacement::files}) {
    DYNAMIC_SECTION((placement == PayloadPlacement::blob ? "blob" : "files")) {
      kvc::test::TempDir tmp;
      ColdStoreOptions opt;
      opt.placement = placement;
      auto s = open_store(tmp.path(), opt);
      put_blocks(*s, 0, 6, 5000);
      // Stored blocks, one still queued, one never stored, one of the wrong size asked for.
      REQUIRE(s->put(key_of(6), key_of(5), kv::BlockKey{9, 9}, payload_of(6, 5000)));
      const std::vector<int> ids = {4, 0, 6, 77, 2, 5, 1, 3};
      std::vector<kv::BlockKey> keys;
      std::vector<std::vector<uint8_t>> bufs(ids.size(), std::vector<uint8_t>(5000));
      std::vector<std::span<uint8_t>> outs;
      for (size_t i = 0; i < ids.size(); ++i) {
        keys.push_back(key_of(ids[i]));
        outs.emplace_back(bufs[i]);
      }
      const auto got = s->read_many(keys, outs);
      REQUIRE(got.size() == ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        INFO("block " << ids[i]);
        bool same = false;
        const kv::ColdRead single = read_block(*s, ids[i], 5000, &same);
        CHECK(got[i] == single);
        if (ids[i] == 77) {
          CHECK(got[i] == kv::ColdRead::missing);
        } else {
          CHECK(got[i] == kv::ColdRead::ok);
          CHECK(same);
          CHECK(bufs[i] == payload_of(ids[i], 5000));
        }
      }
      CHECK(s->read_many({}, {}).empty());
      s->check_invariants();
    }
  }
}

TEST_CASE("cold store: a corrupt block in the middle of a batch is reported alone", "[storage]") {
  kvc::test::TempDir tmp;
  { put_blocks(*open_store(tmp.path()), 0, 5, 20000); }
  flip_payload_in_db_file(tmp.path() / "kv_cache.db", 2, 20000);
  auto s = open_store(tmp.path());
  std::vector<kv::BlockKey> keys;
  std::vector<std::vector<uint8_t>> bufs(5, std::vector<uint8_t>(20000));
  std::vector<std::span<uint8_t>> outs;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(key_of(i));
    outs.emplace_back(bufs[static_cast<size_t>(i)]);
  }
  const auto got = s->read_many(keys, outs);
  const std::vector<kv::ColdRead> want = {kv::ColdRead::ok, kv::ColdRead::ok, kv::ColdRead::corrupt, kv::ColdRead::ok,
                                          kv::ColdRead::ok};
  CHECK(got == want);
  for (int i : {0, 1, 3, 4}) CHECK(bufs[static_cast<size_t>(i)] == payload_of(i, 20000));
  CHECK(s->stats().n_corrupt == 1);
  CHECK_FALSE(s->contains(key_of(2)));  // deleted: recomputed, never served
  for (int i : {0, 1, 3, 4}) CHECK(s->contains(key_of(i)));
  s->flush();
  s->check_invariants();
}

TEST_CASE("cold store: a block larger than the queue limit is dropped and counted", "[storage]") {
  kvc::test::TempDir tmp;
  ColdStoreOptions opt;
  opt.max_queue_bytes = 1000;
  auto s = open_store(tmp.path(), opt);
  CHECK_FALSE(s->put(key_of(0), {}, {}, payload_of(0, 1001)));
  CHECK(s->extra_stats().n_dropped == 1);
  CHECK(s->stats().healthy);  // a full queue is not a sick disk
}

TEST_CASE("cold store: flipped bytes in the database are caught, the block deleted", "[storage]") {
  kvc::test::TempDir tmp;
  { put_blocks(*open_store(tmp.path()), 0, 3, 20000); }
  flip_payload_in_db_file(tmp.path() / "kv_cache.db", 1, 20000);
  {
    auto s = open_store(tmp.path());
    CHECK(read_block(*s, 1, 20000) == kv::ColdRead::corrupt);
    CHECK(s->stats().n_corrupt == 1);
    CHECK_FALSE(s->contains(key_of(1)));
    CHECK(read_block(*s, 1, 20000) == kv::ColdRead::missing);
    bool same = false;
    CHECK(read_block(*s, 0, 20000, &same) == kv::ColdRead::ok);
    CHECK(same);
    s->check_invariants();
  }
  auto s = open_store(tmp.path());  // the deletion was durable
  CHECK_FALSE(s->contains(key_of(1)));
  CHECK(s->stats().n_blocks == 2);
  CHECK(integrity(tmp.path() / "kv_cache.db") == "ok");
}

TEST_CASE("cold store: flipped and truncated payload files are caught", "[storage]") {
  kvc::test::TempDir tmp;
  ColdStoreOptions opt;
  opt.placement = PayloadPlacement::files;
  auto s = open_store(tmp.path(), opt);
  put_blocks(*s, 0, 4, 20000);
  const auto flipped = s->payload_path(key_of(1));
  auto bytes = file_bytes(flipped);
  bytes[12345] = static_cast<char>(bytes[12345] ^ 1);
  write_file(flipped, bytes);
  std::filesystem::resize_file(s->payload_path(key_of(2)), 19999);
  std::filesystem::remove(s->payload_path(key_of(3)));

  CHECK(read_block(*s, 1, 20000) == kv::ColdRead::corrupt);
  CHECK(read_block(*s, 2, 20000) == kv::ColdRead::corrupt);
  CHECK(read_block(*s, 3, 20000) == kv::ColdRead::corrupt);  // indexed but gone: never served
  CHECK(read_block(*s, 0, 20000) == kv::ColdRead::ok);
  CHECK(s->stats().n_corrupt == 3);
  s->flush();
  CHECK_FALSE(std::filesystem::exists(flipped));
  CHECK_FALSE(std::filesystem::exists(s->payload_path(key_of(2))));
  // The block is recomputed and stored again under the same key.
  put_blocks(*s, 1, 2, 20000);
  bool same = false;
  CHECK(read_block(*s, 1, 20000, &same) == kv::ColdRead::ok);
  CHECK(same);
  s->check_invariants();
}

TEST_CASE("cold store: a full disk makes it unhealthy, not broken", "[storage]") {
  kvc::test::TempDir tmp;
  ColdStoreOptions opt;
  opt.max_db_bytes = 1 << 20;  // the database cannot grow past 1 MiB: SQLITE_FULL
  {
    auto s = open_store(tmp.path(), opt);
    put_blocks(*s, 0, 2, 64 * 1024);
    REQUIRE(s->stats().healthy);
    for (int i = 2; i < 40; ++i) s->put(key_of(i), {}, {}, payload_of(i, 64 * 1024));
    s->flush();
    const auto st = s->stats();
    CHECK_FALSE(st.healthy);
    CHECK_THAT(st.warning, Catch::Contains("disk is full") && Catch::Contains("in RAM"));
    CHECK_FALSE(s->put(key_of(50), {}, {}, payload_of(50, 1000)));
    CHECK(s->extra_stats().n_dropped > 0);
    bool same = false;
    CHECK(read_block(*s, 0, 64 * 1024, &same) == kv::ColdRead::ok);  // what exists is still served
    CHECK(same);
    s->check_invariants();
  }
  CHECK(integrity(tmp.path() / "kv_cache.db") == "ok");
  auto s = open_store(tmp.path());
  bool same = false;
  CHECK(read_block(*s, 1, 64 * 1024, &same) == kv::ColdRead::ok);
  CHECK(same);
}

TEST_CASE("cold store: read-only serves what exists and refuses puts", "[storage]") {
  kvc::test::TempDir tmp;
  { put_blocks(*open_store(tmp.path()), 0, 2, 5000); }
  ColdStoreOptions opt;
  opt.read_only = true;
  auto s = open_store(tmp.path(), opt);
  const auto st = s->stats();
  CHECK_FALSE(st.healthy);
  CHECK_THAT(st.warning, Catch::Contains("read-only") && Catch::Contains("in RAM"));
  CHECK_FALSE(s->put(key_of(5), {}, {}, payload_of(5, 5000)));
  bool same = false;
  CHECK(read_block(*s, 1, 5000, &same) == kv::ColdRead::ok);
  CHECK(same);
  s->flush();  // returns at once: nothing to write
}

TEST_CASE("cold store: a data dir that cannot be made is an actionable error", "[storage]") {
  kvc::test::TempDir tmp;
  { std::ofstream(tmp.file("blocker")) << "x"; }
  auto s = SqliteColdStore::open(tmp.path() / "blocker" / "sub");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("--data-dir"));
}

TEST_CASE("cold store: concurrent puts and reads stay consistent", "[storage]") {
  kvc::test::TempDir tmp;
  ColdStoreOptions opt;
  opt.capacity_bytes = 40 * 2000;
  auto s = open_store(tmp.path(), opt);
  std::thread writer([&] {
    for (int i = 0; i < 200; ++i) s->put(key_of(i), {}, {}, payload_of(i, 2000));
  });
  int n_bad = 0;
  for (int round = 0; round < 400; ++round) {
    const int i = round % 200;
    bool same = false;
    const auto r = read_block(*s, i, 2000, &same);
    if (r == kv::ColdRead::corrupt || (r == kv::ColdRead::ok && !same)) ++n_bad;
  }
  writer.join();
  s->flush();
  CHECK(n_bad == 0);
  CHECK(s->stats().used_bytes <= opt.capacity_bytes);
  s->check_invariants();
}

// A real write failure from the kernel, which works as root too: a child process whose file
// size limit (RLIMIT_FSIZE) makes payload file writes fail with EFBIG, as on a full disk.
TEST_CASE("cold store: payload files that cannot be written make it unhealthy", "[storage]") {
  kvc::test::TempDir tmp;
  ColdStoreOptions opt;
  opt.placement = PayloadPlacement::files;
  { put_blocks(*open_store(tmp.path(), opt), 0, 2, 64 * 1024); }
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{32 * 1024, 32 * 1024};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(10);
    auto s = SqliteColdStore::open(tmp.path(), opt);
    if (!s) ::_exit(11);
    for (int i = 2; i < 6; ++i) (*s)->put(key_of(i), {}, {}, payload_of(i, 64 * 1024));
    (*s)->flush();
    const auto st = (*s)->stats();
    if (st.healthy) ::_exit(12);
    if (st.warning.find("cold KV cache disabled") == std::string::npos) ::_exit(13);
    if (st.warning.find("in RAM") == std::string::npos) ::_exit(14);
    if (st.warning.find("size limit") == std::string::npos) ::_exit(17);  // EFBIG, not "disk full"
    if ((*s)->put(key_of(9), {}, {}, payload_of(9, 100))) ::_exit(15);
    std::vector<uint8_t> out(64 * 1024);
    if ((*s)->read(key_of(1), out) != kv::ColdRead::ok || out != payload_of(1, 64 * 1024)) ::_exit(16);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(integrity(tmp.path() / "kv_cache.db") == "ok");
  auto s = open_store(tmp.path(), opt);
  CHECK(s->stats().n_blocks == 2);  // nothing half-written was indexed
  bool same = false;
  CHECK(read_block(*s, 0, 64 * 1024, &same) == kv::ColdRead::ok);
  CHECK(same);
  CHECK_FALSE(s->contains(key_of(2)));
}

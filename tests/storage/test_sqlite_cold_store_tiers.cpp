// The tier store on the real SQLite cold store (both placements): a byte budget so small that it
// collects blocks the index still lists on T2, and writes the kernel refuses (RLIMIT_FSIZE) for
// blocks the index already lists there. The cache never serves a hit it cannot read: it
// recomputes, says so (n_recomputed_bad), and its counters add up.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "core/kv/kv_cache.h"
#include "core/model/session.h"
#include "storage/cold_store_test_helpers.h"
#include "storage/database.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;
using storage::ColdStoreOptions;
using storage::PayloadPlacement;
using storage::SqliteColdStore;
using test::tokens_of;

namespace {

constexpr int64_t k_b = 16;  // tokens per block (SessionOptions' default)

std::vector<float> fresh_logits(const model::Model& m, std::span<const int32_t> tokens) {
  auto s = model::Session::create(m, 256);
  if (!s) throw std::runtime_error(s.error().message);
  auto l = s->evaluate(tokens);
  if (!l) throw std::runtime_error(l.error().message);
  return {l->begin(), l->end()};
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return d;
}

// The chain keys of the full blocks of `tokens`.
std::vector<kv::BlockKey> chain_of(const kv::KvCache& c, std::span<const int32_t> tokens) {
  std::vector<kv::BlockKey> keys;
  kv::BlockKey k = c.fingerprint();
  for (size_t p = 0; p + k_b <= tokens.size(); p += k_b) keys.push_back(k = kv::chain_key(k, tokens.subspan(p, k_b)));
  return keys;
}

int64_t t2_listed(const kv::KvCache& c) { return c.index().stats().n_blocks_on_tier[kv::tier_index(kv::Tier::t2)]; }

int64_t sum3(const int64_t (&a)[3]) { return a[0] + a[1] + a[2]; }
int64_t sum3(const std::array<int64_t, 3>& a) { return a[0] + a[1] + a[2]; }

// PRAGMA integrity_check of a SQLite file: "ok", or what it found.
std::string integrity(const std::filesystem::path& db) {
  storage::DatabaseOptions o;
  o.mode = storage::OpenMode::read_write;
  auto d = storage::Database::open(db, o);
  if (!d) return d.error().message;
  auto st = d->prepare("PRAGMA integrity_check");
  if (!st) return st.error().message;
  auto row = st->step();
  return row && *row ? st->column_text(0) : "no result";
}

const char* name_of(PayloadPlacement p) { return p == PayloadPlacement::blob ? "blob" : "files"; }

int64_t block_bytes_of(const model::Model& m) {
  model::SessionOptions o;
  o.n_ctx = 256;
  auto probe = model::Session::create(m, o);
  REQUIRE(probe.ok());
  return probe->cache().layout().block_bytes;
}

// ---- For the forked children: checks that record instead of throwing (Catch's assertions
// belong to the parent), and a report the parent prints.
struct ChildLog {
  std::ostringstream out;
  int n_failed = 0;
  void check(bool ok, const char* what, int line) {
    if (!ok) {
      ++n_failed;
      out << "FAILED line " << line << ": " << what << '\n';
    }
  }
};
#define CHILD_CHECK(log, cond) (log).check(static_cast<bool>(cond), #cond, __LINE__)

void set_file_size_limit(rlim_t bytes) {
  rlimit lim{};
  ::getrlimit(RLIMIT_FSIZE, &lim);
  lim.rlim_cur = bytes == RLIM_INFINITY ? lim.rlim_max : bytes;  // the hard limit stays: raised again later
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(90);
}

// Holds the database's write lock (BEGIN IMMEDIATE on a second connection) while alive: the
// store's writer waits in SQLite's busy handler, so the blocks it has taken stay queued.
class WriteLock {
 public:
  explicit WriteLock(const std::filesystem::path& db) {
    storage::DatabaseOptions o;
    o.mode = storage::OpenMode::read_write;
    auto d = storage::Database::open(db, o);
    if (!d || !d->exec("BEGIN IMMEDIATE").ok()) ::_exit(91);
    db_.emplace(std::move(*d));
  }
  void release() {
    if (db_) (void)db_->exec("ROLLBACK");
    db_.reset();
  }
  ~WriteLock() { release(); }

 private:
  std::optional<storage::Database> db_;
};

// The refused-writes scenario, in a child process (so that the file size limit is its own).
// Every step's expectation is checked in the child; the parent reads the log.
int refused_writes_child(PayloadPlacement placement, const std::filesystem::path& dir, ChildLog& log) {
  test::LoadedModel f;
  ColdStoreOptions opt;
  opt.placement = placement;
  opt.retry_after_ms = 300;
  const auto retry_due = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(opt.retry_after_ms + 100)); };
  auto opened = SqliteColdStore::open(dir, opt);
  if (!opened) return 70;
  SqliteColdStore& cold = **opened;
  model::SessionOptions o;
  o.n_ctx = 256;
  o.cold = &cold;
  auto made = model::Session::create(*f.m, o);
  if (!made) return 71;
  model::Session& s = *made;
  kv::KvCache& c = s.cache();
  auto prompt = [](int salt) { return tokens_of(40, salt); };  // 2 full blocks and a tail
  auto longer = [](int salt) { return tokens_of(56, salt); };  // the same 2, one more, a tail

  // 1. Healthy: P1's blocks are written behind, stored, and reported written.
  CHILD_CHECK(log, s.evaluate(prompt(1)).ok());
  cold.flush();
  c.emit_tier_usage();
  CHILD_CHECK(log, cold.stats().healthy && cold.stats().n_blocks == 2);
  CHILD_CHECK(log, c.counters().n_cold_writes_queued == 2 && c.counters().n_cold_writes_done == 2);

  // 2. P2's blocks are queued while the writer waits for the lock; the cache demotes them to T2
  //    (the store says it holds them: queued), then the kernel refuses their write.
  {
    WriteLock lock(cold.db_path());
    CHILD_CHECK(log, s.evaluate(prompt(2)).ok());
    s.clear();
    c.demote_all_unpinned(kv::Tier::t2);
    CHILD_CHECK(log, t2_listed(c) == 4);
    CHILD_CHECK(log, cold.stats().n_pending == 2);
    set_file_size_limit(1);
  }  // the writer takes the lock, writes, and gets EFBIG
  cold.flush();
  const kv::ColdStoreStats refused = cold.stats();
  set_file_size_limit(RLIM_INFINITY);
  CHILD_CHECK(log, !refused.healthy);
  CHILD_CHECK(log, refused.n_pending == 0 && refused.n_blocks == 2);
  CHILD_CHECK(log, refused.warning.find("size limit") != std::string::npos);
  CHILD_CHECK(log, cold.extra_stats().n_write_failures == 1);
  log.out << "warning " << refused.warning << '\n';
  CHILD_CHECK(log, t2_listed(c) == 4);  // the index still lists P2's blocks on T2

  // 3. A demotion's own write is lost too. P3's write-behind is queued once the store takes
  //    puts again and fails (P3 stays on T0 only); then its demotion queues it again (listed on
  //    T2: queued), and that write fails as well.
  retry_due();
  {
    WriteLock lock(cold.db_path());
    CHILD_CHECK(log, s.evaluate(prompt(3)).ok());
    CHILD_CHECK(log, cold.stats().n_pending == 2);
    set_file_size_limit(1);
  }
  cold.flush();
  set_file_size_limit(RLIM_INFINITY);
  CHILD_CHECK(log, cold.extra_stats().n_write_failures == 2);
  CHILD_CHECK(log, t2_listed(c) == 4);  // P3 is on T0 only
  retry_due();
  {
    WriteLock lock(cold.db_path());
    s.clear();
    c.demote_all_unpinned(kv::Tier::t2);  // the store takes P3's blocks (queued): listed on T2
    CHILD_CHECK(log, cold.stats().n_pending == 2);
    CHILD_CHECK(log, t2_listed(c) == 6);
    set_file_size_limit(1);
  }
  cold.flush();
  const bool healthy_after_third = cold.stats().healthy;
  set_file_size_limit(RLIM_INFINITY);
  CHILD_CHECK(log, !healthy_after_third);
  CHILD_CHECK(log, cold.extra_stats().n_write_failures == 3);
  CHILD_CHECK(log, cold.stats().n_blocks == 2);

  // 4. Space is back: the store recovers, and every block written from now on is reported
  //    written (cold_write_done), none swallowed by the lost writes before.
  retry_due();
  c.emit_tier_usage();
  {
    const kv::KvCounters before = c.counters();
    CHILD_CHECK(log, s.evaluate(tokens_of(70, 4)).ok());  // 4 full blocks, written behind
    cold.flush();
    c.emit_tier_usage();
    CHILD_CHECK(log, cold.stats().healthy);
    CHILD_CHECK(log, cold.extra_stats().n_recoveries == 3);
    const kv::KvCounters& after = c.counters();
    log.out << "write-behind after recovery: queued " << after.n_cold_writes_queued - before.n_cold_writes_queued
            << ", reported done " << after.n_cold_writes_done - before.n_cold_writes_done << '\n';
    CHILD_CHECK(log, after.n_cold_writes_queued - before.n_cold_writes_queued == 4);
    CHILD_CHECK(log, after.n_cold_writes_done - before.n_cold_writes_done == 4);
    CHILD_CHECK(log, c.telemetry().check_invariants().ok());
  }

  // 5. P2 and P3 again: listed, but the store lost them: recomputed, reported, never served.
  for (int salt : {2, 3}) {
    const auto all = longer(salt);
    const auto want = fresh_logits(*f.m, all);
    s.clear();
    const kv::KvCounters before = c.counters();
    auto got = s.evaluate(all);
    CHILD_CHECK(log, got.ok());
    if (got) CHILD_CHECK(log, max_abs_diff(*got, want) == 0.0);
    const kv::PrefixInfo& p = s.last_prefix();
    log.out << "P" << salt << ": cached " << p.n_cached << ", recomputed as lost " << p.n_recomputed_bad << '\n';
    CHILD_CHECK(log, p.n_cached == 0);
    CHILD_CHECK(log, p.n_recomputed_bad == k_b);  // the first lost block ends the prefix
    CHILD_CHECK(log, s.n_evaluated() == 56);
    const kv::KvCounters& after = c.counters();
    CHILD_CHECK(log, after.n_missed_tokens - before.n_missed_tokens == 56);
    CHILD_CHECK(log, sum3(after.n_hit_tokens) == sum3(before.n_hit_tokens));
    CHILD_CHECK(log, after.n_promotions[2][0] == before.n_promotions[2][0]);
    CHILD_CHECK(log, after.n_corrupt_blocks == before.n_corrupt_blocks);  // lost is not corrupt
    CHILD_CHECK(log, c.check_invariants().ok());
  }
  // P1 was stored before the failures: served from T2, all of it.
  {
    const auto all = longer(1);
    const auto want = fresh_logits(*f.m, all);
    s.clear();
    c.demote_all_unpinned(kv::Tier::t2);
    const kv::KvCounters before = c.counters();
    auto got = s.evaluate(all);
    CHILD_CHECK(log, got.ok());
    if (got) CHILD_CHECK(log, max_abs_diff(*got, want) == 0.0);
    const kv::PrefixInfo& p = s.last_prefix();
    CHILD_CHECK(log, p.n_cached == 2 * k_b && p.n_from_tier[2] == 2 * k_b);
    CHILD_CHECK(log, p.n_recomputed_bad == 0);
    CHILD_CHECK(log, c.counters().n_promotions[2][0] - before.n_promotions[2][0] == 2);
    CHILD_CHECK(log, c.counters().n_hit_tokens[2] - before.n_hit_tokens[2] == 2 * k_b);
  }
  cold.flush();
  CHILD_CHECK(log, c.check_invariants().ok());
  cold.check_invariants();
  return log.n_failed == 0 ? 0 : 1;
}

}  // namespace

TEST_CASE("cold store tiers: a SQLite store that collects blocks the index lists on T2 is recomputed past them",
          "[storage][kv]") {
  for (const PayloadPlacement placement : {PayloadPlacement::blob, PayloadPlacement::files}) {
    DYNAMIC_SECTION("placement " << name_of(placement)) {
      test::LoadedModel f;
      test::TempDir tmp;
      const int64_t bb = block_bytes_of(*f.m);
      ColdStoreOptions opt;
      opt.placement = placement;
      opt.capacity_bytes = 3 * bb + bb / 2;  // room for three blocks: collects the least recently used
      auto cold = test::open_store(tmp.path(), opt);
      model::SessionOptions o;
      o.n_ctx = 256;
      o.cold = cold.get();
      auto s = model::Session::create(*f.m, o);
      REQUIRE(s.ok());
      kv::KvCache& c = s->cache();
      const auto a = tokens_of(40, 1), b = tokens_of(40, 2);  // 2 full blocks and a tail each
      const auto a_keys = chain_of(c, a);

      // A's two blocks on disk, listed on T2; A0 read back (a hit) so that A1 is the oldest.
      REQUIRE(s->evaluate(a).ok());
      cold->flush();
      REQUIRE(cold->stats().n_blocks == 2);
      s->clear();
      c.demote_all_unpinned(kv::Tier::t2);
      REQUIRE(s->evaluate(std::span<const int32_t>(a).first(20)).ok());
      REQUIRE(s->last_prefix().n_from_tier[2] == k_b);
      // B's blocks are written: the budget collects A1, which the index still lists on T2.
      s->clear();
      REQUIRE(s->evaluate(b).ok());
      cold->flush();
      s->clear();
      c.demote_all_unpinned(kv::Tier::t2);
      REQUIRE(c.check_invariants().ok());
      cold->check_invariants();
      CHECK(t2_listed(c) == 4);
      CHECK(cold->stats().n_blocks == 3);
      CHECK(cold->stats().n_collected == 1);
      CHECK(cold->contains(a_keys[0]));
      REQUIRE_FALSE(cold->contains(a_keys[1]));

      // A, longer: A0 from disk, A1 recomputed (and everything after it), the same logits.
      const auto all = tokens_of(56, 1);
      const auto want = fresh_logits(*f.m, all);
      const kv::KvCounters before = c.counters();
      auto got = s->evaluate(all);
      REQUIRE(got.ok());
      CHECK(max_abs_diff(*got, want) == 0.0);
      const kv::PrefixInfo& p = s->last_prefix();
      CHECK(p.n_cached == k_b);
      CHECK(p.n_from_tier[2] == k_b);
      CHECK(sum3(p.n_from_tier) == p.n_cached);
      CHECK(p.n_recomputed_bad == k_b);
      CHECK(s->n_evaluated() == 56 - k_b);
      const kv::KvCounters& after = c.counters();
      CHECK(after.n_promotions[2][0] - before.n_promotions[2][0] == 1);
      CHECK(after.n_hit_tokens[2] - before.n_hit_tokens[2] == k_b);
      CHECK(sum3(after.n_hit_tokens) - sum3(before.n_hit_tokens) == p.n_cached);
      CHECK(after.n_missed_tokens - before.n_missed_tokens == 56 - k_b);
      CHECK(after.n_corrupt_blocks == before.n_corrupt_blocks);  // collected is not corrupt
      REQUIRE(c.check_invariants().ok());

      // The recomputed A1 is written again; a fresh process (an empty index) finds the chain on
      // disk as far as the store kept it, and serves exactly that.
      cold->flush();
      CHECK(cold->contains(a_keys[1]));
      cold->check_invariants();
      s = model::Session::create(*f.m, 256);  // drops the cache before the store
      REQUIRE(s.ok());
      cold.reset();
      cold = test::open_store(tmp.path(), opt);
      o.cold = cold.get();
      auto restarted = model::Session::create(*f.m, o);
      REQUIRE(restarted.ok());
      const auto keys = chain_of(restarted->cache(), all);
      int64_t n_on_disk = 0;
      while (n_on_disk < 3 && cold->contains(keys[static_cast<size_t>(n_on_disk)])) ++n_on_disk;
      auto again = restarted->evaluate(all);
      REQUIRE(again.ok());
      CHECK(max_abs_diff(*again, want) == 0.0);
      CHECK(restarted->last_prefix().n_cached == k_b * n_on_disk);
      CHECK(restarted->last_prefix().n_from_tier[2] == k_b * n_on_disk);
      CHECK(restarted->last_prefix().n_recomputed_bad == 0);
      REQUIRE(restarted->cache().check_invariants().ok());
      WARN(name_of(placement) << ": index listed 4 blocks on T2, the store kept 3; served 1 from disk and "
                              << "recomputed 40 tokens; after a restart " << n_on_disk << " of 3 from disk");
    }
  }
}

TEST_CASE("cold store tiers: writes the kernel refuses for blocks the index lists on T2 are recomputed, counted once",
          "[storage][kv]") {
  for (const PayloadPlacement placement : {PayloadPlacement::blob, PayloadPlacement::files}) {
    DYNAMIC_SECTION("placement " << name_of(placement)) {
      test::TempDir tmp;
      const auto report = tmp.path() / "report.txt";
      std::fflush(nullptr);
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
        ChildLog log;
        int rc = 0;
        try {
          rc = refused_writes_child(placement, tmp.path() / "kv", log);
        } catch (...) { rc = 80; }
        std::ofstream(report) << log.out.str();
        ::_exit(rc);
      }
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      std::ostringstream child_log;
      child_log << std::ifstream(report).rdbuf();
      INFO(child_log.str());
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
      CHECK(integrity(tmp.path() / "kv" / "kv_cache.db") == "ok");
    }
  }
}

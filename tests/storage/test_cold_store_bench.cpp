// Measurement behind the payload placement choice (run by hand: kvc_tests "[storage-bench]").
// Prints write cost per block and restore bandwidth, cold (page cache dropped) and warm, block
// by block (read) and batched as the cache promotes a run (read_many, 8 MiB batches).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "storage/database.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Writes back and drops every file under `dir` from the page cache, so reads come from the disk.
void drop_cache(const std::filesystem::path& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

struct Figures {
  double write_ms_per_block, write_mb_s, cold_mb_s, warm_mb_s, warm_batch_mb_s;
};

Figures run_once(storage::PayloadPlacement placement, size_t block_bytes, std::mt19937_64& rng) {
  const int64_t total_bytes = int64_t{64} << 20;
  {
    {
      kvc::test::TempDir tmp;
      const int n_blocks = static_cast<int>(total_bytes / static_cast<int64_t>(block_bytes));
      std::vector<uint8_t> payload(block_bytes);
      std::vector<kv::BlockKey> keys;
      storage::ColdStoreOptions opt;
      opt.placement = placement;
      opt.max_queue_bytes = total_bytes * 2;
      double write_s;
      {
        auto store = storage::SqliteColdStore::open(tmp.path(), opt);
        REQUIRE(store.ok());
        const auto t0 = Clock::now();
        kv::BlockKey parent;
        for (int i = 0; i < n_blocks; ++i) {
          for (size_t j = 0; j < block_bytes; j += 8) payload[j] = static_cast<uint8_t>(rng());
          const int32_t tok = i;
          const kv::BlockKey key = kv::chain_key(parent, std::span(&tok, 1));
          REQUIRE((*store)->put(key, parent, {}, payload));
          keys.push_back(key);
          parent = key;
        }
        (*store)->flush();
        write_s = seconds_since(t0);
        REQUIRE((*store)->stats().n_blocks == n_blocks);
      }
      drop_cache(tmp.path());
      auto store = storage::SqliteColdStore::open(tmp.path(), opt);
      REQUIRE(store.ok());
      double read_s[2];
      for (double& s : read_s) {
        const auto t0 = Clock::now();
        for (const auto& k : keys) REQUIRE((*store)->read(k, payload) == kv::ColdRead::ok);
        s = seconds_since(t0);
      }
      // Batched: what KvCache's promotion of a T2 run does (kv_cache.cpp, k_cold_batch_bytes).
      const size_t per_batch = std::max<size_t>(1, (size_t{8} << 20) / block_bytes);
      std::vector<uint8_t> batch(per_batch * block_bytes);
      const auto t_batch = Clock::now();
      for (size_t begin = 0; begin < keys.size(); begin += per_batch) {
        const size_t n = std::min(per_batch, keys.size() - begin);
        std::vector<std::span<uint8_t>> outs;
        for (size_t i = 0; i < n; ++i) outs.push_back(std::span(batch).subspan(i * block_bytes, block_bytes));
        const auto got = (*store)->read_many(std::span(keys).subspan(begin, n), outs);
        REQUIRE(std::count(got.begin(), got.end(), kv::ColdRead::ok) == static_cast<std::ptrdiff_t>(n));
      }
      const double batch_s = seconds_since(t_batch);
      const double mb = static_cast<double>(total_bytes) / 1e6;
      return {1e3 * write_s / n_blocks, mb / write_s, mb / read_s[0], mb / read_s[1], mb / batch_s};
    }
  }
}

}  // namespace

// Runs are interleaved and repeated (the machine is shared); the median of each figure is printed.
TEST_CASE("cold store bench: blob vs files placement", "[.storage-bench]") {
  constexpr int k_repeats = 5;
  std::mt19937_64 rng(1);
  for (size_t block_bytes : {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20}) {
    std::vector<Figures> runs[2];
    for (int r = 0; r < k_repeats; ++r) {
      for (int p = 0; p < 2; ++p) {
        runs[p].push_back(
            run_once(p == 0 ? storage::PayloadPlacement::blob : storage::PayloadPlacement::files, block_bytes, rng));
      }
    }
    for (int p = 0; p < 2; ++p) {
      auto median = [&](double Figures::*f) {
        std::vector<double> v;
        for (const auto& x : runs[p]) v.push_back(x.*f);
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::printf(
          "placement=%-5s block=%5zu KiB  write %6.3f ms/block %7.1f MB/s  restore cold %7.1f MB/s  warm %7.1f MB/s"
          "  warm batched %7.1f MB/s\n",
          p == 0 ? "blob" : "files", block_bytes >> 10, median(&Figures::write_ms_per_block),
          median(&Figures::write_mb_s), median(&Figures::cold_mb_s), median(&Figures::warm_mb_s),
          median(&Figures::warm_batch_mb_s));
    }
  }
}

// What one small committed transaction costs in WAL mode, per synchronous setting: the basis
// for committing every streamed delta (NORMAL) and every user message (FULL).
TEST_CASE("storage bench: commit cost in WAL mode", "[.storage-bench]") {
  for (auto sync : {storage::SyncMode::normal, storage::SyncMode::full}) {
    kvc::test::TempDir tmp;
    storage::DatabaseOptions opt;
    opt.sync = sync;
    auto db = storage::Database::open(tmp.file("c.db"), opt);
    REQUIRE(db.ok());
    REQUIRE(db->enable_wal().ok());
    REQUIRE(db->exec("CREATE TABLE m(id INTEGER PRIMARY KEY, text TEXT)").ok());
    REQUIRE(db->exec("INSERT INTO m VALUES(1, '')").ok());
    constexpr int k_commits = 300;
    std::vector<double> ms;
    for (int i = 0; i < k_commits; ++i) {
      const auto t0 = Clock::now();
      auto tx = storage::Transaction::begin(*db);
      REQUIRE(tx.ok());
      REQUIRE(db->exec("UPDATE m SET text = text || 'tok ' WHERE id = 1").ok());
      REQUIRE(tx->commit().ok());
      ms.push_back(1e3 * seconds_since(t0));
    }
    std::sort(ms.begin(), ms.end());
    std::printf("synchronous=%-6s commit median %.3f ms  p90 %.3f ms\n",
                sync == storage::SyncMode::full ? "FULL" : "NORMAL", ms[ms.size() / 2], ms[ms.size() * 9 / 10]);
  }
}

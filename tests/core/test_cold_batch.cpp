// Batched T2 reads: ColdRunReader, and the cache promoting a run of disk blocks through read_many.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/backend/backend.h"
#include "core/kv/cold_store.h"
#include "core/kv/stream_keys.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

const kv::BlockKey k_fp{0x1234, 0x5678};

// Counts how the cache reaches the store: single reads or batches.
class CountingStore final : public kv::ColdStore {
 public:
  explicit CountingStore(kv::MemoryColdStore& inner) : inner_(inner) {}
  bool put(const kv::BlockKey& k, const kv::BlockKey& p, const kv::BlockKey& f, std::span<const uint8_t> b) override {
    return inner_.put(k, p, f, b);
  }
  bool contains(const kv::BlockKey& k) const override { return inner_.contains(k); }
  kv::ColdRead read(const kv::BlockKey& k, std::span<uint8_t> out) override {
    ++n_reads;
    return inner_.read(k, out);
  }
  std::vector<kv::ColdRead> read_many(std::span<const kv::BlockKey> keys,
                                      std::span<const std::span<uint8_t>> outs) override {
    batch_sizes.push_back(keys.size());
    return inner_.read_many(keys, outs);
  }
  void release(std::span<const kv::BlockKey> keys) override { inner_.release(keys); }
  kv::ColdStoreStats stats() const override { return inner_.stats(); }
  void flush() override {}

  int n_reads = 0;
  std::vector<size_t> batch_sizes;

 private:
  kv::MemoryColdStore& inner_;
};

std::vector<int32_t> tokens_of(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(1 + (i * 7919) % 31000);
  return t;
}

}  // namespace

TEST_CASE("cold run reader: one read_many per batch, payloads in run order", "[core][kv]") {
  kv::MemoryColdStore inner(1 << 20);
  CountingStore cold(inner);
  std::vector<kv::BlockKey> keys;
  for (uint64_t i = 0; i < 5; ++i) {
    keys.push_back(kv::BlockKey{i + 1, 0});
    REQUIRE(cold.put(keys.back(), {}, k_fp, std::vector<uint8_t>(64, static_cast<uint8_t>(i))));
  }
  REQUIRE(inner.corrupt_for_test(keys[2]));
  std::vector<uint8_t> buffer;
  kv::ColdRunReader run(cold, keys, 64, 2 * 64, buffer);  // batches of 2 blocks
  for (size_t i = 0; i < keys.size(); ++i) {
    std::span<const uint8_t> p;
    const kv::ColdRead r = run.read(keys[i], p);
    INFO("block " << i);
    if (i == 2) {
      CHECK(r == kv::ColdRead::corrupt);  // reported for it alone
      continue;
    }
    REQUIRE(r == kv::ColdRead::ok);
    REQUIRE(p.size() == 64);
    CHECK(std::all_of(p.begin(), p.end(), [&](uint8_t b) { return b == i; }));
  }
  CHECK(cold.batch_sizes == std::vector<size_t>{2, 2, 1});
  CHECK(cold.n_reads == 0);
  CHECK(inner.stats().n_corrupt == 1);
  CHECK(inner.contains(keys[3]));
}

TEST_CASE("kv cache: a run of T2 blocks is promoted with one batched read", "[core][kv]") {
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("tiny-gqa-q8_0.gguf"), *be);
  REQUIRE(m.ok());
  kv::MemoryColdStore inner(64 << 20);
  CountingStore cold(inner);
  model::SessionOptions o;
  o.n_ctx = 256;
  o.cold = &cold;
  const auto all = tokens_of(100);  // 6 full blocks of 16 and a tail
  const auto history = std::span<const int32_t>(all).first(96);

  auto fresh = model::Session::create(**m, o);
  REQUIRE(fresh.ok());
  auto want = fresh->evaluate(all);
  REQUIRE(want.ok());
  const std::vector<float> want_logits(want->begin(), want->end());
  const std::vector<kv::BlockKey> keys = kv::stream_block_keys(fresh->cache().fingerprint(), 16, history);
  REQUIRE(keys.size() == 6);

  SECTION("a restart: all six blocks in one batch, logits as fresh") {
    auto s = model::Session::create(**m, o);  // a new cache: only the store knows the blocks
    REQUIRE(s.ok());
    cold.batch_sizes.clear();
    auto got = s->evaluate(all);
    REQUIRE(got.ok());
    CHECK(s->last_prefix().n_from_tier[2] == 96);
    CHECK(cold.batch_sizes == std::vector<size_t>{6});
    CHECK(cold.n_reads == 0);
    CHECK(std::equal(got->begin(), got->end(), want_logits.begin(), want_logits.end()));
  }
  SECTION("a corrupt block in the middle of the batch: only it is deleted and rewritten") {
    REQUIRE(inner.corrupt_for_test(keys[3]));
    auto s = model::Session::create(**m, o);
    REQUIRE(s.ok());
    cold.batch_sizes.clear();
    auto got = s->evaluate(all);
    REQUIRE(got.ok());
    // The prefix ends before the bad block; its 16 tokens are the ones lost to the disk.
    CHECK(s->last_prefix().n_cached == 48);
    CHECK(s->last_prefix().n_from_tier[2] == 48);
    CHECK(s->last_prefix().n_recomputed_bad == 16);
    CHECK(s->cache().counters().n_corrupt_blocks == 1);
    CHECK(cold.batch_sizes == std::vector<size_t>{6});
    CHECK(inner.stats().n_corrupt == 1);
    // The blocks after it stayed on disk; the recomputed block was stored again.
    for (size_t i = 0; i < keys.size(); ++i) {
      INFO("block " << i);
      CHECK(inner.contains(keys[i]));
    }
    CHECK(std::equal(got->begin(), got->end(), want_logits.begin(), want_logits.end()));
    REQUIRE(s->cache().check_invariants().ok());
  }
}

// The cold KV tier collects the blocks of models that are no longer on disk before any other.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>

#include "storage/cold_store_test_helpers.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;
using storage::ColdStoreOptions;
using storage::SqliteColdStore;
using test::key_of;
using test::open_store;

namespace {

std::vector<uint8_t> payload_of(int i) {
  std::mt19937 rng(static_cast<unsigned>(i) + 7);
  std::vector<uint8_t> p(1000);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  return p;
}

void put_blocks(SqliteColdStore& s, int begin, int end, const kv::BlockKey& fingerprint) {
  for (int i = begin; i < end; ++i) REQUIRE(s.put(key_of(i), key_of(i - 1), fingerprint, payload_of(i)));
  s.flush();
}

const kv::BlockKey k_fp_a{0xa, 0xa}, k_fp_b{0xb, 0xb};

}  // namespace

TEST_CASE("cold store: blocks of a model deleted from disk are collected before any other", "[storage]") {
  kvc::test::TempDir tmp;
  { std::ofstream(tmp.file("a.gguf")) << "model a"; }
  { std::ofstream(tmp.file("b.gguf")) << "model b"; }
  ColdStoreOptions opt;
  opt.capacity_bytes = 8 * 1000;
  {
    auto s = open_store(tmp.path() / "kv", opt);
    s->register_model(k_fp_a, tmp.file("a.gguf"));
    s->register_model(k_fp_b, tmp.file("b.gguf"));
    put_blocks(*s, 0, 4, k_fp_b);    // B's blocks are the older ones,
    put_blocks(*s, 10, 14, k_fp_a);  // A's the most recent
    CHECK(s->stats().n_blocks == 8);
  }
  SECTION("both models still there: the least recently used go, B's") {
    auto s = open_store(tmp.path() / "kv", opt);
    CHECK(s->extra_stats().n_blocks_of_missing_models == 0);
    put_blocks(*s, 20, 22, k_fp_b);
    CHECK_FALSE(s->contains(key_of(0)));
    CHECK_FALSE(s->contains(key_of(1)));
    for (int i = 10; i < 14; ++i) CHECK(s->contains(key_of(i)));
    s->check_invariants();
  }
  SECTION("model A deleted: its blocks go first, however recent") {
    std::filesystem::remove(tmp.file("a.gguf"));
    auto s = open_store(tmp.path() / "kv", opt);
    CHECK(s->extra_stats().n_blocks_of_missing_models == 4);
    put_blocks(*s, 20, 22, k_fp_b);
    CHECK(s->stats().n_collected == 2);
    int n_a = 0;
    for (int i = 10; i < 14; ++i) n_a += s->contains(key_of(i)) ? 1 : 0;
    CHECK(n_a == 2);
    for (int i = 0; i < 4; ++i) CHECK(s->contains(key_of(i)));
    s->check_invariants();
  }
  SECTION("model B replaced by another file of another size: its blocks go first") {
    { std::ofstream(tmp.file("b.gguf")) << "a different model b"; }
    auto s = open_store(tmp.path() / "kv", opt);
    CHECK(s->extra_stats().n_blocks_of_missing_models == 4);
    put_blocks(*s, 20, 22, k_fp_a);
    for (int i = 10; i < 14; ++i) CHECK(s->contains(key_of(i)));
    int n_b = 0;
    for (int i = 0; i < 4; ++i) n_b += s->contains(key_of(i)) ? 1 : 0;
    CHECK(n_b == 2);
  }
  SECTION("the check is injectable") {
    opt.model_present = [&](const std::string& path, int64_t) { return path != tmp.file("b.gguf"); };
    auto s = open_store(tmp.path() / "kv", opt);
    CHECK(s->extra_stats().n_blocks_of_missing_models == 4);
  }
}

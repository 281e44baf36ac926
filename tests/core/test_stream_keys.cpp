// Stream block keys, the dead-minus-live release set, and MemoryColdStore::release.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "core/kv/cold_store.h"
#include "core/kv/stream_keys.h"

using namespace kvc;

namespace {

const kv::BlockKey k_fp{0x1234, 0x5678};

std::vector<int32_t> iota_tokens(int n, int first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool has(const std::vector<kv::BlockKey>& v, const kv::BlockKey& k) {
  return std::find(v.begin(), v.end(), k) != v.end();
}

}  // namespace

TEST_CASE("stream keys: the chain of full blocks, as the cache computes it", "[core][kv]") {
  const auto t = iota_tokens(40, 100);  // 2 full blocks of 16 and a partial one
  const auto keys = kv::stream_block_keys(k_fp, 16, t);
  REQUIRE(keys.size() == 2);
  const auto k0 = kv::chain_key(k_fp, std::span(t).first(16));
  CHECK(keys[0] == k0);
  CHECK(keys[1] == kv::chain_key(k0, std::span(t).subspan(16, 16)));
  CHECK(kv::stream_block_keys(k_fp, 16, std::span(t).first(15)).empty());
  CHECK(kv::stream_block_keys(kv::BlockKey{1, 1}, 16, t)[0] != k0);  // another model: other keys
}

TEST_CASE("stream keys: a deleted stream's blocks minus those a remaining stream reaches", "[core][kv]") {
  const auto system = iota_tokens(32, 1);                          // a 2-block system prompt, shared
  const auto dead_a = concat(system, iota_tokens(40, 1000));       // + 2 private full blocks
  const auto dead_branch = concat(system, iota_tokens(20, 5000));  // an edited branch: + 1 private
  const auto live_b = concat(system, iota_tokens(33, 9000));       // another conversation
  const std::vector<std::vector<int32_t>> dead = {dead_a, dead_branch}, live = {live_b};
  const auto out = kv::unshared_block_keys(k_fp, 16, dead, live);
  const auto ka = kv::stream_block_keys(k_fp, 16, dead_a);
  const auto kbr = kv::stream_block_keys(k_fp, 16, dead_branch);
  REQUIRE(ka.size() == 4);
  REQUIRE(kbr.size() == 3);
  CHECK(out.size() == 3);  // each key once; the shared system blocks are not among them
  CHECK_FALSE(has(out, ka[0]));
  CHECK_FALSE(has(out, ka[1]));
  CHECK(has(out, ka[2]));
  CHECK(has(out, ka[3]));
  CHECK(has(out, kbr[2]));
  // Nothing remains: everything goes; the same stream remains: nothing goes.
  CHECK(kv::unshared_block_keys(k_fp, 16, dead, {}).size() == 5);
  CHECK(kv::unshared_block_keys(k_fp, 16, dead, dead).empty());
}

TEST_CASE("memory cold store: release deletes the blocks and counts them", "[core][kv]") {
  kv::MemoryColdStore cold(1 << 20);
  const std::vector<uint8_t> payload(100, 7);
  const kv::BlockKey a{1, 1}, b{2, 2};
  REQUIRE(cold.put(a, {}, k_fp, payload));
  REQUIRE(cold.put(b, a, k_fp, payload));
  const kv::BlockKey released[] = {a, kv::BlockKey{3, 3}};  // an unknown key is ignored
  cold.release(released);
  CHECK_FALSE(cold.contains(a));
  CHECK(cold.contains(b));
  const kv::ColdStoreStats st = cold.stats();
  CHECK(st.n_released == 1);
  CHECK(st.used_bytes == 100);
  std::vector<uint8_t> out(100);
  CHECK(cold.read(a, out) == kv::ColdRead::missing);
}

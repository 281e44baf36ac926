// Upgrades: KV blocks written by an older kvchat (tests/data/datadirs/untagged, fingerprints from
// before the values version) never match a newer one's keys, and the disk budget collects them.
#include <catch2/catch.hpp>

#include "core/backend/backend.h"
#include "core/kv/block_key.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "storage/conversation_store.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// The keys of the full blocks of `stream` chained from `fingerprint`.
std::vector<kv::BlockKey> chain(const kv::BlockKey& fingerprint, const std::vector<int32_t>& stream, int64_t b) {
  std::vector<kv::BlockKey> keys;
  kv::BlockKey parent = fingerprint;
  for (size_t i = 0; i + static_cast<size_t>(b) <= stream.size(); i += static_cast<size_t>(b)) {
    parent = kv::chain_key(parent, std::span<const int32_t>(stream).subspan(i, static_cast<size_t>(b)));
    keys.push_back(parent);
  }
  return keys;
}

int64_t n_held(const storage::SqliteColdStore& cold, const std::vector<kv::BlockKey>& keys) {
  int64_t n = 0;
  for (const auto& k : keys) n += cold.contains(k) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("upgrade: an older kvchat's KV blocks never match, and the disk budget collects them", "[storage][e2e]") {
  test::TempDir tmp;
  std::filesystem::copy(test::data_dir() / "datadirs/untagged", tmp.path() / "data",
                        std::filesystem::copy_options::recursive);
  // The conversation the older app had (two turns with stories260K), as it stored it.
  std::vector<int32_t> stream;
  {
    auto store = storage::ConversationStore::open_in(tmp.path() / "data");
    REQUIRE(store.ok());
    auto streams = (*store)->token_streams(2);
    REQUIRE(streams.ok());
    for (const auto& s : *streams) {
      if (s.size() > stream.size()) stream = s;
    }
  }
  REQUIRE(stream.size() >= 500);

  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("stories260K.gguf"), *be);
  REQUIRE(m.ok());
  storage::ColdStoreOptions co;
  co.capacity_bytes = 400'000;  // ~39 blocks of 10,240 bytes: the old 35 and a new chain do not both fit
  auto cold = storage::SqliteColdStore::open(tmp.path() / "data/kv-cache", co);
  REQUIRE(cold.ok());
  model::SessionOptions o;
  o.n_ctx = 1024;
  o.cold = cold->get();
  auto s = model::Session::create(**m, o);
  REQUIRE(s.ok());
  const int64_t b = s->cache().layout().block_tokens;
  const auto old_keys = chain(model::kv_fingerprint(**m, s->cache().layout(), 0), stream, b);
  const auto new_keys = chain(s->cache().fingerprint(), stream, b);
  REQUIRE(s->cache().fingerprint() == model::kv_fingerprint(**m, s->cache().layout()));
  // The fixture is this conversation's KV under the untagged fingerprint: every full block.
  REQUIRE(n_held(**cold, old_keys) == static_cast<int64_t>(old_keys.size()));
  CHECK(n_held(**cold, new_keys) == 0);

  auto r = model::generate(*s, stream, test::greedy_options(4));
  INFO((r.ok() ? std::string() : r.error().message) << " (" << stream.size() << " tokens)");
  REQUIRE(r.ok());
  CHECK(r->prefix.n_from_tier[2] == 0);  // nothing served from the older blocks
  CHECK(r->prefix.n_cached == 0);
  CHECK(r->prefix.n_recomputed_bad == 0);
  s = Error{};  // the session's blocks drain to disk
  cold = Error{};

  auto reopened = storage::SqliteColdStore::open(tmp.path() / "data/kv-cache", co);
  REQUIRE(reopened.ok());
  CHECK(n_held(**reopened, new_keys) == static_cast<int64_t>(new_keys.size()));
  // LRU by last use: the budget made room for the new chain out of the old one.
  CHECK(n_held(**reopened, old_keys) <= 39 - static_cast<int64_t>(new_keys.size()));
}

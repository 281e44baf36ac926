// Shared by the cold-store tests: open a store (the test fails with its message if it cannot)
// and distinct block keys.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <span>

#include "core/kv/block_key.h"
#include "storage/sqlite_cold_store.h"

namespace kvc::test {

inline std::unique_ptr<storage::SqliteColdStore> open_store(const std::filesystem::path& dir,
                                                            storage::ColdStoreOptions opt = {}) {
  auto s = storage::SqliteColdStore::open(dir, opt);
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.ok());
  return std::move(s.value());
}

// Key i: a one-token chain from a fixed root.
inline kv::BlockKey key_of(int i) {
  const int32_t t = i;
  return kv::chain_key(kv::BlockKey{1, 2}, std::span(&t, 1));
}

}  // namespace kvc::test

// Data directory resolution: the override wins, then KVCHAT_DATA_DIR, then XDG.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "storage/data_dir.h"
#include "support/test_support.h"

TEST_CASE("data dir: --data-dir beats the environment", "[storage]") {
  ::setenv("KVCHAT_DATA_DIR", "/tmp/from-env", 1);
  REQUIRE(kvc::storage::resolve_data_dir("/tmp/from-flag") == "/tmp/from-flag");
  REQUIRE(kvc::storage::resolve_data_dir("") == "/tmp/from-env");
  ::unsetenv("KVCHAT_DATA_DIR");
  ::setenv("XDG_DATA_HOME", "/tmp/xdg", 1);
  REQUIRE(kvc::storage::resolve_data_dir("") == "/tmp/xdg/kvchat");
  ::unsetenv("XDG_DATA_HOME");
}

TEST_CASE("data dir: a path blocked by a file gives an actionable error", "[storage]") {
  kvc::test::TempDir tmp;
  const auto blocked = tmp.path() / "file";
  {
    std::FILE* f = std::fopen(blocked.c_str(), "w");
    REQUIRE(f);
    std::fclose(f);
  }
  auto st = kvc::storage::ensure_dir(blocked / "sub");
  REQUIRE_FALSE(st.ok());
  REQUIRE_THAT(st.error().message, Catch::Contains("--data-dir"));
  REQUIRE(kvc::storage::ensure_dir(tmp.path() / "a/b").ok());
}

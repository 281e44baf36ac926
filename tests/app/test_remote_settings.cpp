// Remembered remote servers (one entry per server) and their API keys: a 0600 file, never in
// servers.json, widened permissions put back.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

#include "app/remote/remote_settings.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

unsigned mode_of(const std::filesystem::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

}  // namespace

TEST_CASE("remote settings: servers persist per URL, most recent first", "[app]") {
  test::TempDir tmp;
  const std::filesystem::path dir = tmp.path() / "remote";
  auto empty = remote::load_remote_settings(dir);
  REQUIRE(empty.ok());
  CHECK(empty->servers.empty());
  remote::RemoteSettings s;
  remote::remember_server(s, {"http://a:8000/v1", "llama", 30});
  remote::remember_server(s, {"http://b:30000/v1", "qwen", 60});
  remote::remember_server(s, {"http://a:8000/v1", "llama-70b", 120});
  REQUIRE(remote::save_remote_settings(dir, s).ok());
  auto back = remote::load_remote_settings(dir);
  REQUIRE(back.ok());
  REQUIRE(back->servers.size() == 2);
  CHECK(back->last_url == "http://a:8000/v1");
  CHECK(back->servers[0].model == "llama-70b");
  CHECK(back->servers[0].timeout_s == 120);
  CHECK(back->servers[1].url == "http://b:30000/v1");
  REQUIRE(remote::find_server(*back, "http://b:30000/v1"));
  CHECK(remote::find_server(*back, "http://b:30000/v1")->model == "qwen");

  { std::ofstream(dir / "servers.json") << "[not json"; }
  auto damaged = remote::load_remote_settings(dir);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.error().message.find("servers.json") != std::string::npos);
}

TEST_CASE("remote settings: API keys live in a 0600 file apart from the settings", "[app]") {
  test::TempDir tmp;
  const std::filesystem::path dir = tmp.path() / "remote";
  ::umask(022);
  REQUIRE(remote::store_api_key(dir, "http://a:8000/v1", "sk-very-secret").ok());
  REQUIRE(remote::store_api_key(dir, "http://b:8000/v1", "other-key").ok());
  CHECK(mode_of(dir / "keys.json") == 0600);
  CHECK(mode_of(dir) == 0700);
  CHECK(*remote::load_api_key(dir, "http://a:8000/v1") == "sk-very-secret");
  CHECK(*remote::load_api_key(dir, "http://c:8000/v1") == "");
  remote::RemoteSettings s;
  remote::remember_server(s, {"http://a:8000/v1", "m", 60});
  REQUIRE(remote::save_remote_settings(dir, s).ok());
  CHECK(test::read_file(dir / "servers.json").find("sk-very-secret") == std::string::npos);

  // Someone widened it: the next read puts it back to user-only.
  ::chmod((dir / "keys.json").c_str(), 0644);
  CHECK(*remote::load_api_key(dir, "http://b:8000/v1") == "other-key");
  CHECK(mode_of(dir / "keys.json") == 0600);

  REQUIRE(remote::store_api_key(dir, "http://a:8000/v1", "").ok());  // forgotten
  CHECK(*remote::load_api_key(dir, "http://a:8000/v1") == "");
  CHECK(test::read_file(dir / "keys.json").find("sk-very-secret") == std::string::npos);
  CHECK(mode_of(dir / "keys.json") == 0600);
}

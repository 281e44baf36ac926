// A kvchat.db that is damaged or not a database: moved aside whole, a new store starts, the
// user is told; anything else that fails (a newer schema) leaves the file alone.
#include <catch2/catch.hpp>

#include <fstream>

#include "storage/conversation_store.h"
#include "storage/database.h"
#include "support/test_support.h"

using namespace kvc::storage;

namespace {

ConversationStore::Options fixed_clock() {
  ConversationStore::Options opt;
  opt.now_ms = [] { return int64_t{1'700'000'000'000}; };  // November 2023
  return opt;
}

// The one file in `dir` whose name starts with kvchat.db.damaged- and has no -wal/-shm suffix.
std::filesystem::path aside_file(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("kvchat.db.damaged-2023") && !name.ends_with("-wal") && !name.ends_with("-shm")) {
      found.push_back(e.path());
    }
  }
  REQUIRE(found.size() == 1);
  return found[0];
}

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("conversation store: a file that is not a database is moved aside and a new store starts", "[storage]") {
  kvc::test::TempDir tmp;
  std::string junk;
  for (int i = 0; i < 400; ++i) junk += "these bytes were never a SQLite database; ";
  write_bytes(tmp.path() / "kvchat.db", junk);
  auto s = ConversationStore::open_in(tmp.path(), fixed_clock());
  INFO((s.ok() ? std::string() : s.error().message));
  REQUIRE(s.ok());
  const std::filesystem::path aside = aside_file(tmp.path());
  CHECK_THAT((*s)->notice(), Catch::Contains("kvchat.db") && Catch::Contains("moved to " + aside.string()) &&
                                 Catch::Contains("new, empty conversations database"));
  CHECK(kvc::test::read_file(aside) == junk);  // kept byte for byte, for recovery
  auto id = (*s)->create_conversation("after", {});
  REQUIRE(id.ok());
  s = kvc::Error{};
  auto again = ConversationStore::open_in(tmp.path(), fixed_clock());
  REQUIRE(again.ok());
  CHECK((*again)->notice().empty());
  auto list = (*again)->list_conversations(0, 10);
  REQUIRE(list.ok());
  REQUIRE(list->size() == 1);
  CHECK((*list)[0].title == "after");
}

TEST_CASE("conversation store: a damaged page found by quick_check moves the file aside too", "[storage]") {
  kvc::test::TempDir tmp;
  {
    auto s = ConversationStore::open_in(tmp.path(), fixed_clock());
    REQUIRE(s.ok());
    auto c = (*s)->create_conversation("long", {});
    REQUIRE(c.ok());
    int64_t parent = 0;
    for (int i = 0; i < 60; ++i) {
      auto m = (*s)->append_message(*c, parent, Role::user, std::string(600, static_cast<char>('a' + i % 26)), {});
      REQUIRE(m.ok());
      parent = *m;
    }
  }
  const std::filesystem::path db = tmp.path() / "kvchat.db";
  REQUIRE_FALSE(std::filesystem::exists(tmp.path() / "kvchat.db-wal"));  // checkpointed at close
  std::string bytes = kvc::test::read_file(db);
  REQUIRE(bytes.size() > 8 * 4096);
  // Page 1 (the header and schema) stays readable, so the open succeeds; every later page's
  // b-tree header is overwritten.
  for (size_t page = 1; page * 4096 < bytes.size(); ++page) bytes.replace(page * 4096, 16, std::string(16, '\xee'));
  write_bytes(db, bytes);
  auto s = ConversationStore::open_in(tmp.path(), fixed_clock());
  INFO((s.ok() ? std::string() : s.error().message));
  REQUIRE(s.ok());
  const std::filesystem::path aside = aside_file(tmp.path());
  CHECK_THAT((*s)->notice(), Catch::Contains("is damaged") && Catch::Contains("moved to " + aside.string()));
  CHECK(kvc::test::read_file(aside) == bytes);
  auto list = (*s)->list_conversations(0, 10);
  REQUIRE(list.ok());
  CHECK(list->empty());
}

TEST_CASE("conversation store: a kvchat.db from a newer kvchat is an error and is not moved", "[storage]") {
  kvc::test::TempDir tmp;
  {
    DatabaseOptions opt;
    auto db = Database::open(tmp.path() / "kvchat.db", opt);
    REQUIRE(db.ok());
    REQUIRE(db->exec("CREATE TABLE t(x); PRAGMA user_version=99;").ok());
  }
  const std::string before = kvc::test::read_file(tmp.path() / "kvchat.db");
  auto s = ConversationStore::open_in(tmp.path(), fixed_clock());
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("newer kvchat"));
  CHECK(kvc::test::read_file(tmp.path() / "kvchat.db") == before);
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    CHECK_FALSE(e.path().filename().string().starts_with("kvchat.db.damaged"));
  }
}

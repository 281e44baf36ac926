// SQLite wrappers and schema migrations against real database files.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "storage/database.h"
#include "storage/migrations.h"
#include "support/test_support.h"

using namespace kvc::storage;

namespace {

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Database open_or_fail(const std::string& path, DatabaseOptions opt = {}) {
  auto db = Database::open(path, opt);
  INFO((db ? std::string() : db.error().message));
  REQUIRE(db.ok());
  return std::move(db.value());
}

const Migration k_v1[] = {{1, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL);"}};
const Migration k_v2[] = {{1, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL);"},
                          {2, "ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;"}};
const Migration k_v2_broken[] = {{1, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT NOT NULL);"},
                                 {2, "CREATE TABLE extra(x); ALTER TABLE no_such_table ADD COLUMN y;"}};

}  // namespace

TEST_CASE("database: statements bind, step and read columns", "[storage]") {
  kvc::test::TempDir tmp;
  Database db = open_or_fail(tmp.file("a.db"));
  REQUIRE(db.exec("CREATE TABLE t(i INTEGER, d REAL, s TEXT, b BLOB)").ok());
  auto ins = db.prepare("INSERT INTO t VALUES(?, ?, ?, ?)");
  REQUIRE(ins.ok());
  const std::vector<uint8_t> blob = {0, 1, 2, 255};
  ins->bind(1, int64_t{-7}).bind(2, 2.5).bind(3, std::string_view("h\0i", 3)).bind_blob(4, blob);
  REQUIRE(ins->run().ok());
  REQUIRE(db.last_insert_rowid() == 1);
  ins->reset();
  ins->bind(1, int64_t{8}).bind_null(2).bind(3, std::string_view("x")).bind_blob(4, {});
  REQUIRE(ins->run().ok());

  auto sel = db.prepare("SELECT i, d, s, b FROM t ORDER BY rowid");
  REQUIRE(sel.ok());
  auto row = sel->step();
  REQUIRE((row.ok() && *row));
  CHECK(sel->column_int64(0) == -7);
  CHECK(sel->column_double(1) == 2.5);
  CHECK(sel->column_text(2) == std::string("h\0i", 3));
  auto b = sel->column_blob(3);
  CHECK(std::vector<uint8_t>(b.begin(), b.end()) == blob);
  row = sel->step();
  REQUIRE((row.ok() && *row));
  CHECK(sel->column_is_null(1));
  CHECK_FALSE(sel->column_is_null(3));  // an empty blob is not NULL
  CHECK(sel->column_blob(3).empty());
  row = sel->step();
  REQUIRE((row.ok() && !*row));
}

TEST_CASE("database: token ids are stored as little-endian int32", "[storage]") {
  const std::vector<int32_t> tokens = {1, -2, 0x01020304};
  const std::vector<uint8_t> expected = {1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 4, 3, 2, 1};
  CHECK(tokens_to_blob(tokens) == expected);
  CHECK(tokens_from_blob(expected) == tokens);
}

TEST_CASE("database: a transaction rolls back unless committed", "[storage]") {
  kvc::test::TempDir tmp;
  Database db = open_or_fail(tmp.file("a.db"));
  REQUIRE(db.exec("CREATE TABLE t(x)").ok());
  {
    auto tx = Transaction::begin(db);
    REQUIRE(tx.ok());
    REQUIRE(db.exec("INSERT INTO t VALUES(1)").ok());
  }
  CHECK(*db.query_int("SELECT count(*) FROM t") == 0);
  {
    auto tx = Transaction::begin(db);
    REQUIRE(tx.ok());
    REQUIRE(db.exec("INSERT INTO t VALUES(2)").ok());
    REQUIRE(tx->commit().ok());
  }
  CHECK(*db.query_int("SELECT count(*) FROM t") == 1);
}

TEST_CASE("database: failures name the file and say what to do", "[storage]") {
  kvc::test::TempDir tmp;
  DatabaseOptions opt;
  opt.what = "conversations database";

  SECTION("missing folder") {
    auto db = Database::open(tmp.file("no/such/dir/kvchat.db"), opt);
    REQUIRE_FALSE(db.ok());
    CHECK_THAT(db.error().message, Catch::Contains("cannot open conversations database") &&
                                       Catch::Contains("no/such/dir/kvchat.db") && Catch::Contains("--data-dir"));
  }
  SECTION("not a database") {
    { std::ofstream(tmp.file("junk.db")) << std::string(4096, 'x'); }
    auto db = Database::open(tmp.file("junk.db"), opt);
    REQUIRE_FALSE(db.ok());
    CHECK(db.error().code == kvc::ErrorCode::invalid_file);
    CHECK_THAT(db.error().message, Catch::Contains("not a kvchat database"));
  }
  SECTION("full") {
    opt.max_bytes = 64 * 1024;
    Database db = open_or_fail(tmp.file("small.db"), opt);
    REQUIRE(db.exec("CREATE TABLE t(b BLOB)").ok());
    auto ins = db.prepare("INSERT INTO t VALUES(?)");
    REQUIRE(ins.ok());
    const std::vector<uint8_t> big(200 * 1024, 7);
    ins->bind_blob(1, big);
    const kvc::Status st = ins->run();
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.error().message, Catch::Contains("the disk is full; free space or choose another --data-dir"));
    auto chk = db.prepare("PRAGMA integrity_check");
    REQUIRE((chk.ok() && *chk->step()));
    CHECK(chk->column_text(0) == "ok");
  }
  SECTION("read-only") {
    {
      Database db = open_or_fail(tmp.file("ro.db"));
      REQUIRE(db.exec("CREATE TABLE t(x)").ok());
    }
    opt.mode = OpenMode::read_only;
    Database db = open_or_fail(tmp.file("ro.db"), opt);
    const kvc::Status st = db.exec("INSERT INTO t VALUES(1)");
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.error().message, Catch::Contains("read-only"));
  }
}

TEST_CASE("migrations: a new database gets the latest schema in WAL mode", "[storage]") {
  kvc::test::TempDir tmp;
  auto db = open_versioned(tmp.file("m.db"), {}, k_v2);
  REQUIRE(db.ok());
  CHECK(*db->query_int("PRAGMA user_version") == 2);
  CHECK(db->exec("INSERT INTO notes(body, pinned) VALUES('a', 1)").ok());
  auto mode = db->prepare("PRAGMA journal_mode");
  REQUIRE((mode.ok() && *mode->step()));
  CHECK(mode->column_text(0) == "wal");
  CHECK(*db->query_int("PRAGMA foreign_keys") == 1);
}

TEST_CASE("migrations: an old database is upgraded in place and keeps its data", "[storage]") {
  kvc::test::TempDir tmp;
  {
    auto db = open_versioned(tmp.file("m.db"), {}, k_v1);
    REQUIRE(db.ok());
    REQUIRE(db->exec("INSERT INTO notes(body) VALUES('kept')").ok());
  }
  auto db = open_versioned(tmp.file("m.db"), {}, k_v2);
  REQUIRE(db.ok());
  CHECK(*db->query_int("PRAGMA user_version") == 2);
  CHECK(*db->query_int("SELECT count(*) FROM notes WHERE body = 'kept' AND pinned = 0") == 1);
}

TEST_CASE("migrations: a failing step is rolled back whole", "[storage]") {
  kvc::test::TempDir tmp;
  { REQUIRE(open_versioned(tmp.file("m.db"), {}, k_v1).ok()); }
  auto broken = open_versioned(tmp.file("m.db"), {}, k_v2_broken);
  REQUIRE_FALSE(broken.ok());
  CHECK_THAT(broken.error().message, Catch::Contains("schema version 2"));
  auto db = open_versioned(tmp.file("m.db"), {}, k_v1);
  REQUIRE(db.ok());
  CHECK(*db->query_int("PRAGMA user_version") == 1);
  CHECK(*db->query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'extra'") == 0);
}

TEST_CASE("migrations: a database from a newer kvchat is refused and left unchanged", "[storage]") {
  kvc::test::TempDir tmp;
  const std::string path = tmp.file("future.db");
  {
    Database db = open_or_fail(path);
    REQUIRE(db.exec("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES('x');"
                    "PRAGMA user_version=7;")
                .ok());
  }
  const auto before = file_bytes(path);
  REQUIRE(before.size() > 100);
  for (OpenMode mode : {OpenMode::create, OpenMode::read_only}) {
    DatabaseOptions opt;
    opt.mode = mode;
    opt.what = "conversations database";
    auto db = open_versioned(path, opt, k_v2);
    REQUIRE_FALSE(db.ok());
    CHECK_THAT(db.error().message,
               Catch::Contains("newer kvchat") && Catch::Contains("schema version 7") && Catch::Contains("untouched"));
  }
  CHECK(file_bytes(path) == before);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
}

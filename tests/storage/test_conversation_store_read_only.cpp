// ConversationStore on storage it may not write, on real read-only bind mounts in a forked child's mount namespace
// (tests/support/mount_support.h): open_in opens the existing file read-only and says why, every conversation reads,
// every write fails with a message naming the cause, and nothing on disk changes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "storage/conversation_store.h"
#include "support/mount_support.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// Two conversations of two messages each; a third message when `crash` is set, left in the WAL
// by a process that exits without closing the store (its -wal and -shm stay).
void write_conversations(const std::filesystem::path& dir, bool crash) {
  const int rc = test::run_in_child([&] {
    auto store = storage::ConversationStore::open_in(dir);
    if (!store) return 1;
    int64_t last = 0;
    for (const std::string title : {"Rivers", "Mountains"}) {
      auto c = (*store)->create_conversation(title, {});
      if (!c) return 2;
      auto u = (*store)->append_message(*c, 0, storage::Role::user, "About " + title, std::vector<int32_t>{1, 2});
      if (!u) return 3;
      auto a = (*store)->append_message(*c, *u, storage::Role::assistant, title + " are old.", std::vector<int32_t>{3});
      if (!a) return 4;
      last = *c;
    }
    if (!crash) return 0;
    auto c = (*store)->conversation(last);
    if (!c ||
        !(*store)
             ->append_message(last, c->active_leaf, storage::Role::user, "the last words", std::vector<int32_t>{9})
             .ok())
      return 5;
    ::_exit(0);  // no close, no checkpoint: the message is in kvchat.db-wal only
  });
  REQUIRE(rc == 0);
}

int said(const test::ChildReport& rep, const std::string& key, const std::string& value) {
  rep.line(key, value);
  return 0;
}

// What a child reads through open_in after making `ro` read-only: "key value" lines.
void read_in_child(const std::filesystem::path& dir, const std::filesystem::path& ro, const test::ChildReport& rep) {
  const int rc = test::run_in_child([&] {
    if (auto why = test::enter_mount_namespace()) return said(rep, "skip", *why);
    if (auto why = test::bind_read_only(ro)) return said(rep, "skip", *why);
    auto store = storage::ConversationStore::open_in(dir);
    if (!store) return said(rep, "open_error", store.error().message);
    rep.line("read_only", (*store)->read_only() ? "yes" : "no");
    rep.line("reason", (*store)->read_only_reason());
    rep.line("notice", (*store)->notice());
    auto list = (*store)->list_conversations(0, 10);
    if (!list) return 40;
    for (const auto& c : *list) {
      auto path = (*store)->path_to(c.active_leaf);
      if (!path) return 41;
      rep.line("conversation", c.title + " " + std::to_string(path->size()) + " " + path->back().text);
    }
    auto hits = (*store)->search("Rivers", 10);
    rep.line("n_hits", hits ? std::to_string(hits->size()) : hits.error().message);
    auto made = (*store)->create_conversation("new", {});
    rep.line("write", made ? std::string("went through") : made.error().message);
    return 0;
  });
  REQUIRE(rc == 0);
}

}  // namespace

TEST_CASE("conversation store: a read-only data directory opens its kvchat.db read-only and reads every conversation",
          "[storage]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "data";
  write_conversations(dir, false);
  REQUIRE_FALSE(std::filesystem::exists(dir / "kvchat.db-shm"));  // closed cleanly: SQLite needs to make one
  const std::string before = test::read_file(dir / "kvchat.db");
  const test::ChildReport rep(tmp.path() / "report.txt");
  read_in_child(dir, dir, rep);
  INFO(test::read_file(rep.path()));
  if (!rep.first("skip").empty()) KVC_SKIP("no read-only mount of our own: " << rep.first("skip"));
  REQUIRE(rep.first("open_error").empty());
  CHECK(rep.first("read_only") == "yes");
  CHECK(rep.first("reason") == "the data directory " + dir.string() +
                                   " cannot be written (it is on a read-only file "
                                   "system)");
  CHECK(rep.first("notice").empty());
  CHECK(rep.all("conversation") ==
        std::vector<std::string>{"Mountains 2 Mountains are old.", "Rivers 2 Rivers are old."});
  CHECK(rep.first("n_hits") != "0");
  CHECK_THAT(rep.first("write"), Catch::Contains("cannot write to conversations database") &&
                                     Catch::Contains("read-only; make it writable or choose another --data-dir"));
  CHECK(test::read_file(dir / "kvchat.db") == before);
  CHECK_FALSE(std::filesystem::exists(dir / "kvchat.db-shm"));
}

TEST_CASE("conversation store: a read-only data directory left by a crash shows the commits still in its WAL",
          "[storage]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "data";
  write_conversations(dir, true);
  REQUIRE(std::filesystem::exists(dir / "kvchat.db-wal"));
  REQUIRE(std::filesystem::exists(dir / "kvchat.db-shm"));
  const test::ChildReport rep(tmp.path() / "report.txt");
  read_in_child(dir, dir, rep);
  INFO(test::read_file(rep.path()));
  if (!rep.first("skip").empty()) KVC_SKIP("no read-only mount of our own: " << rep.first("skip"));
  CHECK(rep.first("read_only") == "yes");
  CHECK(rep.first("conversation") == "Mountains 3 the last words");  // read from kvchat.db-wal
}

TEST_CASE("conversation store: a read-only kvchat.db in a writable directory opens read-only, saying which file",
          "[storage]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "data";
  write_conversations(dir, false);
  const test::ChildReport rep(tmp.path() / "report.txt");
  read_in_child(dir, dir / "kvchat.db", rep);
  INFO(test::read_file(rep.path()));
  if (!rep.first("skip").empty()) KVC_SKIP("no read-only mount of our own: " << rep.first("skip"));
  CHECK(rep.first("read_only") == "yes");
  CHECK(rep.first("reason") == (dir / "kvchat.db").string() + " cannot be written (it is on a read-only file system)");
  CHECK(rep.all("conversation").size() == 2);
  CHECK(rep.first("write").find("went through") == std::string::npos);
}

TEST_CASE("conversation store: a read-only data directory without a kvchat.db is an error that says so", "[storage]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "data";
  std::filesystem::create_directories(dir);
  const test::ChildReport rep(tmp.path() / "report.txt");
  read_in_child(dir, dir, rep);
  INFO(test::read_file(rep.path()));
  if (!rep.first("skip").empty()) KVC_SKIP("no read-only mount of our own: " << rep.first("skip"));
  CHECK_THAT(rep.first("open_error"), Catch::Contains("cannot create conversations database") &&
                                          Catch::Contains("read-only file system") &&
                                          Catch::Contains("choose another --data-dir"));
  CHECK_FALSE(std::filesystem::exists(dir / "kvchat.db"));
}

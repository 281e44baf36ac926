// kvchat-cli export: a conversation saved in a real data directory, as Markdown and JSON; and from a kvchat.db damaged
// the ways real ones get damaged (a page overwritten, the file cut short, its header gone), read-only: every row
// SQLite can still read is exported, stderr says what was found, the exit status says whether the answer is whole,
// and the file is never moved aside or replaced.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "storage/conversation_store.h"
#include "storage/database.h"
#include "support/test_support.h"

TEST_CASE("kvchat-cli export: the list, a conversation as Markdown and JSON, and bad ids named", "[app]") {
  kvc::test::TempDir tmp;
  int64_t id = 0;
  {
    auto store = kvc::storage::ConversationStore::open_in(tmp.path() / "data");
    REQUIRE(store.ok());
    kvc::storage::ConversationSettings settings;
    settings.system_prompt = "Be brief.";
    auto c = (*store)->create_conversation("Rivers", settings);
    REQUIRE(c.ok());
    id = *c;
    auto u = (*store)->append_message(id, 0, kvc::storage::Role::user, "How long is the Nile?", {});
    REQUIRE(u.ok());
    auto a = (*store)->begin_assistant_message(id, *u);
    REQUIRE(a.ok());
    REQUIRE((*store)->append_streamed(*a, "About 6650 km.", {}).ok());
    REQUIRE((*store)->finish_message(*a).ok());
  }
  const auto list = kvc::test::cli("export", tmp);
  CHECK(list.exit_code == 0);
  CHECK(list.out == std::to_string(id) + "\tRivers\n");

  const auto md = kvc::test::cli("export " + std::to_string(id), tmp);
  INFO(md.err);
  REQUIRE(md.exit_code == 0);
  CHECK(md.out.find("# Rivers") == 0);
  CHECK(md.out.find("## System\n\nBe brief.") != std::string::npos);
  CHECK(md.out.find("## User\n\nHow long is the Nile?") != std::string::npos);
  CHECK(md.out.find("## Assistant\n\nAbout 6650 km.") != std::string::npos);

  const auto js = kvc::test::cli(
      "export " + std::to_string(id) + " --format json -o " + kvc::test::quoted(tmp.file("c.json")), tmp);
  REQUIRE(js.exit_code == 0);
  const auto j = nlohmann::json::parse(kvc::test::read_file(tmp.path() / "c.json"));
  CHECK(j.dump().find("About 6650 km.") != std::string::npos);
  CHECK(j.dump().find("Rivers") != std::string::npos);

  const auto missing = kvc::test::cli("export 999", tmp);
  CHECK(missing.exit_code == 2);
  CHECK(missing.err.find("no conversation 999") != std::string::npos);
  kvc::test::TempDir empty;
  const auto none = kvc::test::cli("export", empty);
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("kvchat.db is missing") != std::string::npos);
}

namespace {

using kvc::storage::Database;
using kvc::storage::DatabaseOptions;
using kvc::storage::OpenMode;

// 240 conversations with long titles (the table spans a dozen pages), each a question and an
// answer; closed cleanly, so that kvchat.db alone holds them (no -wal).
void write_many(const std::filesystem::path& data) {
  auto store = kvc::storage::ConversationStore::open_in(data);
  REQUIRE(store.ok());
  for (int i = 1; i <= 240; ++i) {
    auto c = (*store)->create_conversation("conversation " + std::to_string(i) + " " + std::string(150, 't'), {});
    REQUIRE(c.ok());
    REQUIRE(*c == i);
    auto u = (*store)->append_message(i, 0, kvc::storage::Role::user, "question " + std::to_string(i),
                                      std::vector<int32_t>{1, 2});
    REQUIRE(u.ok());
    auto a =
        (*store)->append_message(i, *u, kvc::storage::Role::assistant,
                                 "answer " + std::to_string(i) + " " + std::string(400, 'a'), std::vector<int32_t>{3});
    REQUIRE(a.ok());
  }
}

// The pages (1-based) of a table's b-tree leaves, in file order (SQLite's dbstat table).
std::vector<int64_t> leaf_pages(const std::filesystem::path& db, const std::string& table) {
  DatabaseOptions opt;
  opt.mode = OpenMode::read_only;
  auto d = Database::open(db, opt);
  REQUIRE(d.ok());
  auto st = d->prepare("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno");
  if (!st) return {};  // SQLite built without dbstat: the caller skips
  st->bind(1, std::string_view(table));
  std::vector<int64_t> pages;
  for (auto row = st->step(); row.ok() && *row; row = st->step()) pages.push_back(st->column_int64(0));
  return pages;
}

// Overwrites whole 4 KiB pages, as a disk that lost them would leave them.
void overwrite_pages(const std::filesystem::path& db, const std::vector<int64_t>& pages) {
  std::string bytes = kvc::test::read_file(db);
  for (int64_t p : pages) bytes.replace(static_cast<size_t>(p - 1) * 4096, 4096, std::string(4096, '\xee'));
  std::ofstream(db, std::ios::binary | std::ios::trunc) << bytes;
}

// The conversation ids a plain scan reads before it meets the damage, as `sqlite3 kvchat.db
// "SELECT id FROM conversations ORDER BY id [DESC]"` prints them: real SQLite, no kvchat code.
std::set<int64_t> scanned_ids(const std::filesystem::path& db, bool descending) {
  DatabaseOptions opt;
  opt.mode = OpenMode::read_only;
  opt.read_damaged = true;  // PRAGMA writable_schema=ON: a file cut short opens
  std::set<int64_t> ids;
  auto d = Database::open(db, opt);
  if (!d) return ids;
  auto st = d->prepare(std::string("SELECT id FROM conversations ORDER BY id") + (descending ? " DESC" : ""));
  if (!st) return ids;
  for (auto row = st->step(); row.ok() && *row; row = st->step()) ids.insert(st->column_int64(0));
  return ids;
}

// What the sqlite3 shell prints for the same scan (past the header's size check, as
// scanned_ids), or nothing when it is not installed.
std::optional<std::set<int64_t>> sqlite3_ids(const std::filesystem::path& db) {
  if (std::system("command -v sqlite3 >/dev/null 2>&1") != 0) return std::nullopt;
  std::string out;
  FILE* p = ::popen(("sqlite3 -readonly -cmd 'PRAGMA writable_schema=ON' " + kvc::test::quoted(db.string()) +
                     " 'SELECT id FROM conversations ORDER BY id' 2>/dev/null")
                        .c_str(),
                    "r");
  REQUIRE(p);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  std::set<int64_t> ids;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) ids.insert(std::stoll(line));
  return ids;
}

std::set<int64_t> listed_ids(const std::string& out) {
  std::set<int64_t> ids;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) ids.insert(std::stoll(line));
  return ids;
}

// Nothing moved aside or replaced: the file byte for byte as it was.
void check_left_alone(const std::filesystem::path& data, const std::string& before) {
  CHECK(kvc::test::read_file(data / "kvchat.db") == before);
  for (const auto& e : std::filesystem::directory_iterator(data)) {
    CHECK_FALSE(e.path().filename().string().starts_with("kvchat.db.damaged"));
  }
}

}  // namespace

TEST_CASE(
    "kvchat-cli export: a kvchat.db with a conversations page overwritten lists every row SQLite can still "
    "read, says what it found, and is left alone",
    "[app][storage]") {
  kvc::test::TempDir tmp;
  const auto data = tmp.path() / "data";
  write_many(data);
  const auto db = data / "kvchat.db";
  const auto pages = leaf_pages(db, "conversations");
  if (pages.empty()) KVC_SKIP("this SQLite has no dbstat table to find the conversations' pages with");
  REQUIRE(pages.size() >= 6);
  overwrite_pages(db, {pages[pages.size() / 2]});
  const std::string before = kvc::test::read_file(db);
  const std::set<int64_t> forward = scanned_ids(db, false), backward = scanned_ids(db, true);
  REQUIRE(forward.size() < 240);  // the damage stops a plain scan
  REQUIRE(!backward.empty());

  const auto list = kvc::test::cli("export", tmp);
  INFO(list.err);
  CHECK(list.exit_code == 3);  // the list is incomplete
  CHECK_THAT(list.err, Catch::Contains("kvchat.db is damaged") && Catch::Contains("conversations readable (listed)") &&
                           Catch::Contains("part of the list cannot be read") && Catch::Contains("left as it is"));
  const std::set<int64_t> listed = listed_ids(list.out);
  for (int64_t id : forward) CHECK(listed.count(id) == 1);
  for (int64_t id : backward) CHECK(listed.count(id) == 1);
  CHECK(listed.size() < 240);
  CHECK(list.err.find(std::to_string(listed.size()) + " conversations readable") != std::string::npos);

  // A conversation past the damaged page exports whole; one on it is named as unreadable.
  const int64_t after = *backward.begin();
  const auto md = kvc::test::cli("export " + std::to_string(after), tmp);
  INFO(md.err);
  CHECK(md.exit_code == 0);
  CHECK(md.out.find("question " + std::to_string(after)) != std::string::npos);
  CHECK(md.out.find("answer " + std::to_string(after)) != std::string::npos);
  CHECK_THAT(md.err, Catch::Contains("is damaged") && Catch::Contains("was read whole (2 messages)"));
  int64_t lost = 0;
  for (int64_t id = 1; id <= 240 && lost == 0; ++id) lost = listed.count(id) ? 0 : id;
  REQUIRE(lost != 0);
  const auto gone = kvc::test::cli("export " + std::to_string(lost), tmp);
  CHECK(gone.exit_code == 3);
  CHECK_THAT(gone.err, Catch::Contains("conversation " + std::to_string(lost) + " cannot be read"));
  check_left_alone(data, before);
  CHECK_FALSE(std::filesystem::exists(data / "lock"));  // a reader takes no lock, creates nothing of kvchat's

  // sqlite3 itself, where it is installed, reads no row that export left out.
  if (const auto by_sqlite3 = sqlite3_ids(db)) {
    CHECK(!by_sqlite3->empty());
    for (int64_t id : *by_sqlite3) CHECK(listed.count(id) == 1);
  }
}

TEST_CASE(
    "kvchat-cli export: a kvchat.db with a messages page overwritten lists all, exports a conversation it "
    "reaches in part with exit 3, and the others whole",
    "[app][storage]") {
  kvc::test::TempDir tmp;
  const auto data = tmp.path() / "data";
  write_many(data);
  const auto db = data / "kvchat.db";
  const auto pages = leaf_pages(db, "messages");
  if (pages.empty()) KVC_SKIP("this SQLite has no dbstat table to find the messages' pages with");
  REQUIRE(pages.size() >= 6);
  overwrite_pages(db, {pages[pages.size() / 2]});
  const std::string before = kvc::test::read_file(db);

  const auto list = kvc::test::cli("export", tmp);
  INFO(list.err);
  CHECK(list.exit_code == 0);  // every conversation's row reads: the list is whole
  CHECK(listed_ids(list.out).size() == 240);
  CHECK_THAT(list.err,
             Catch::Contains("kvchat.db is damaged") && Catch::Contains("240 conversations readable (listed), "
                                                                        "the whole list"));
  // Which messages SQLite reads, each by its id (question 2i-1, answer 2i of conversation i).
  DatabaseOptions opt;
  opt.mode = OpenMode::read_only;
  auto d = Database::open(db, opt);
  REQUIRE(d.ok());
  auto one = d->prepare("SELECT text FROM messages WHERE id = ?");
  REQUIRE(one.ok());
  auto readable = [&](int64_t id) {
    one->reset();
    one->bind(1, id);
    auto row = one->step();
    return row.ok() && *row;
  };
  int n_partial = 0, n_whole = 0;
  for (int64_t i = 1; i <= 240; ++i) {
    const bool q = readable(2 * i - 1), a = readable(2 * i);
    if (q && a && n_whole >= 3) continue;  // a few whole ones are enough
    const auto md = kvc::test::cli("export " + std::to_string(i), tmp);
    INFO("conversation " << i << ": " << md.err);
    if (q && a) {
      ++n_whole;
      CHECK(md.exit_code == 0);
      CHECK(md.out.find("question " + std::to_string(i)) != std::string::npos);
    } else {
      ++n_partial;
      CHECK(md.exit_code == 3);
      CHECK_THAT(md.err, Catch::Contains("only partly readable"));
      CHECK(md.out.find("# conversation " + std::to_string(i)) == 0);  // what could be read, still exported
      if (a) CHECK(md.out.find("answer " + std::to_string(i)) != std::string::npos);
    }
  }
  CHECK(n_partial > 0);
  CHECK(n_whole == 3);
  check_left_alone(data, before);
}

TEST_CASE("kvchat-cli export: a truncated kvchat.db lists what its remaining pages hold, with exit 3",
          "[app][storage]") {
  kvc::test::TempDir tmp;
  const auto data = tmp.path() / "data";
  write_many(data);
  const auto db = data / "kvchat.db";
  std::filesystem::resize_file(db, std::filesystem::file_size(db) * 6 / 10);
  const std::string before = kvc::test::read_file(db);
  const std::set<int64_t> forward = scanned_ids(db, false), backward = scanned_ids(db, true);
  REQUIRE(!forward.empty());
  REQUIRE(forward.size() < 240);
  const auto list = kvc::test::cli("export", tmp);
  INFO(list.err);
  CHECK_THAT(list.err, Catch::Contains("kvchat.db is damaged") && Catch::Contains("reading what remains of it"));
  const std::set<int64_t> listed = listed_ids(list.out);
  for (int64_t id : forward) CHECK(listed.count(id) == 1);
  for (int64_t id : backward) CHECK(listed.count(id) == 1);
  CHECK(list.exit_code == 3);
  if (const auto by_sqlite3 = sqlite3_ids(db)) {
    CHECK(!by_sqlite3->empty());
    for (int64_t id : *by_sqlite3) CHECK(listed.count(id) == 1);
  }
  // The first conversation's pages remain: it exports whole.
  const auto md = kvc::test::cli("export 1", tmp);
  INFO(md.err);
  CHECK(md.exit_code == 0);
  CHECK(md.out.find("answer 1 ") != std::string::npos);
  check_left_alone(data, before);
}

TEST_CASE(
    "kvchat-cli export: a kvchat.db whose header is overwritten is named as unreadable, with exit 3, never "
    "'nothing' and exit 0",
    "[app][storage]") {
  kvc::test::TempDir tmp;
  const auto data = tmp.path() / "data";
  write_many(data);
  const auto db = data / "kvchat.db";
  std::string bytes = kvc::test::read_file(db);
  bytes.replace(0, 16, std::string(16, '\0'));  // "SQLite format 3\0" gone
  std::ofstream(db, std::ios::binary | std::ios::trunc) << bytes;
  for (const std::string args : {"export", "export 2"}) {
    const auto r = kvc::test::cli(args, tmp);
    INFO(args << ": " << r.err);
    CHECK(r.exit_code == 3);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Contains("kvchat.db") && Catch::Contains("nothing can be read from it") &&
                          Catch::Contains("left as it is"));
  }
  check_left_alone(data, bytes);
}

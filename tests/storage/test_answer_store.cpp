// AnswerStore against real SQLite files: recall by prompt and text, LRU bounds, persistence.
#include <catch2/catch.hpp>

#include <fstream>
#include <vector>

#include "storage/answer_store.h"
#include "support/test_support.h"

using namespace kvc;
using storage::AnswerStore;

namespace {

std::unique_ptr<AnswerStore> open_or_fail(const std::string& path, storage::AnswerStoreOptions o = {}) {
  auto s = AnswerStore::open(path, o);
  INFO((s.ok() ? std::string() : s.error().message));
  REQUIRE(s.ok());
  return std::move(*s);
}

}  // namespace

TEST_CASE("answer store: an answer is found by its prompt and text only", "[storage]") {
  auto s = open_or_fail("");
  const std::vector<int32_t> prompt = {1, 10, 11, 12}, other_prompt = {1, 10, 11, 13};
  const std::vector<int32_t> ids = {400, 401, 402};
  s->remember(AnswerStore::key_of(prompt, " Hello there"), ids);
  CHECK(s->recall(AnswerStore::key_of(prompt, " Hello there")) == ids);
  CHECK_FALSE(s->recall(AnswerStore::key_of(prompt, " Hello there!")));
  CHECK_FALSE(s->recall(AnswerStore::key_of(other_prompt, " Hello there")));
  CHECK_FALSE(s->recall(AnswerStore::key_of({}, " Hello there")));
  // A newer answer under the same key replaces the old one.
  s->remember(AnswerStore::key_of(prompt, " Hello there"), std::vector<int32_t>{7});
  CHECK(s->recall(AnswerStore::key_of(prompt, " Hello there")) == std::vector<int32_t>{7});
  CHECK(s->size() == 1);
  CHECK(s->check_invariants().ok());
}

TEST_CASE("answer store: the least recently used answers go past either bound", "[storage]") {
  storage::AnswerStoreOptions o;
  o.max_answers = 3;
  o.max_tokens = 10;
  auto s = open_or_fail("", o);
  const auto key = [](int i) { return AnswerStore::key_of(std::vector<int32_t>{i}, "a"); };
  for (int i = 0; i < 3; ++i) s->remember(key(i), std::vector<int32_t>{i, i});
  CHECK(s->recall(key(0)));  // 0 is now the most recent; 1 the least
  s->remember(key(3), std::vector<int32_t>{3});
  CHECK(s->size() == 3);
  CHECK_FALSE(s->recall(key(1)));
  CHECK(s->recall(key(0)));
  s->remember(key(4), std::vector<int32_t>(8, 4));  // 8 ids: only 2 more fit within 10
  CHECK(s->recall(key(4)));
  CHECK(s->size() == 2);
  CHECK(s->check_invariants().ok());
  s->remember(key(5), std::vector<int32_t>(11, 5));  // longer than the whole budget: not kept
  CHECK_FALSE(s->recall(key(5)));
  CHECK(s->check_invariants().ok());
}

TEST_CASE("answer store: answers survive a reopen, within the bounds of the new store", "[storage]") {
  test::TempDir tmp;
  const std::string path = tmp.file("answers.db");
  const auto key = [](int i) { return AnswerStore::key_of(std::vector<int32_t>{1, i}, "text " + std::to_string(i)); };
  {
    auto s = open_or_fail(path);
    REQUIRE(s->persistent());
    for (int i = 0; i < 5; ++i) s->remember(key(i), std::vector<int32_t>{i, i + 1, i + 2});
    CHECK(s->recall(key(0)));  // the most recent now
    CHECK(s->warning().empty());
  }
  {
    auto s = open_or_fail(path);
    CHECK(s->size() == 5);
    CHECK(s->recall(key(3)) == std::vector<int32_t>{3, 4, 5});
    CHECK(s->check_invariants().ok());
  }
  storage::AnswerStoreOptions small;
  small.max_answers = 2;
  {
    auto s = open_or_fail(path, small);
    CHECK(s->size() == 2);  // the two most recent: 3 (just recalled) and 0
    CHECK(s->recall(key(3)));
    CHECK(s->recall(key(0)));
    CHECK_FALSE(s->recall(key(4)));
  }
  auto s = open_or_fail(path);
  CHECK(s->size() == 2);  // the older rows were deleted from the file
}

TEST_CASE("answer store: a file that is not a database is refused by name", "[storage]") {
  test::TempDir tmp;
  const std::string path = tmp.file("answers.db");
  { std::ofstream(path) << "this is not a database, just text that fills more than a header would............"; }
  auto s = AnswerStore::open(path);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("answer token database"));
}

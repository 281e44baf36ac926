// Answers cut off by a kill: a kvchat.db written by schema version 2 (tests/data/datadirs/schema-v2,
// an answer left "streaming") opens, is upgraded to version 3, and its answer is marked
// interrupted by the writer, text kept; a store of today does the same after a kill.
#include <catch2/catch.hpp>

#include "storage/conversation_store.h"
#include "storage/database.h"
#include "support/test_support.h"

using namespace kvc;
using storage::MessageState;

namespace {

int64_t user_version(const std::filesystem::path& db) {
  auto d = storage::Database::open(db, {.mode = storage::OpenMode::read_only});
  REQUIRE(d.ok());
  auto v = d->query_int("PRAGMA user_version");
  REQUIRE(v.ok());
  return *v;
}

std::string integrity(const std::filesystem::path& db) {
  auto d = storage::Database::open(db, {});
  REQUIRE(d.ok());
  auto st = d->prepare("PRAGMA integrity_check");
  REQUIRE(st.ok());
  auto row = st->step();
  return row.ok() && *row ? st->column_text(0) : "no result";
}

}  // namespace

TEST_CASE("interrupted answers: a schema-2 database is upgraded and its cut-off answer marked", "[storage]") {
  test::TempDir tmp;
  std::filesystem::copy(test::data_dir() / "datadirs/schema-v2", tmp.path() / "data",
                        std::filesystem::copy_options::recursive);
  const auto db = tmp.path() / "data" / "kvchat.db";
  REQUIRE(user_version(db) == 2);
  auto store = storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  CHECK(user_version(db) == 4);
  CHECK((*store)->notice().empty());
  CHECK(
      (*store)->conversation((*store)->message(2)->conversation_id)->settings.reasoning_effort.empty());  // version 4's
  // The fixture's ids (see tests/data/README.md): 1 user, 2 the cut-off answer, 3 and 4 a finished turn.
  CHECK((*store)->message(2)->state == MessageState::streaming);  // nobody said it was cut off yet
  auto n = (*store)->mark_interrupted();
  REQUIRE(n.ok());
  CHECK(*n == 1);
  auto cut = (*store)->message(2);
  REQUIRE(cut.ok());
  CHECK(cut->state == MessageState::interrupted);
  CHECK(cut->text == "Once upon a time there was a cat");
  CHECK((*store)->message(1)->text == "Tell me a long story.");
  CHECK((*store)->message(4)->state == MessageState::complete);
  CHECK((*store)->message(4)->tokens == std::vector<int32_t>{5, 6});
  // An interrupted answer takes no more chunks, but a turn may follow it (and give it ids).
  CHECK_FALSE((*store)->append_streamed(2, "more", {}).ok());
  CHECK((*store)->set_message_tokens(2, std::vector<int32_t>{7, 8}).ok());
  auto next = (*store)->append_message(cut->conversation_id, 2, storage::Role::user, "Go on.", std::vector<int32_t>{9});
  REQUIRE(next.ok());
  CHECK((*store)->path_to(*next)->size() == 3);
  auto md = (*store)->export_markdown(cut->conversation_id, 2);
  REQUIRE(md.ok());
  CHECK(md->find("(incomplete)") != std::string::npos);
  auto js = (*store)->export_json(cut->conversation_id, 2);
  REQUIRE(js.ok());
  CHECK(js->find("\"interrupted\"") != std::string::npos);
  CHECK(*(*store)->mark_interrupted() == 0);
  store = Error{};
  CHECK(integrity(db) == "ok");
  // Opened again: still version 4, still marked.
  auto again = storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(again.ok());
  CHECK((*again)->message(2)->state == MessageState::interrupted);
}

TEST_CASE("interrupted answers: a streaming answer left by a dead writer is marked, a finished one is not",
          "[storage]") {
  test::TempDir tmp;
  int64_t cut = 0, done = 0;
  {
    auto s = storage::ConversationStore::open_in(tmp.path());
    REQUIRE(s.ok());
    auto c = (*s)->create_conversation("t", {});
    auto u = (*s)->append_message(*c, 0, storage::Role::user, "q", std::vector<int32_t>{1});
    auto a = (*s)->begin_assistant_message(*c, *u);
    REQUIRE((*s)->append_streamed(*a, "half an ans", std::vector<int32_t>{2}).ok());
    done = *(*s)->begin_assistant_message(*c, *u);
    REQUIRE((*s)->finish_message(done).ok());
    cut = *a;
  }
  auto s = storage::ConversationStore::open_in(tmp.path());
  REQUIRE(s.ok());
  CHECK(*(*s)->mark_interrupted() == 1);
  CHECK((*s)->message(cut)->state == MessageState::interrupted);
  CHECK((*s)->message(cut)->text == "half an ans");
  CHECK((*s)->message(cut)->tokens == std::vector<int32_t>{2});
  CHECK((*s)->message(done)->state == MessageState::complete);
}

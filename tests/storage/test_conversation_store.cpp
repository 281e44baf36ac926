// ConversationStore on a real SQLite file: CRUD, message trees and branches, search, export.
#include <catch2/catch.hpp>

#include "storage/conversation_store.h"
#include "support/test_support.h"

using namespace kvc::storage;

namespace {

struct Fixture {
  kvc::test::TempDir tmp;
  int64_t clock = 1000;
  std::unique_ptr<ConversationStore> store = open();

  std::unique_ptr<ConversationStore> open() {
    ConversationStore::Options opt;
    opt.now_ms = [this] { return clock += 10; };
    auto s = ConversationStore::open_in(tmp.path(), opt);
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s.ok());
    return std::move(s.value());
  }
  int64_t create(const std::string& title) {
    auto id = store->create_conversation(title, {});
    REQUIRE(id.ok());
    return *id;
  }
  int64_t say(int64_t conv, int64_t parent, Role role, const std::string& text, std::vector<int32_t> tokens = {}) {
    auto id = store->append_message(conv, parent, role, text, tokens);
    INFO((id ? std::string() : id.error().message));
    REQUIRE(id.ok());
    return *id;
  }
};

std::vector<std::string> texts(const std::vector<Message>& ms) {
  std::vector<std::string> out;
  for (const auto& m : ms) out.push_back(m.text);
  return out;
}

}  // namespace

TEST_CASE("conversations: create, read, rename, settings, list recent first and paged", "[storage]") {
  Fixture f;
  ConversationSettings settings;
  settings.system_prompt = "Be brief.";
  settings.model_path = "/models/tiny.gguf";
  settings.model_name = "tiny";
  settings.generation.sampling.temperature = 0.25f;
  settings.generation.sampling.top_k = 7;
  settings.generation.sampling.seed = 42;
  settings.generation.max_tokens = 99;
  settings.reasoning_effort = "high";
  auto a = f.store->create_conversation("first", settings);
  REQUIRE(a.ok());
  const int64_t b = f.create("second");
  const int64_t c = f.create("third");
  auto got = f.store->conversation(*a);
  REQUIRE(got.ok());
  CHECK(got->title == "first");
  CHECK(got->settings == settings);
  CHECK(got->active_leaf == 0);
  CHECK(got->created_ms > 0);

  REQUIRE(f.store->rename_conversation(*a, "renamed").ok());  // also makes it the most recent
  auto page1 = f.store->list_conversations(0, 2);
  auto page2 = f.store->list_conversations(2, 2);
  REQUIRE((page1.ok() && page2.ok()));
  REQUIRE(page1->size() == 2);
  REQUIRE(page2->size() == 1);
  CHECK((*page1)[0].id == *a);
  CHECK((*page1)[0].title == "renamed");
  CHECK((*page1)[1].id == c);
  CHECK((*page2)[0].id == b);

  settings.generation.sampling.top_p = 0.5f;
  settings.reasoning_effort = "low";
  REQUIRE(f.store->update_settings(b, settings).ok());
  CHECK(f.store->conversation(b)->settings.generation.sampling.top_p == 0.5f);
  CHECK(f.store->conversation(b)->settings.reasoning_effort == "low");
  CHECK(f.store->conversation(*a)->settings.reasoning_effort == "high");
  CHECK_FALSE(f.store->rename_conversation(999, "x").ok());
  CHECK_THAT(f.store->conversation(999).error().message, Catch::Contains("no conversation"));
}

TEST_CASE("conversations: messages keep exact tokens and survive reopening", "[storage]") {
  Fixture f;
  const int64_t c = f.create("t");
  const int64_t sys = f.say(c, 0, Role::system, "sys", {1, 2});
  const int64_t u = f.say(c, sys, Role::user, "héllo \"quoted\"", {-5, 70000, 2147483647});
  f.store.reset();
  f.store = f.open();
  auto m = f.store->message(u);
  REQUIRE(m.ok());
  CHECK(m->text == "héllo \"quoted\"");
  CHECK(m->tokens == std::vector<int32_t>{-5, 70000, 2147483647});
  CHECK(m->parent_id == sys);
  CHECK(m->role == Role::user);
  CHECK(m->state == MessageState::complete);
  CHECK(f.store->conversation(c)->active_leaf == u);
  // A parent from another conversation is refused.
  const int64_t other = f.create("other");
  CHECK_FALSE(f.store->append_message(other, u, Role::user, "x", {}).ok());
}

TEST_CASE("conversations: streamed assistant text is saved as it arrives", "[storage]") {
  Fixture f;
  const int64_t c = f.create("t");
  const int64_t u = f.say(c, 0, Role::user, "hi", {5});
  auto a = f.store->begin_assistant_message(c, u);
  REQUIRE(a.ok());
  CHECK(f.store->message(*a)->state == MessageState::streaming);
  REQUIRE(f.store->append_streamed(*a, "Hel", std::vector<int32_t>{10, 11}).ok());
  REQUIRE(f.store->append_streamed(*a, "lo", std::vector<int32_t>{12}).ok());
  {
    // A second connection (as after a crash) sees what was streamed so far.
    auto other = ConversationStore::open_in(f.tmp.path());
    REQUIRE(other.ok());
    auto m = (*other)->message(*a);
    REQUIRE(m.ok());
    CHECK(m->text == "Hello");
    CHECK(m->tokens == std::vector<int32_t>{10, 11, 12});
    CHECK(m->state == MessageState::streaming);
  }
  REQUIRE(f.store->finish_message(*a).ok());
  CHECK(f.store->message(*a)->state == MessageState::complete);
  auto late = f.store->append_streamed(*a, "!", {});
  REQUIRE_FALSE(late.ok());
  CHECK_THAT(late.error().message, Catch::Contains("finished"));
  CHECK(f.store->conversation(c)->active_leaf == *a);
}

TEST_CASE("conversations: a finished reply's tokens can be replaced, its text kept", "[storage]") {
  Fixture f;
  const int64_t c = f.create("t");
  const int64_t u = f.say(c, 0, Role::user, "hi", {5});
  auto a = f.store->begin_assistant_message(c, u);
  REQUIRE(a.ok());
  REQUIRE(f.store->append_streamed(*a, "<think>x</think>4.", std::vector<int32_t>{10, 11, 12, 13}).ok());
  // Still streaming: not replaceable.
  auto early = f.store->set_message_tokens(*a, std::vector<int32_t>{13});
  REQUIRE_FALSE(early.ok());
  CHECK_THAT(early.error().message, Catch::Contains("still streaming"));
  REQUIRE(f.store->finish_message(*a).ok());
  REQUIRE(f.store->set_message_tokens(*a, std::vector<int32_t>{13}).ok());
  auto reopened = f.open();
  auto m = reopened->message(*a);
  REQUIRE(m.ok());
  CHECK(m->text == "<think>x</think>4.");
  CHECK(m->tokens == std::vector<int32_t>{13});
  auto streams = reopened->token_streams(c);
  REQUIRE(streams.ok());
  CHECK(*streams == std::vector<std::vector<int32_t>>{{5, 13}});
  CHECK_FALSE(reopened->set_message_tokens(9999, std::vector<int32_t>{1}).ok());
}

TEST_CASE("conversations: editing makes a branch, paths, siblings and leaves navigate it", "[storage]") {
  Fixture f;
  const int64_t c = f.create("t");
  const int64_t u1 = f.say(c, 0, Role::user, "q1");
  const int64_t a1 = f.say(c, u1, Role::assistant, "a1");
  const int64_t u2 = f.say(c, a1, Role::user, "q2");
  const int64_t a2 = f.say(c, u2, Role::assistant, "a2");
  auto u2b = f.store->edit_message(u2, "q2 edited", std::vector<int32_t>{3});
  REQUIRE(u2b.ok());
  const int64_t a2b = f.say(c, *u2b, Role::assistant, "a2b");

  CHECK(f.store->conversation(c)->active_leaf == a2b);
  CHECK(texts(*f.store->path_to(a2b)) == std::vector<std::string>{"q1", "a1", "q2 edited", "a2b"});
  CHECK(texts(*f.store->path_to(a2)) == std::vector<std::string>{"q1", "a1", "q2", "a2"});
  auto sib = f.store->siblings(*u2b);
  REQUIRE(sib.ok());
  REQUIRE(sib->size() == 2);
  CHECK((*sib)[0].id == u2);
  CHECK((*sib)[1].id == *u2b);
  CHECK(f.store->siblings(u1)->size() == 1);  // a root's siblings are the other roots
  CHECK(*f.store->newest_leaf_under(u2) == a2);
  CHECK(*f.store->newest_leaf_under(u1) == a2b);  // newest child at each step
  REQUIRE(f.store->set_active_leaf(c, a2).ok());
  CHECK(f.store->conversation(c)->active_leaf == a2);
  CHECK(f.store->message(*u2b)->role == Role::user);
}

TEST_CASE("conversations: delete cascades to messages and the search index", "[storage]") {
  Fixture f;
  const int64_t c = f.create("doomed");
  const int64_t u = f.say(c, 0, Role::user, "zebra crossing");
  f.say(c, u, Role::assistant, "zebras are striped");
  const int64_t keep = f.create("kept");
  f.say(keep, 0, Role::user, "zebra too");
  REQUIRE(f.store->search("zebra", 10)->size() == 2);
  REQUIRE(f.store->delete_conversation(c).ok());
  CHECK_FALSE(f.store->conversation(c).ok());
  CHECK_FALSE(f.store->message(u).ok());
  auto hits = f.store->search("zebra", 10);
  REQUIRE(hits.ok());
  REQUIRE(hits->size() == 1);
  CHECK((*hits)[0].conversation.id == keep);
  CHECK_FALSE(f.store->delete_conversation(c).ok());
}

TEST_CASE("conversations: search finds titles and message words, tolerates any input", "[storage]") {
  Fixture f;
  const int64_t recipes = f.create("Pasta recipes");
  const int64_t travel = f.create("Trip to Lisbon");
  f.say(travel, 0, Role::user, "Where can I eat good pasta in Lisbon?");
  const int64_t other = f.create("misc");
  f.say(other, 0, Role::user, "nothing here");

  auto hits = f.store->search("pasta", 10);
  REQUIRE(hits.ok());
  REQUIRE(hits->size() == 2);
  CHECK((*hits)[0].conversation.id == travel);  // updated more recently
  CHECK((*hits)[0].message_id != 0);
  CHECK_THAT((*hits)[0].snippet, Catch::Contains("[pasta]"));
  CHECK((*hits)[1].conversation.id == recipes);
  CHECK((*hits)[1].message_id == 0);

  CHECK(f.store->search("good lisbon", 10)->size() == 1);  // every word, any order, any case
  CHECK(f.store->search("good madrid", 10)->empty());
  for (const char* nasty : {"\"", "AND OR NOT", "*", "pas\"ta", "a:b", "(", "50%_\\"}) {
    INFO(nasty);
    CHECK(f.store->search(nasty, 10).ok());
  }
  CHECK(f.store->search("   ", 10)->empty());
  CHECK(f.store->search("%", 10)->empty());  // LIKE wildcards are literal
  CHECK(f.store->search("pasta", 1)->size() == 1);
}

TEST_CASE("conversations: export a path to JSON and Markdown", "[storage]") {
  Fixture f;
  ConversationSettings s;
  s.system_prompt = "Be kind.";
  s.model_name = "tiny";
  auto c = f.store->create_conversation("Tabs\tand \"quotes\"", s);
  REQUIRE(c.ok());
  const int64_t u = f.say(*c, 0, Role::user, "line1\nline2\x01", {1, -2});
  auto a = f.store->begin_assistant_message(*c, u);
  REQUIRE(a.ok());
  REQUIRE(f.store->append_streamed(*a, "partial", std::vector<int32_t>{9}).ok());

  auto json = f.store->export_json(*c, *a);
  REQUIRE(json.ok());
  CHECK_THAT(*json, Catch::Contains(R"("title": "Tabs\tand \"quotes\"")"));
  CHECK_THAT(*json, Catch::Contains(R"("system_prompt": "Be kind.")"));
  CHECK_THAT(*json, Catch::Contains(R"("role": "user", "state": "complete")"));
  CHECK_THAT(*json, Catch::Contains(R"("text": "line1\nline2\u0001", "tokens": [1, -2]})"));
  CHECK_THAT(*json, Catch::Contains(R"("role": "assistant", "state": "streaming")"));
  CHECK_THAT(*json, Catch::Contains(R"("text": "partial", "tokens": [9]})"));
  CHECK(json->find("line1\n") == std::string::npos);  // no raw control characters

  auto md = f.store->export_markdown(*c, *a);
  REQUIRE(md.ok());
  CHECK(*md ==
        "# Tabs\tand \"quotes\"\n\n*Model: tiny*\n\n## System\n\nBe kind.\n\n## User\n\nline1\nline2\x01\n\n"
        "## Assistant (incomplete)\n\npartial\n\n");
  const int64_t other = f.create("o");
  CHECK_FALSE(f.store->export_json(other, *a).ok());
}

TEST_CASE("conversations: the context cut is kept per conversation and across reopening", "[storage]") {
  Fixture f;
  const int64_t a = f.create("a"), b = f.create("b");
  const int64_t u1 = f.say(a, 0, Role::user, "one", {1, 2});
  const int64_t r1 = f.say(a, u1, Role::assistant, "reply", {3});
  const int64_t u2 = f.say(a, r1, Role::user, "two", {4});
  const int64_t other = f.say(b, 0, Role::user, "elsewhere", {5});
  auto c = f.store->conversation(a);
  REQUIRE(c.ok());
  CHECK(c->context_cut == 0);
  REQUIRE(f.store->set_context_cut(a, u2).ok());
  CHECK(f.store->conversation(a)->context_cut == u2);
  CHECK(f.store->conversation(b)->context_cut == 0);
  // A message of another conversation, or no conversation at all, is refused.
  auto st = f.store->set_context_cut(a, other);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.error().message, Catch::Contains("another conversation"));
  CHECK_FALSE(f.store->set_context_cut(999, 0).ok());
  // It survives reopening; the messages before it are all still there.
  f.store.reset();
  f.store = f.open();
  CHECK(f.store->conversation(a)->context_cut == u2);
  CHECK(f.store->path_to(u2)->size() == 3);
  {
    kvc::storage::DatabaseOptions o;
    o.mode = kvc::storage::OpenMode::read_only;
    auto db = kvc::storage::Database::open(f.store->path(), o);
    REQUIRE(db.ok());
    CHECK(*db->query_int("PRAGMA user_version") == 4);  // 2 context_cut, 3 the interrupted flag, 4 reasoning_effort
  }
  // 0 clears it.
  REQUIRE(f.store->set_context_cut(a, 0).ok());
  CHECK(f.store->conversation(a)->context_cut == 0);
}

// Deleting a conversation releases the disk blocks only it reached; a shared system prompt stays.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/backend/backend.h"
#include "core/kv/stream_keys.h"
#include "core/model/model.h"
#include "core/model/session.h"
#include "storage/conversation_store.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::vector<int32_t> tokens_of(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(3 + (i * 37 + salt * 101) % 500);  // stories260K: 512 ids
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool reads_ok(storage::SqliteColdStore& cold, const kv::BlockKey& key) {
  const int64_t n = cold.size_of(key);
  if (n < 0) return false;
  std::vector<uint8_t> out(static_cast<size_t>(n));
  return cold.read(key, out) == kv::ColdRead::ok;
}

}  // namespace

TEST_CASE("conversation delete: private blocks released, the shared system prompt still serves", "[storage]") {
  test::TempDir tmp;
  auto be = backend::make_cpu_backend(2);
  auto m = model::Model::load(test::model_path("stories260K.gguf"), *be);
  REQUIRE(m.ok());
  auto store = storage::ConversationStore::open_in(tmp.path() / "data");
  REQUIRE(store.ok());
  storage::ConversationStore& cs = **store;

  // Two conversations start with the same 32-token (2-block) system prompt. A has two
  // branches (its first message was edited); B has one.
  //   A1: | sys0 | sys1 | a2 | a3 | + tail      A2: | sys0 | sys1 | e2 | + tail
  //   B:  | sys0 | sys1 | b2 | b3 | + tail
  const auto system = tokens_of(32, 1);
  auto a = cs.create_conversation("A", {});
  auto b = cs.create_conversation("B", {});
  REQUIRE((a.ok() && b.ok()));
  auto a_user = cs.append_message(*a, 0, storage::Role::user, "a", concat(system, tokens_of(20, 2)));
  REQUIRE(a_user.ok());
  auto a_reply = cs.begin_assistant_message(*a, *a_user);
  REQUIRE(a_reply.ok());
  REQUIRE(cs.append_streamed(*a_reply, "r", tokens_of(26, 3)).ok());
  REQUIRE(cs.finish_message(*a_reply).ok());
  REQUIRE(cs.edit_message(*a_user, "e", concat(system, tokens_of(18, 4))).ok());
  auto b_user = cs.append_message(*b, 0, storage::Role::user, "b", concat(system, tokens_of(30, 5)));
  REQUIRE(b_user.ok());
  auto b_reply = cs.begin_assistant_message(*b, *b_user);
  REQUIRE(b_reply.ok());
  REQUIRE(cs.append_streamed(*b_reply, "r", tokens_of(10, 6)).ok());
  REQUIRE(cs.finish_message(*b_reply).ok());

  auto a_streams = cs.token_streams(*a);
  auto b_streams = cs.token_streams(*b);
  REQUIRE((a_streams.ok() && b_streams.ok()));
  REQUIRE(a_streams->size() == 2);  // every branch
  REQUIRE(b_streams->size() == 1);
  const std::vector<int32_t> b_stream = b_streams->front();
  REQUIRE(b_stream.size() == 72);

  model::SessionOptions o;
  o.n_ctx = 256;
  o.block_tokens = 16;
  kv::BlockKey fp;
  std::vector<kv::BlockKey> a_keys;  // every full block of A's branches
  {
    auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
    REQUIRE(cold.ok());
    o.cold = cold->get();
    auto s = model::Session::create(**m, o);
    REQUIRE(s.ok());
    for (const auto& stream : *a_streams) REQUIRE(s->evaluate(stream).ok());
    REQUIRE(s->evaluate(b_stream).ok());
    (*cold)->flush();
    fp = s->cache().fingerprint();
    for (const auto& stream : *a_streams) {
      for (const auto& k : kv::stream_block_keys(fp, 16, stream)) a_keys.push_back(k);
    }
    REQUIRE(a_keys.size() == 4 + 3);
    for (const auto& k : a_keys) REQUIRE((*cold)->contains(k));

    // The steps of ChatController::delete_conversation (tested itself in
    // tests/app/test_chat_controller_delete.cpp): streams read before the rows go, the conversation
    // deleted, the remaining streams read, the difference released.
    REQUIRE(cs.delete_conversation(*a).ok());
    auto live = cs.token_streams_except(0);
    REQUIRE(live.ok());
    REQUIRE(live->size() == 1);
    const auto released = kv::unshared_block_keys(fp, 16, *a_streams, *live);
    CHECK(released.size() == 3);  // a2, a3, e2
    (*cold)->release(released);
    (*cold)->flush();
    CHECK((*cold)->stats().n_released == 3);
    for (const auto& k : released) CHECK_FALSE((*cold)->contains(k));
    CHECK(reads_ok(**cold, a_keys[0]));  // sys0 and sys1, B's too, still read ok
    CHECK(reads_ok(**cold, a_keys[1]));
    (*cold)->check_invariants();
  }

  // Next launch: the deletion was durable, and B's next turn gets its whole history from disk.
  auto cold = storage::SqliteColdStore::open(tmp.path() / "kv");
  REQUIRE(cold.ok());
  for (size_t i : {2, 3, 6}) CHECK_FALSE((*cold)->contains(a_keys[i]));
  o.cold = cold->get();
  auto s = model::Session::create(**m, o);
  REQUIRE(s.ok());
  REQUIRE(s->evaluate(concat(b_stream, tokens_of(8, 7))).ok());
  CHECK(s->last_prefix().n_from_tier[2] == 64);  // sys0 sys1 b2 b3
  CHECK(s->last_prefix().n_recomputed_bad == 0);
}

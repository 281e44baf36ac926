// Crash test: a child process writing conversations and KV blocks is SIGKILLed at random
// moments; after each kill the databases are intact, every acknowledged write is there and
// no block is served with bad contents.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "storage/conversation_store.h"
#include "storage/database.h"
#include "storage/sqlite_cold_store.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

enum AckKind : int32_t { k_user = 1, k_streamed = 2, k_blocks = 3 };

// One acknowledgement through the pipe, sent only after the write it reports has returned.
struct Ack {
  int32_t kind;
  int32_t iter;
  int64_t a;  // user/streamed: message id; blocks: number of blocks durable
  int64_t b;  // user: sequence number; streamed: text length so far
};

constexpr size_t k_block_bytes = 16 * 1024;

kv::BlockKey block_key(int iter, int j) {
  const int32_t t[2] = {iter, j};
  return kv::chain_key(kv::BlockKey{7, 7}, t);
}

std::vector<uint8_t> block_payload(const kv::BlockKey& key) {
  std::mt19937_64 rng(key.lo);
  std::vector<uint8_t> p(k_block_bytes);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  return p;
}

std::string user_text(int iter, int64_t n) { return "user message " + std::to_string(iter) + "-" + std::to_string(n); }

storage::ColdStoreOptions cold_options(int iter) {
  storage::ColdStoreOptions opt;
  opt.placement = iter % 2 ? storage::PayloadPlacement::files : storage::PayloadPlacement::blob;
  return opt;
}

void send(int fd, const Ack& ack) {
  if (::write(fd, &ack, sizeof ack) != static_cast<ssize_t>(sizeof ack)) ::_exit(3);
}

// The child: writes until it is killed. Never returns.
[[noreturn]] void child_main(const std::filesystem::path& dir, int iter, int fd) {
  auto convs = storage::ConversationStore::open_in(dir);
  auto cold = storage::SqliteColdStore::open(dir, cold_options(iter));
  if (!convs || !cold) ::_exit(2);
  auto c = (*convs)->create_conversation("crash " + std::to_string(iter), {});
  if (!c) ::_exit(2);
  int64_t parent = 0;
  int j = 0;
  for (int64_t n = 0;; ++n) {
    const std::string text = user_text(iter, n);
    auto u = (*convs)->append_message(*c, parent, storage::Role::user, text, std::vector<int32_t>{iter, int32_t(n)});
    if (!u) ::_exit(4);
    send(fd, {k_user, iter, *u, n});
    auto a = (*convs)->begin_assistant_message(*c, *u);
    if (!a) ::_exit(4);
    int64_t len = 0;
    for (int d = 0; d < 8; ++d) {
      const std::string delta = "tok" + std::to_string(d) + " ";
      if (!(*convs)->append_streamed(*a, delta, std::vector<int32_t>{d}).ok()) ::_exit(4);
      len += static_cast<int64_t>(delta.size());
      send(fd, {k_streamed, iter, *a, len});
      for (int k = 0; k < 2; ++k, ++j) {
        const auto key = block_key(iter, j);
        (*cold)->put(key, block_key(iter, j - 1), {}, block_payload(key));
      }
    }
    if (!(*convs)->finish_message(*a).ok()) ::_exit(4);
    (*cold)->flush();
    send(fd, {k_blocks, iter, j, 0});
    parent = *a;
  }
}

std::string integrity(const std::filesystem::path& db) {
  auto d = storage::Database::open(db, {});
  if (!d) return d.error().message;
  auto st = d->prepare("PRAGMA integrity_check");
  if (!st) return st.error().message;
  auto row = st->step();
  return row && *row ? st->column_text(0) : "no result";
}

}  // namespace

TEST_CASE("storage crash: SIGKILL at random moments loses nothing acknowledged", "[storage]") {
  kvc::test::TempDir tmp;
  std::mt19937 rng(12345);
  constexpr int k_kills = 24;
  int n_user_acks = 0, n_blocks_checked = 0;
  for (int iter = 0; iter < k_kills; ++iter) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      child_main(tmp.path(), iter, fds[1]);
    }
    ::close(fds[1]);
    Ack first{};
    REQUIRE(::read(fds[0], &first, sizeof first) == static_cast<ssize_t>(sizeof first));  // the child is writing
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 40000)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("kill " << iter);
    REQUIRE(WIFSIGNALED(status));  // killed, not failed on its own

    std::vector<Ack> acks = {first};
    for (Ack a{}; ::read(fds[0], &a, sizeof a) == static_cast<ssize_t>(sizeof a);) acks.push_back(a);
    ::close(fds[0]);

    CHECK(integrity(tmp.path() / "kvchat.db") == "ok");
    CHECK(integrity(tmp.path() / "kv_cache.db") == "ok");

    auto convs = storage::ConversationStore::open_in(tmp.path());
    REQUIRE(convs.ok());
    int64_t n_durable_blocks = 0;
    for (const Ack& a : acks) {
      if (a.kind == k_user) {
        auto m = (*convs)->message(a.a);
        REQUIRE(m.ok());
        CHECK(m->text == user_text(iter, a.b));
        CHECK(m->tokens == std::vector<int32_t>{iter, int32_t(a.b)});
        ++n_user_acks;
      } else if (a.kind == k_streamed) {
        auto m = (*convs)->message(a.a);
        REQUIRE(m.ok());
        CHECK(static_cast<int64_t>(m->text.size()) >= a.b);
      } else {
        n_durable_blocks = a.a;
      }
    }

    auto cold = storage::SqliteColdStore::open(tmp.path(), cold_options(iter));
    REQUIRE(cold.ok());
    CHECK((*cold)->stats().healthy);
    std::vector<uint8_t> out(k_block_bytes);
    for (int j = 0; j < n_durable_blocks + 40; ++j) {
      const auto key = block_key(iter, j);
      const kv::ColdRead r = (*cold)->read(key, out);
      if (j < n_durable_blocks) CHECK(r == kv::ColdRead::ok);
      if (r == kv::ColdRead::ok) {
        CHECK(out == block_payload(key));
        ++n_blocks_checked;
      }
    }
    CHECK((*cold)->stats().n_corrupt == 0);
    (*cold)->check_invariants();
  }
  CHECK(n_user_acks >= k_kills);
  CHECK(n_blocks_checked > 0);
}

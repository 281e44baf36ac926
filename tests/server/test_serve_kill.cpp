// `kvchat-cli serve` SIGKILLed while it streams a long answer, at random points, in a bounded
// loop: after each kill its databases pass integrity_check, its cold store serves only blocks
// whose checksums verify (the newest block is made corrupt and must be refused), and the next
// server on the data directory serves the resent history from the disk cache.
// CTest runs a few kills (label "kill"); KVC_KILL_COUNT=50 runs the full loop.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <future>
#include <random>
#include <thread>

#include "server/serve_process.h"
#include "storage/database.h"
#include "support/kill_support.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

std::string question(int k) {
  return "Question " + std::to_string(k) +
         ": tell me a very long story about a little cat, a dog and a bird who went to the river together to look "
         "for the sun and the moon, and what they found there when the night came.";
}

std::string body(const std::string& user, int max_tokens, bool stream) {
  return json{{"model", "kvchat-test"},
              {"messages", json::array({json{{"role", "user"}, {"content", user}}})},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"stream", stream}}
      .dump();
}

// Blocks in the cold store's index as another process sees them (committed only).
int64_t blocks_on_disk(const std::filesystem::path& db) {
  if (!std::filesystem::exists(db)) return 0;
  auto d = storage::Database::open(db, {.mode = storage::OpenMode::read_only, .busy_timeout_ms = 200});
  if (!d) return 0;
  auto n = d->query_int("SELECT count(*) FROM blocks");
  return n ? *n : 0;
}

}  // namespace

TEST_CASE("serve killed mid-answer: the stores stay whole and the next server serves the history from disk",
          "[.kill_serve][app][server]") {
  const int n_kills = test::kill_count(3);
  const std::string model = test::model_path("tiny-gqa-q8_0.gguf");
  test::TempDir tmp;
  const std::string data = tmp.file("data");
  const std::filesystem::path serve_dir = std::filesystem::path(data) / "serve";
  std::mt19937 rng(777);
  int n_survived = 0, n_integrity_ok = 0;
  for (int k = 0; k <= n_kills; ++k) {
    INFO("server " << k);
    test::ServeProcess s(model, data, "--alias kvchat-test", tmp);
    httplib::Client c("127.0.0.1", s.port());
    c.set_read_timeout(120, 0);
    if (k > 0) {
      // The previous question again: its prompt's blocks come back from the disk tier.
      auto r = c.Post("/v1/chat/completions", body(question(k - 1), 4, false), "application/json");
      REQUIRE(r);
      REQUIRE(r->status == 200);
      const json j = json::parse(r->body);
      INFO(r->body);
      CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>() >= 16);
    }
    if (k == n_kills) {
      CHECK(s.stop() == 0);
      break;
    }
    const int64_t n_blocks_before = blocks_on_disk(serve_dir / "kv-cache" / "kv_cache.db");
    std::atomic<int64_t> n_bytes{0};
    auto stream = std::async(std::launch::async, [&] {
      httplib::Client sc("127.0.0.1", s.port());
      sc.set_read_timeout(120, 0);
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/chat/completions";
      req.body = body(question(k), 1500, true);
      req.set_header("Content-Type", "application/json");
      req.content_receiver = [&](const char*, size_t n, uint64_t, uint64_t) {
        n_bytes += static_cast<int64_t>(n);
        return true;
      };
      (void)sc.send(req);
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    // A few chunks of the answer have been sent, and the prompt's blocks (3 full ones) are on
    // disk: the write-behind is asynchronous, and what it has not committed is not promised.
    while (n_bytes.load() < 200 || blocks_on_disk(serve_dir / "kv-cache" / "kv_cache.db") < n_blocks_before + 3) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1500)(rng)));
    REQUIRE(s.kill_now());
    stream.get();
    ++n_survived;
    const std::string answers_ok = test::integrity(serve_dir / "answers.db");
    const std::string cold_ok = test::integrity(serve_dir / "kv-cache" / "kv_cache.db");
    CHECK(answers_ok == "ok");
    CHECK(cold_ok == "ok");
    n_integrity_ok += (answers_ok == "ok") + (cold_ok == "ok");
    const test::ColdCheck cold = test::check_cold_store(serve_dir / "kv-cache", true, rng);
    CHECK(cold.n_blocks > 0);
    CHECK(cold.n_bad_served == 0);
    CHECK(cold.corrupted_refused);
    CHECK(cold.n_refused == 1);
  }
  WARN("serve kills survived: " << n_survived << ", integrity checks passed: " << n_integrity_ok);
  CHECK(n_survived == n_kills);
}

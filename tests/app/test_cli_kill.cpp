// `kvchat-cli chat` SIGKILLed while it streams a long answer, at random points, in a bounded
// loop. The chat saves its conversation in the data directory's kvchat.db as the app does:
// after each kill nothing is half-written, the next run chats at once, and every killed run's
// question is kept with its answer up to the last part saved, marked interrupted.
// CTest runs a few kills (label "kill"); KVC_KILL_COUNT=50 runs the full loop.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "storage/conversation_store.h"
#include "support/kill_support.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::vector<std::string> chat_argv(const std::string& model, const std::string& data, const std::string& input,
                                   int n_predict) {
  std::string cmd = "exec ";
  cmd += test::quoted(KVC_CLI_PATH);
  cmd += " chat -m ";
  cmd += test::quoted(model);
  cmd += " --data-dir ";
  cmd += test::quoted(data);
  cmd += " -t 1 -n ";
  cmd += std::to_string(n_predict);
  cmd += " < ";
  cmd += test::quoted(input);
  return {"/bin/sh", "-c", cmd};
}

}  // namespace

TEST_CASE("kvchat-cli chat killed mid-answer: the next run chats at once", "[.kill_cli][app]") {
  const int n_kills = test::kill_count(3);
  const std::string model = test::model_path("tiny-gqa-q8_0.gguf");
  test::TempDir tmp;
  const std::string data = tmp.file("data");
  const std::string input = tmp.file("input.txt");
  std::ofstream(input) << "Tell me a very long story about a cat.\n";
  std::mt19937 rng(99);
  int n_survived = 0;
  int n_ended_first = 0;  // answers that reached their end (EOS, -n) before the kill came
  for (int k = 0; n_survived < n_kills; ++k) {
    INFO("attempt " << k << ", kill " << n_survived);
    // A small model may finish its answer inside the random delay: that run is not a kill. The
    // bound keeps a loop whose kills never land from running on.
    REQUIRE(n_ended_first <= 3 * n_kills);
    const std::string log = tmp.file("chat-" + std::to_string(k) + ".log");
    test::Child chat(chat_argv(model, data, input, 1500), {}, log);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    // Streaming: the answer's text is coming out (its first bytes after the banner line on stderr).
    std::error_code size_ec;
    while (std::filesystem::file_size(log, size_ec) < 400 || size_ec) {
      if (!chat.running()) FAIL("chat exited before it streamed:\n" << chat.log());
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 1000)(rng)));
    if (!chat.kill_now()) {
      INFO(chat.log());
      REQUIRE(chat.wait_exit(120) == 0);  // it ended by itself, and cleanly
      ++n_ended_first;
      continue;
    }
    ++n_survived;
    // Nothing half-written in the data directory: no temporary or partial files left.
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(data, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      CHECK(name.find(".tmp") == std::string::npos);
      CHECK(name.find(".part") == std::string::npos);
    }
  }
  // A short answer runs to its end and exits cleanly.
  test::Child chat(chat_argv(model, data, input, 8), {}, tmp.file("chat-last.log"));
  const int rc = chat.wait_exit(120);
  INFO(chat.log());
  CHECK(rc == 0);
  CHECK(chat.log().find("tokens | TTFT") != std::string::npos);
  // One conversation per run; each killed run's answer, cut off, is marked so by the next run.
  CHECK(test::integrity(std::filesystem::path(data) / "kvchat.db") == "ok");
  auto store = storage::ConversationStore::open_read_only(std::filesystem::path(data) / "kvchat.db");
  REQUIRE(store.ok());
  auto list = (*store)->list_conversations(0, 1000);
  REQUIRE(list.ok());
  CHECK(static_cast<int>(list->size()) == n_survived + n_ended_first + 1);
  int n_interrupted = 0;
  for (const auto& c : *list) {
    auto path = (*store)->path_to(c.active_leaf);
    REQUIRE(path.ok());
    REQUIRE(path->size() == 2);
    CHECK(path->front().text == "Tell me a very long story about a cat.");
    n_interrupted += path->back().state == storage::MessageState::interrupted;
    CHECK(path->back().state != storage::MessageState::streaming);
  }
  // (A kill that lands after an answer's end, as the process exits, finds it complete.)
  CHECK(n_interrupted <= n_survived);
  CHECK(n_interrupted >= 1);
  WARN("cli chat kills survived: " << n_survived << " (answers that ended before their kill: " << n_ended_first << ")");
  CHECK(n_survived == n_kills);
}

// kvchat-cli chat past the end of the context: 60 turns on a 512-token model run to the end, the oldest messages
// dropped by whole turns with the cache kept warm.
#include <catch2/catch.hpp>

#include <array>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "support/test_support.h"

using kvc::test::cli;
using kvc::test::quoted;

namespace {

// A small llama with a trained context of 512 tokens and stories260K's vocabulary.
std::string make_ctx512_model(const kvc::test::TempDir& tmp) {
  const std::string path = tmp.file("ctx512.gguf");
  auto mk = cli("mkmodel -q --ctx 512 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 --vocab-from " +
                    quoted(kvc::test::model_path("stories260K.gguf")) + " -o " + quoted(path),
                tmp);
  INFO(mk.err);
  REQUIRE(mk.exit_code == 0);
  return path;
}

std::string sixty_turns() { return kvc::test::read_file(kvc::test::data_dir() / "conversations/sixty-turns.txt"); }

}  // namespace

TEST_CASE("cli: chat runs 60 turns on a 512-token context to the end, cutting whole turns, the cache warm",
          "[app][e2e]") {
  kvc::test::TempDir tmp;
  const std::string model = make_ctx512_model(tmp);
  const std::string input = sixty_turns();
  auto chat = cli(
      "chat -m " + quoted(model) +
          " -t 2 -n 48 --temp 0 --summary --system 'You are a storyteller. You tell short, happy stories about animals, children and their friends.'",
      tmp, input);
  INFO(chat.err.substr(chat.err.size() > 6000 ? chat.err.size() - 6000 : 0));
  REQUIRE(chat.exit_code == 0);
  CHECK(chat.err.find("kvchat-cli:") == std::string::npos);  // no error reported on any turn
  CHECK(chat.err.find("context 512") != std::string::npos);  // the model's trained context is the default

  const std::regex turn(R"(\[([0-9]+) tokens \|[^\]]*\| prompt ([0-9]+) tokens, ([0-9]+) from cache)");
  std::vector<std::array<int, 3>> turns;  // reply tokens, prompt tokens, from cache
  for (auto it = std::sregex_iterator(chat.err.begin(), chat.err.end(), turn); it != std::sregex_iterator(); ++it) {
    turns.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3])});
  }
  REQUIRE(turns.size() == 60);
  for (const auto& t : turns) CHECK(t[1] + t[0] <= 512);

  // The cut marker: printed when a cut moves, the number of messages outside only growing.
  const std::regex cut(R"(\(([0-9]+) earlier messages are outside the model's context\))");
  std::vector<int> cuts;
  for (auto it = std::sregex_iterator(chat.err.begin(), chat.err.end(), cut); it != std::sregex_iterator(); ++it) {
    cuts.push_back(std::stoi((*it)[1]));
  }
  REQUIRE(cuts.size() >= 3);
  for (size_t i = 1; i < cuts.size(); ++i) CHECK(cuts[i] > cuts[i - 1]);
  for (int n : cuts) CHECK(n % 2 == 0);  // whole turns: a question and its answer

  // Between cuts a turn reuses everything but the previous reply's last token; at a cut, the
  // system prompt's blocks still hit.
  int n_warm = 0;
  for (size_t i = 1; i < turns.size(); ++i) {
    if (turns[i][2] >= turns[i - 1][1] + turns[i - 1][0] - 1) ++n_warm;
    CHECK(turns[i][2] >= 32);
  }
  CHECK(n_warm >= 59 - static_cast<int>(cuts.size()));
  CHECK(n_warm >= 30);

  const std::regex summary(
      R"(summary: 60 turns, ([0-9]+) context cuts \| new tokens per turn ([0-9.]+) .*recomputed per turn ([0-9.]+) )");
  std::smatch m;
  REQUIRE(std::regex_search(chat.out, m, summary));
  CHECK(std::stoi(m[1]) == static_cast<int>(cuts.size()));
  const double fresh = std::stod(m[2]), recomputed = std::stod(m[3]);
  CHECK(fresh > 0);
  CHECK(recomputed <= 2 * fresh);  // the issue's criterion
}

TEST_CASE("cli: a message too long for the context alone is refused and the chat goes on", "[app][e2e]") {
  kvc::test::TempDir tmp;
  const std::string model = make_ctx512_model(tmp);
  std::string input = "hello there\n" + std::string(3000, 'a') + "\nand again\n";
  auto chat = cli("chat -m " + quoted(model) + " -t 2 -n 8 --temp 0", tmp, input);
  INFO(chat.err);
  REQUIRE(chat.exit_code == 0);
  CHECK(chat.err.find("more than the context of 512 tokens: shorten it, or raise the context size") !=
        std::string::npos);
  const std::regex turn(R"(\[([0-9]+) tokens \|)");
  CHECK(std::distance(std::sregex_iterator(chat.err.begin(), chat.err.end(), turn), std::sregex_iterator()) == 2);
}

TEST_CASE("cli: the default context is the trained one, cut to what --ctx-memory holds", "[app][e2e]") {
  kvc::test::TempDir tmp;
  const std::string model = tmp.file("ctx8k.gguf");  // 2 layers x 2 KV heads x 16: 256 bytes a token
  auto mk = cli("mkmodel -q --ctx 8192 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 --vocab-from " +
                    quoted(kvc::test::model_path("stories260K.gguf")) + " -o " + quoted(model),
                tmp);
  REQUIRE(mk.exit_code == 0);
  auto full = cli("chat -m " + quoted(model) + " -t 2 -n 4 --temp 0", tmp, "hi\n");
  INFO(full.err);
  REQUIRE(full.exit_code == 0);
  CHECK(full.err.find("context 8192 (trained 8192; KV 2.0 MiB in f16, --ctx-memory 1024 MiB)") != std::string::npos);
  auto cut = cli("chat -m " + quoted(model) + " -t 2 -n 4 --temp 0 --ctx-memory 1", tmp, "hi\n");
  INFO(cut.err);
  REQUIRE(cut.exit_code == 0);
  CHECK(cut.err.find("context 4096 (trained 8192; KV 1.0 MiB in f16, --ctx-memory 1 MiB)") != std::string::npos);
  auto bad = cli("chat -m " + quoted(model) + " --ctx-memory 0", tmp, "hi\n");
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("--ctx-memory") != std::string::npos);
}

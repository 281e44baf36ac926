// A mixture-of-experts model (qwen3moe) through kvchat-cli: generate, chat, bench (its decode
// ceiling counts the experts a token runs, not the file), inspect, and one answer from serve.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <string>

#include "server/serve_process.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

std::string moe_model() { return test::model_path("tiny-qwen3moe-q4_0.gguf"); }

}  // namespace

TEST_CASE("kvchat-cli: a qwen3moe model generates, chats and is inspected", "[app][e2e]") {
  test::TempDir tmp;
  const auto gen = test::cli("generate -m " + test::quoted(moe_model()) + " -t 2 -p 'Once upon a time' -n 12", tmp);
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  CHECK_THAT(gen.err, Catch::Contains("generated 12 tokens"));
  const auto chat = test::cli("chat -m " + test::quoted(moe_model()) + " -t 2 -n 6", tmp, "Hello there\nAnd then?\n");
  INFO(chat.err);
  CHECK(chat.exit_code == 0);
  CHECK_THAT(chat.err, Catch::Contains("[6 tokens"));
  // inspect names the experts and the bytes a token reads of them.
  const auto inspect = test::cli("inspect " + test::quoted(moe_model()), tmp);
  INFO(inspect.out << inspect.err);
  REQUIRE(inspect.exit_code == 0);
  CHECK_THAT(inspect.out, Catch::Contains("experts:   8 per layer, 2 per token"));
  CHECK_THAT(inspect.out, Catch::Contains("active per token"));
}

TEST_CASE("kvchat-cli bench: a qwen3moe model's decode reads its chosen experts only", "[app][e2e]") {
  test::TempDir tmp;
  const auto r = test::cli("bench -m " + test::quoted(moe_model()) + " -t 2 --pp 32 --tg 8 -r 1 --json", tmp);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  const auto weights = j["weight_bytes"].get<size_t>(), experts = j["expert_bytes"].get<size_t>();
  const auto read = j["decode_read_bytes"].get<size_t>();
  // 2 layers x 3 tensors of 8 experts x 128 x 256 in Q4_0 (18 bytes a block of 32); a token runs 2 of 8.
  CHECK(experts == size_t{2} * 3 * 8 * 128 * 256 / 32 * 18);
  CHECK(read < weights - experts * 3 / 4 + 1);  // less the unread embedding rows too
  CHECK(read > weights - experts);
  CHECK(j["decode_tok_s"].get<double>() > 0);
}

TEST_CASE("serve: a qwen3moe model answers a chat completion", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(moe_model(), tmp.file("data"), "--alias kvchat-test", tmp);
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(30, 0);
  const std::string body = json{
      {"model", "kvchat-test"},
      {"messages", json::array({json{{"role", "user"}, {"content", "Once upon a time"}}})},
      {"max_tokens", 8},
      {"temperature", 0}}.dump();
  auto r = c.Post("/v1/chat/completions", body, "application/json");
  REQUIRE(r);
  INFO(r->body << "\n" << s.log());
  REQUIRE(r->status == 200);
  const json j = json::parse(r->body);
  CHECK(j["usage"]["completion_tokens"].get<int>() == 8);
  CHECK(s.stop() == 0);
}

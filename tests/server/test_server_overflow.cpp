// kvchat-cli serve past the end of the context: a 60-turn history resent on a 512-token model is answered every turn,
// its oldest messages left out by whole turns, the cache warm, the same cut after a restart.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "core/chat/context_window.h"
#include "server/serve_process.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

json post_chat(httplib::Client& c, const json& messages) {
  json body{{"model", "kvchat-test"}, {"messages", messages}, {"max_tokens", 32}, {"temperature", 0}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  REQUIRE(r);
  INFO(r->body);
  REQUIRE(r->status == 200);
  return json::parse(r->body);
}

}  // namespace

TEST_CASE("serve: a history longer than the context leaves out its oldest turns and stays cached", "[app][server]") {
  test::TempDir tmp;
  const std::string model = tmp.file("ctx512.gguf");
  auto mk =
      test::cli("mkmodel -q --ctx 512 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 128 --type q8_0 --vocab-from " +
                    test::quoted(test::model_path("stories260K.gguf")) + " -o " + test::quoted(model),
                tmp);
  REQUIRE(mk.exit_code == 0);
  std::vector<std::string> lines;
  {
    std::istringstream in(test::read_file(test::data_dir() / "conversations/sixty-turns.txt"));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  REQUIRE(lines.size() == 60);

  json messages = json::array({json{
      {"role", "system"},
      {"content", "You are a storyteller. You tell short, happy stories about animals, children and their friends."}}});
  int64_t outside = 0, previous_end = 0, n_warm = 0, n_cuts = 0, n_between = 0;
  {
    test::ServeProcess s(model, tmp.file("data"), "--alias kvchat-test", tmp);
    httplib::Client c("127.0.0.1", s.port());
    c.set_read_timeout(60, 0);
    for (const std::string& line : lines) {
      messages.push_back(json{{"role", "user"}, {"content", line}});
      const json j = post_chat(c, messages);
      INFO(j.dump());
      const json& u = j["usage"];
      const json& k = j["kvchat"];
      const int64_t n_prompt = u["prompt_tokens"], cached = u["prompt_tokens_details"]["cached_tokens"];
      const int64_t now = k["messages_outside_context"];
      CHECK(n_prompt + u["completion_tokens"].get<int64_t>() <= 512);
      CHECK(now >= outside);
      CHECK(now % 2 == 0);  // whole turns
      CHECK(k["context_note"] == chat::outside_context_note(now));
      if (now == outside && previous_end > 0) {
        ++n_between;
        n_warm += cached >= previous_end - 16;
      }
      if (now != outside) ++n_cuts;
      if (previous_end > 0) CHECK(cached >= 32);  // at a cut too: the system prompt's blocks
      outside = now;
      previous_end = n_prompt + u["completion_tokens"].get<int64_t>();
      messages.push_back(json{{"role", "assistant"}, {"content", j["choices"][0]["message"]["content"]}});
    }
    CHECK(n_cuts >= 3);
    CHECK(n_warm == n_between);  // every turn between cuts extends the cached prefix
    CHECK(n_between >= 30);
    CHECK(s.stop() == 0);
  }
  // After a restart the same history gets the same cut (replayed from the messages), served from disk.
  messages.push_back(json{{"role", "user"}, {"content", "One more story, please."}});
  test::ServeProcess s2(model, tmp.file("data"), "--alias kvchat-test", tmp);
  httplib::Client c2("127.0.0.1", s2.port());
  c2.set_read_timeout(60, 0);
  const json j = post_chat(c2, messages);
  INFO(j.dump());
  CHECK(j["kvchat"]["messages_outside_context"].get<int64_t>() >= outside);
  if (j["kvchat"]["messages_outside_context"].get<int64_t>() == outside) {
    CHECK(j["kvchat"]["cached_tokens_by_tier"]["t2"].get<int64_t>() >= previous_end - 32);
  } else {
    CHECK(j["kvchat"]["cached_tokens_by_tier"]["t2"].get<int64_t>() >= 16);
  }
  CHECK(s2.stop() == 0);
}

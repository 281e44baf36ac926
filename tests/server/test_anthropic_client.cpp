// kvchat-cli serve's Anthropic Messages API driven by the official @anthropic-ai/sdk npm client
// (tests/server/anthropic_client.mjs): a plain message, the same streamed with client.messages.stream,
// count_tokens, the next turn served from the cache, a tool use round trip and a named forced tool, bad
// requests as the SDK's errors, and the key sent as x-api-key.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "server/npm_client.h"
#include "server/serve_process.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

// A tool_use block of the forced calls: a call of `name` (any when empty) with an input its enum allows.
void check_call(const json& message, const std::string& only) {
  INFO(message.dump());
  CHECK(message["stop_reason"] == "tool_use");
  REQUIRE(message["tool_use"].size() == 1);
  const json& use = message["tool_use"][0];
  CHECK(use["id"].get<std::string>().rfind("toolu_", 0) == 0);
  const std::string name = use["name"];
  if (!only.empty()) CHECK(name == only);
  const json& input = use["input"];
  REQUIRE(input.is_object());
  if (name == "get_weather") {
    const std::string city = input.value("city", "");
    CHECK((city == "Paris" || city == "Lyon" || city == "Nice"));
  } else {
    CHECK(name == "get_time");
    const std::string zone = input.value("zone", "");
    CHECK((zone == "UTC" || zone == "CET"));
  }
}

}  // namespace

TEST_CASE("serve: the anthropic client's messages, streamed, counted, cached, with tools and errors",
          "[app][e2e][server]") {
  if (const std::string why = test::anthropic_client_missing(); !why.empty()) KVC_SKIP(why);
  test::TempDir tmp;
  const std::string model = test::make_chat_model(tmp);
  test::ServeProcess s(model, tmp.file("data"), "--api-key sesame", tmp);
  const json r = test::run_node(s, "anthropic_client.mjs", "sesame");
  INFO(r.dump());

  // A plain message: Anthropic's shape, the first request (nothing cached), count_tokens its prompt.
  const json& plain = r["plain"];
  CHECK(plain["id"].get<std::string>().rfind("msg_", 0) == 0);
  CHECK(plain["type"] == "message");
  CHECK(plain["role"] == "assistant");
  CHECK(plain["model"] == test::k_chat_model_id);
  CHECK((plain["stop_reason"] == "end_turn" || plain["stop_reason"] == "max_tokens"));
  CHECK(plain["usage"]["output_tokens"].get<int>() <= 12);
  CHECK(plain["usage"]["output_tokens"].get<int>() > 0);
  CHECK(plain["usage"]["cache_read_input_tokens"] == 0);
  CHECK(r["count"].get<int>() > 10);
  CHECK(r["count"] == plain["usage"]["input_tokens"]);

  // Streamed: Anthropic's events in order; the text deltas are the final message's text, which is the
  // whole answer's (greedy), and the final usage is the message_delta's.
  const json& st = r["stream"];
  const json& ev = st["events"];
  REQUIRE(ev.size() >= 5);
  CHECK(ev[0] == "message_start");
  CHECK(ev[1] == "content_block_start");
  CHECK(ev[2] == "content_block_delta");
  CHECK(ev[ev.size() - 3] == "content_block_stop");
  CHECK(ev[ev.size() - 2] == "message_delta");
  CHECK(ev[ev.size() - 1] == "message_stop");
  CHECK(!st["deltas"].get<std::string>().empty());
  // On the wire, with the ping the SDK does not pass on.
  const json& wire = r["wire"]["events"];
  CHECK(r["wire"]["status"] == 200);
  CHECK(r["wire"]["type"].get<std::string>().rfind("text/event-stream", 0) == 0);
  // (as many text deltas as the engine's output was read in pieces: runs of them count as one)
  const auto runs = [](const json& names, size_t from) {
    std::vector<std::string> out;
    for (size_t i = from; i < names.size(); ++i) {
      if (out.empty() || names[i] != out.back() || names[i] != "content_block_delta") out.push_back(names[i]);
    }
    return out;
  };
  REQUIRE(wire.size() >= 2);
  CHECK(wire[0] == "message_start");
  CHECK(wire[1] == "ping");
  CHECK(runs(wire, 2) == runs(ev, 1));
  CHECK(st["deltas"] == st["final"]["text"]);
  CHECK(st["final"]["text"] == plain["text"]);
  CHECK(st["final"]["stop_reason"] == plain["stop_reason"]);
  CHECK(st["final"]["usage"]["output_tokens"] == plain["usage"]["output_tokens"]);
  // The same prompt again: served from the cache (all but the last partial block or so).
  const int64_t total = plain["usage"]["input_tokens"].get<int64_t>();
  CHECK(st["final"]["usage"]["cache_read_input_tokens"].get<int64_t>() > 0);
  CHECK(st["final"]["usage"]["input_tokens"].get<int64_t>() +
            st["final"]["usage"]["cache_read_input_tokens"].get<int64_t>() ==
        total);

  // The conversation's next turn: its history, with the first answer, is read from the cache.
  const json& next = r["next"];
  const int64_t next_read = next["usage"]["cache_read_input_tokens"].get<int64_t>();
  INFO("next turn: input " << next["usage"]["input_tokens"] << ", read from cache " << next_read);
  CHECK(next_read >= total + plain["usage"]["output_tokens"].get<int64_t>() - 16);
  CHECK(next["usage"]["input_tokens"].get<int64_t>() < next_read);

  // A tool use round trip: the forced call, its result sent back, an answer.
  check_call(r["called"], "");
  REQUIRE(r.contains("answered"));
  const json& answered = r["answered"];
  CHECK((answered["stop_reason"] == "end_turn" || answered["stop_reason"] == "max_tokens" ||
         answered["stop_reason"] == "tool_use"));
  CHECK(answered["usage"]["cache_read_input_tokens"].get<int64_t>() >
        r["called"]["usage"]["input_tokens"].get<int64_t>() +
            r["called"]["usage"]["cache_read_input_tokens"].get<int64_t>() - 16);
  CHECK(r["call_tokens"].get<int>() > 10);    // the tool_use block rendered by the template
  CHECK(r["result_tokens"].get<int>() >= 4);  // "18 C and sunny" in the tool_result
  // A named tool, whole and streamed (its input as input_json_delta).
  check_call(r["named"], "get_time");
  check_call(r["named_stream"], "get_time");
  CHECK(json::parse(r["named_stream"]["input_json"].get<std::string>()) == r["named_stream"]["tool_use"][0]["input"]);

  // A client that aborts mid-stream cancels its generation, as on the OpenAI route.
  CHECK(r["abort"]["pieces"] == 2);
  CHECK(r["abort"]["cancelled"] == 1);
  CHECK(r["abort"]["decoded"].get<double>() <
        1400);  // all the test's generations, the aborted one's 1500 not among them

  // Errors: the SDK's classes, Anthropic's error types, the server's messages naming the field.
  const json& no_max = r["no_max_tokens"];
  CHECK(no_max["status"] == 400);
  CHECK(no_max["bad_request"] == true);
  CHECK(no_max["type"] == "invalid_request_error");
  CHECK(no_max["shape"] == "error");  // {"type": "error", "error": {...}}, not OpenAI's {"error": {...}}
  CHECK(no_max["message"].get<std::string>().find("max_tokens: Field required") != std::string::npos);
  CHECK(r["image"]["bad_request"] == true);
  CHECK(r["image"]["message"].get<std::string>().find("messages.0.content.0.type: image blocks are not supported") !=
        std::string::npos);
  CHECK(r["stream_error"]["bad_request"] == true);
  CHECK(r["stream_error"]["message"].get<std::string>().find("temperature") != std::string::npos);
  CHECK(r["wrong_key"]["status"] == 401);
  CHECK(r["wrong_key"]["authentication"] == true);
  CHECK(r["wrong_key"]["type"] == "authentication_error");
  CHECK(r["wrong_key"]["shape"] == "error");
  CHECK(s.stop() == 0);
}

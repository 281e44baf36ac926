// kvchat-cli serve driven by the official openai npm client (tests/server/openai_client.mjs):
// chat whole and streamed, completions, models, stop strings, errors, a mid-stream abort, and
// resent histories hitting the cache turn by turn and after a restart, from disk; a bounded
// load of 16 concurrent streamed conversations (tests/server/load_driver.mjs); and function
// calling (tests/server/openai_tools.mjs): tools in an agent loop against serve, and recorded
// model replies with calls answered as the server answers them, read back by the client.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cstdio>

#include "app/server/openai_json.h"
#include "core/chat/tool_calls.h"
#include "server/npm_client.h"
#include "server/serve_process.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

const std::string k_model_id = test::k_chat_model_id;
using test::run_node;
using test::run_node_at;

std::string client_missing() { return test::openai_client_missing(); }

// One scenario of openai_client.mjs.
json run_client(const test::ServeProcess& s, const std::string& scenario, const std::string& file = "") {
  return run_node(s, "openai_client.mjs", scenario + " " + test::quoted(file));
}

struct Fixture {
  test::TempDir tmp;
  std::string model = test::make_chat_model(tmp);
  std::string data = tmp.file("data");
};

}  // namespace

TEST_CASE("serve: the openai client chats, whole and streamed", "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json chat = run_client(s, "chat");
  CHECK(chat["object"] == "chat.completion");
  CHECK(chat["model"] == k_model_id);
  CHECK(chat["role"] == "assistant");
  CHECK(!chat["content"].get<std::string>().empty());
  CHECK((chat["finish_reason"] == "length" || chat["finish_reason"] == "stop"));
  CHECK(chat["usage"]["completion_tokens"].get<int>() <= 12);
  CHECK(chat["usage"]["prompt_tokens"].get<int>() > 5);
  CHECK(chat["usage"]["prompt_tokens_details"]["cached_tokens"].is_number());

  const json st = run_client(s, "stream");
  CHECK(st["role"] == "assistant");
  CHECK(st["content"] == st["whole"]);  // greedy: streamed and whole answers agree
  CHECK(st["chunks"].get<int>() >= 4);  // role, text..., finish, usage
  CHECK(!st["finish_reason"].is_null());
  REQUIRE(st["usage"].is_object());
  CHECK(st["usage"]["completion_tokens"].get<int>() > 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve: the openai client's completions and models", "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json c = run_client(s, "completions");
  CHECK(c["object"] == "text_completion");
  CHECK(!c["text"].get<std::string>().empty());
  CHECK(c["text"] == c["streamed"]);
  CHECK(c["finish_reason"] == c["streamed_finish_reason"]);
  CHECK(c["usage"]["completion_tokens"].get<int>() <= 10);
  const json m = run_client(s, "models");
  CHECK(m["ids"] == json::array({k_model_id}));
  CHECK(m["retrieved"] == k_model_id);
}

TEST_CASE("serve: stop strings cut the answer before them, whole and streamed", "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json r = run_client(s, "stop");
  INFO(r.dump());
  REQUIRE(!r["stop"].get<std::string>().empty());
  CHECK(r["content"] == r["expected"]);
  CHECK(r["finish_reason"] == "stop");
  CHECK(r["streamed"] == r["expected"]);
  CHECK(r["streamed_finish_reason"] == "stop");
}

TEST_CASE("serve: bad requests from the openai client get 4xx and the server keeps serving", "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json r = run_client(s, "errors");
  INFO(r.dump());
  CHECK(r["bad_model"]["status"] == 404);  // as OpenAI answers an unknown model
  CHECK(r["bad_model"]["code"] == "model_not_found");
  CHECK(r["bad_temperature"]["status"] == 400);
  CHECK(r["bad_temperature"]["param"] == "temperature");
  CHECK(r["no_messages"]["status"] == 400);
  CHECK(r["too_many_tokens"]["status"] == 400);
  CHECK(r["too_many_tokens"]["param"] == "max_tokens");
  CHECK(!r["after"].is_null());
}

TEST_CASE("serve: a client that aborts mid-stream cancels its generation", "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json r = run_client(s, "abort");
  INFO(r.dump());
  CHECK(r["chunks"] == 2);
  CHECK(r["cancelled_after"].get<double>() == r["cancelled_before"].get<double>() + 1);
  CHECK(r["decoded_tokens"].get<double>() < 1000);  // of the 1500 asked for
  CHECK(!r["next_finish_reason"].is_null());
  CHECK(s.stop() == 0);
}

// Turn N's cached prompt tokens cover turn N-1's prompt and answer (less one partial block):
// the resent answers map back to the engine's sampled ids. After a restart, the same history
// comes from the disk tier.
TEST_CASE("serve: resent histories hit the cache turn by turn, and from disk after a restart", "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  const std::string history = f.tmp.file("history.json");
  int64_t last_seen = 0;  // the last turn's prompt + answer
  {
    test::ServeProcess s(f.model, f.data, "", f.tmp);
    const json r = run_client(s, "turns", history);
    INFO(r.dump());
    const json& turns = r["turns"];
    REQUIRE(turns.size() == 4);
    for (size_t n = 0; n < turns.size(); ++n) {
      const json& u = turns[n]["usage"];
      const int64_t cached = u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
      INFO("turn " << n + 1 << ": prompt " << u["prompt_tokens"] << ", cached " << cached);
      if (n > 0) {
        const json& prev = turns[n - 1]["usage"];
        CHECK(cached >= prev["prompt_tokens"].get<int64_t>() + prev["completion_tokens"].get<int64_t>() - 16);
        CHECK(turns[n]["kvchat"]["history_answers_mapped"] == n);
      }
      last_seen = u["prompt_tokens"].get<int64_t>() + u["completion_tokens"].get<int64_t>();
    }
    REQUIRE(s.stop() == 0);  // SIGTERM: a clean exit, the stores flushed
  }
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json r = run_client(s, "resume", history);
  INFO(r.dump() << "\nserver log: " << s.log());
  const int64_t cached = r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  CHECK(cached >= last_seen - 16);
  CHECK(r["kvchat"]["cached_tokens_by_tier"]["t2"].get<int64_t>() >= last_seen - 16);
  CHECK(r["kvchat"]["history_answers_mapped"] == 4);
  CHECK(s.stop() == 0);
}

// The bounded load test: 16 conversations of 4 streamed turns at once over a shared system
// prompt, on 4 engine slots. Every request succeeds, every later turn is served from the cache
// (the resent history maps back to the sampled ids), and the cache's invariants hold at the
// end (serve checks them on SIGTERM and exits 4 if they do not).
TEST_CASE("serve: 16 concurrent streamed conversations of 4 turns: no errors, every turn cached, invariants hold",
          "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "--parallel 4", f.tmp);
  const json r = run_node(s, "load_driver.mjs", "16 4 16 concurrent", 300);
  INFO(r.dump());
  CHECK(r["n_requests"] == 64);
  CHECK(r["n_ok"] == 64);
  CHECK(r["n_errors"] == 0);
  CHECK(r["cache_criterion"]["checked"] == 48);
  CHECK(r["cache_criterion"]["met"] == 48);
  CHECK(r["completion_tokens"].get<int64_t>() > 64);
  CHECK(r["ttft_p99_ms"].get<double>() >= r["ttft_p50_ms"].get<double>());
  // Client side: one gap per content chunk after a stream's first.
  CHECK(r["itl_n"].get<int64_t>() > 0);
  CHECK(r["itl_p99_ms"].get<double>() >= r["itl_p50_ms"].get<double>());
  // Server side: one inter-token latency per token after each answer's first.
  httplib::Client http("127.0.0.1", s.port());
  const auto got = http.Get("/metrics");
  REQUIRE(got);
  const std::string metrics = got->body;
  INFO(metrics);
  const int64_t n_gaps = r["completion_tokens"].get<int64_t>() - r["answers_with_tokens"].get<int64_t>();
  CHECK(metrics.find("kvchat_completion_tokens_total " + std::to_string(r["completion_tokens"].get<int64_t>()) +
                     "\n") != std::string::npos);
  CHECK(metrics.find("kvchat_inter_token_latency_seconds_count " + std::to_string(n_gaps) + "\n") != std::string::npos);
  CHECK(r["itl_n"].get<int64_t>() <= n_gaps);  // a chunk holds one token or more
  INFO(s.log());
  CHECK(s.stop() == 0);
}

// An agent loop through the openai client: tools accepted whole and streamed, tool calls and
// tool results resent, each request's cached tokens covering the one before (less one partial
// block), tool_choice none answered, a forced call with a response_format refused.
TEST_CASE("serve: the openai client sends tools and tool results in an agent loop, the cache hits every turn",
          "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json r = run_node(s, "openai_tools.mjs", "loop");
  INFO(r.dump());
  // Random weights write no call: a plain answer, finish stop or length, with tools accepted.
  CHECK((r["whole"]["finish_reason"] == "stop" || r["whole"]["finish_reason"] == "length"));
  CHECK(r["whole"]["message"]["role"] == "assistant");
  CHECK((r["streamed"]["finish_reason"] == "stop" || r["streamed"]["finish_reason"] == "length"));
  CHECK(!r["helper"]["finish_reason"].is_null());
  const json& turns = r["turns"];
  REQUIRE(turns.size() == 3);
  for (size_t n = 1; n < turns.size(); ++n) {
    const int64_t prev_prompt = turns[n - 1]["prompt_tokens"].get<int64_t>();
    const int64_t cached = turns[n]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    INFO("turn " << n + 1 << ": prompt " << turns[n]["prompt_tokens"] << ", cached " << cached);
    CHECK(turns[n]["prompt_tokens"].get<int64_t>() > prev_prompt);
    CHECK(cached >= prev_prompt - 16);
  }
  CHECK(!r["none"].is_null());
  CHECK(r["required_with_schema"]["status"] == 400);
  CHECK(r["required_with_schema"]["param"] == "response_format");
  CHECK(r["unknown_name"]["param"] == "tool_choice.function.name");
  CHECK(r["bad_tool"]["param"] == "tools[0].function.name");
  CHECK(r["no_call_id"]["param"] == "messages[7].tool_call_id");
  CHECK(s.stop() == 0);
}

// tool_choice required and a named function: grammar-constrained sampling holds even a random-weight
// model to a call in its template's format (Hermes: <tool_call> JSON </tool_call>), which comes back
// as tool_calls with arguments the tool's schema allows, whole, streamed and with random seeds.
TEST_CASE("serve: tool_choice required or named makes the model call, through the openai client",
          "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  Fixture f;
  test::ServeProcess s(f.model, f.data, "", f.tmp);
  const json r = run_node(s, "openai_tools.mjs", "forced");
  INFO(r.dump());
  REQUIRE(!r.contains("failed"));
  const auto check_call = [](const json& answer, const std::string& only) {
    INFO(answer.dump());
    CHECK(answer["finish_reason"] == "tool_calls");
    REQUIRE(answer["tool_calls"].size() == 1);  // parallel_tool_calls false
    const json& c = answer["tool_calls"][0];
    CHECK(c["type"] == "function");
    CHECK(c["id"].get<std::string>().rfind("call_", 0) == 0);
    const std::string name = c["name"];
    if (!only.empty()) CHECK(name == only);
    const json args = json::parse(c["arguments"].get<std::string>(), nullptr, false);
    REQUIRE(args.is_object());
    CHECK(args.size() == 1);
    if (name == "get_weather") {
      const std::string city = args.value("city", "");
      CHECK((city == "Paris" || city == "Lyon" || city == "Nice"));
    } else {
      CHECK(name == "get_time");
      const std::string zone = args.value("zone", "");
      CHECK((zone == "UTC" || zone == "CET"));
    }
  };
  check_call(r["whole"], "");
  check_call(r["streamed"], "");
  check_call(r["named"], "get_time");
  REQUIRE(r["seeded"].size() == 4);
  for (const json& a : r["seeded"]) check_call(a, "");
  CHECK(s.stop() == 0);
}

// Model replies with calls (tests/data/tool-calls), answered by the server's own response code,
// whole and as the stream it sends (pieces of 3 bytes), and read back by the openai client: its
// raw stream, its accumulating stream helper and its parse of the whole answer agree on the calls.
TEST_CASE("serve: recorded replies with tool calls reach the openai client as tool_calls, whole and streamed",
          "[app][e2e][server]") {
  if (const std::string why = client_missing(); !why.empty()) KVC_SKIP(why);
  struct Pick {
    const char* family;
    chat::ToolFormat format;
    const char* name;
  };
  const Pick picks[] = {{"hermes", chat::ToolFormat::hermes, "two parallel calls"},
                        {"hermes", chat::ToolFormat::hermes, "text before the call"},
                        {"hermes", chat::ToolFormat::hermes, "malformed JSON stays text"},
                        {"llama3", chat::ToolFormat::llama3, "python_tag built-in tool"},
                        {"mistral", chat::ToolFormat::mistral, "name[ARGS] form (Small 3.2)"},
                        {"harmony", chat::ToolFormat::harmony, "analysis then a call"},
                        {"deepseek", chat::ToolFormat::deepseek, "R1 call"},
                        {"gemma", chat::ToolFormat::gemma, "two calls, text before"}};
  json cases = json::array(), expected = json::array();
  for (const Pick& p : picks) {
    const json doc = json::parse(test::read_file(test::data_dir() / "tool-calls" / (std::string(p.family) + ".json")));
    json c;
    for (const json& x : doc["cases"]) {
      if (x["name"] == p.name) c = x;
    }
    REQUIRE(c.is_object());
    const std::string reply = c["reply"];
    const server::ResponseIds ids{"chatcmpl-recorded-" + std::to_string(cases.size()), 1700000000, k_model_id};
    engine::RequestResult r;
    r.state = engine::RequestState::finished;
    r.reason = model::StopReason::end_of_generation;
    r.text = reply;
    json whole = server::chat_completion(ids, r, 10, {});
    server::set_tool_reply(whole, chat::parse_reply(reply, p.format, true, ids.id));
    // The stream as Stream::pump writes it.
    chat::ToolCallStream stream(p.format, ids.id);
    std::string sse = server::sse_event(server::chat_chunk(ids, json{{"role", "assistant"}, {"content", ""}}, ""));
    for (size_t at = 0; at < reply.size(); at += 3) {
      sse += server::tool_stream_events(ids, stream.feed(std::string_view(reply).substr(at, 3)));
    }
    sse += server::tool_stream_events(ids, stream.finish());
    const bool called = !stream.parsed().tool_calls.empty();
    sse += server::sse_event(server::chat_chunk(ids, json::object(), called ? "tool_calls" : "stop"));
    sse += server::k_sse_done;
    cases.push_back(json{{"name", p.name}, {"whole", server::dump(whole)}, {"sse", sse}});
    expected.push_back(c);
  }
  test::TempDir tmp;
  const std::string file = tmp.file("recorded.json");
  {
    std::FILE* out = std::fopen(file.c_str(), "w");
    REQUIRE(out);
    const std::string text = cases.dump();
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
  }
  // No server: the client reads the recorded responses through its fetch.
  const json r = run_node_at("http://recorded.invalid/v1", "openai_tools.mjs", "recorded " + test::quoted(file));
  INFO(r.dump());
  REQUIRE(r["cases"].size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const json& want = expected[i];
    const json& got = r["cases"][i];
    INFO(want["name"]);
    const bool calls = !want["calls"].empty();
    for (const char* how : {"whole", "stream", "helper"}) {
      INFO(how);
      const json& g = got[how];
      CHECK(g["finish_reason"] == (calls ? "tool_calls" : "stop"));
      const std::string content = g["content"].is_null() ? "" : g["content"].get<std::string>();
      CHECK(content == want["content"].get<std::string>());
      REQUIRE(g["tool_calls"].size() == want["calls"].size());
      for (size_t k = 0; k < want["calls"].size(); ++k) {
        const json& call = g["tool_calls"][k];
        CHECK(call["id"] == chat::tool_call_id("chatcmpl-recorded-" + std::to_string(i), k));
        CHECK(call["type"] == "function");
        CHECK(call["function"]["name"] == want["calls"][k][0]);
        CHECK(call["function"]["arguments"] == want["calls"][k][1]);
      }
    }
    if (calls) CHECK(got["whole"]["content"].is_null() == want["content"].get<std::string>().empty());
  }
}

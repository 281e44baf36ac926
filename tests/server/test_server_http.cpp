// kvchat-cli serve over raw HTTP (cpp-httplib's client): hostile and malformed requests each get
// their 4xx with an OpenAI error object and the server keeps serving; the API key, the queue
// limit (429 + Retry-After), concurrent streams, and a history resent as text hitting the cache.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "server/serve_process.h"
#include "storage/sqlite_cold_store.h"
#include "support/model_fixture.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

// Every server here runs with --alias kvchat-test, whichever model file it loads.
const char* k_model_id = "kvchat-test";

std::string chat_body(const std::string& user, int max_tokens, bool stream = false) {
  return json{{"model", k_model_id},
              {"messages", json::array({json{{"role", "user"}, {"content", user}}})},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"stream", stream}}
      .dump();
}

httplib::Client client_for(const test::ServeProcess& s) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(30, 0);
  c.set_connection_timeout(5, 0);
  return c;
}

// The response's OpenAI error object; the test fails when there is none.
json error_of(const httplib::Result& r) {
  REQUIRE(r);
  const json j = json::parse(r->body, nullptr, false);
  INFO(r->body);
  REQUIRE(j.is_object());
  REQUIRE(j.contains("error"));
  CHECK(j["error"]["message"].is_string());
  CHECK(j["error"]["type"].is_string());
  return j["error"];
}

// The value of the sample `name` (with its labels, if any) in a Prometheus text; -1 when absent.
double metric(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = ("\n" + text).find(key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + key.size() - 1));
}

// The server still answers a real request.
void check_serving(httplib::Client& c) {
  auto h = c.Get("/health");
  REQUIRE(h);
  CHECK(h->status == 200);
  auto r = c.Post("/v1/chat/completions", chat_body("Once upon a time", 4), "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
}

}  // namespace

TEST_CASE("serve: malformed, mistyped, oversized and misrouted requests get 4xx", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test --max-body 65536",
                       tmp);
  httplib::Client c = client_for(s);
  const auto post = [&](const std::string& body) { return c.Post("/v1/chat/completions", body, "application/json"); };

  SECTION("malformed JSON") {
    for (const char* body : {"{bad", "", "[1, 2", "{\"model\": \"stories260K\", \"messages\": [}", "\xff\xfe{}"}) {
      INFO(body);
      auto r = post(body);
      CHECK(error_of(r)["message"].get<std::string>().find("JSON") != std::string::npos);
      CHECK(r->status == 400);
    }
  }
  SECTION("wrong types and ranges name the field") {
    const json base = json::parse(chat_body("Hi", 4));
    const std::vector<std::pair<json, std::string>> cases = {
        {json{{"messages", "hi"}}, "messages"},
        {json{{"messages", json::array({json{{"role", "user"}, {"content", 7}}})}}, "messages[0].content"},
        {json{{"messages", json::array({json{{"role", "wizard"}, {"content", "x"}}})}}, "messages[0].role"},
        {json{{"messages",
               json::array({json{{"role", "user"}, {"content", json::array({json{{"type", "image_url"}}})}}})}},
         "messages[0].content[0].type"},
        {json{{"max_tokens", "10"}}, "max_tokens"},
        {json{{"max_tokens", 0}}, "max_tokens"},
        {json{{"temperature", -1}}, "temperature"},
        {json{{"top_p", 0}}, "top_p"},
        {json{{"stream", "yes"}}, "stream"},
        {json{{"stop", json::array({1, 2})}}, "stop"},
        {json{{"stop", json::array({"a", "b", "c", "d", "e"})}}, "stop"},
        {json{{"n", 3}}, "n"},
        {json{{"model", 42}}, "model"},
        {json{{"tools", json::array({json{{"type", "function"}}})}}, "tools[0].function"},
    };
    for (const auto& [patch, param] : cases) {
      json body = base;
      body.merge_patch(patch);
      INFO(body.dump());
      auto r = post(body.dump());
      CHECK(error_of(r)["param"] == param);
      CHECK(r->status == 400);
    }
    auto r = post("[1, 2, 3]");  // JSON, but not an object
    CHECK(error_of(r)["message"].get<std::string>().find("object") != std::string::npos);
    json body = base;
    body["messages"] =
        json::array({json{{"role", "user"}, {"content", "Hi"}}, json{{"role", "assistant"}, {"content", "Yes"}}});
    r = post(body.dump());
    CHECK(r->status == 400);  // nothing to answer: the last message is the assistant's
    CHECK(error_of(r)["param"] == "messages");
  }
  SECTION("a body over the limit, and one nested too deep") {
    json body = json::parse(chat_body(std::string(70000, 'x'), 4));
    auto r = post(body.dump());
    CHECK(error_of(r)["code"] == "body_too_large");
    CHECK(r->status == 413);
    r = post(std::string(30000, '[') + std::string(30000, ']'));
    CHECK(error_of(r)["message"].get<std::string>().find("deeper") != std::string::npos);
    CHECK(r->status == 400);
  }
  SECTION("an unknown route, a wrong method, an unknown model") {
    auto r = c.Get("/v1/nothing-here");
    CHECK(error_of(r)["code"] == "unknown_route");
    CHECK(r->status == 404);
    r = c.Get("/v1/chat/completions");
    CHECK(r->status == 404);
    json body = json::parse(chat_body("Hi", 4));
    body["model"] = "gpt-4o";
    r = post(body.dump());
    CHECK(error_of(r)["code"] == "model_not_found");
    CHECK(r->status == 404);
  }
  SECTION("a prompt longer than the context") {
    test::ServeProcess small(test::model_path("stories260K.gguf"), tmp.file("data-small"), "--alias kvchat-test -c 64",
                             tmp);
    httplib::Client c2 = client_for(small);
    auto r = c2.Post("/v1/chat/completions", chat_body(std::string(2000, 'a'), 4), "application/json");
    CHECK(error_of(r)["code"] == "context_length_exceeded");
    CHECK(r->status == 400);
    check_serving(c2);
  }
  check_serving(c);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve: --api-key wants a Bearer key on every route but /health", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test --api-key sesame",
                       tmp);
  httplib::Client c = client_for(s);
  auto r = c.Get("/v1/models");
  CHECK(error_of(r)["code"] == "invalid_api_key");
  CHECK(r->status == 401);
  r = c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer open"}});
  CHECK(error_of(r)["code"] == "invalid_api_key");
  CHECK(r->status == 401);
  r = c.Post("/v1/chat/completions", httplib::Headers{{"Authorization", "sesame"}}, chat_body("Hi", 2),
             "application/json");
  CHECK(r->status == 401);
  r = c.Get("/health");
  REQUIRE(r);
  CHECK(r->status == 200);
  r = c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer sesame"}});
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(json::parse(r->body)["data"][0]["id"] == k_model_id);
}

TEST_CASE("serve: a full queue answers 429 with Retry-After, and concurrent streams all finish", "[app][server]") {
  test::TempDir tmp;
  // A random-weights model: it never ends its answers early, and takes a while over 400 tokens.
  test::ServeProcess s(test::model_path("tiny-gqa-q8_0.gguf"), tmp.file("data"), "--alias kvchat-test --max-queue 4",
                       tmp);
  // Four streams at once fill the queue; each reads its whole answer.
  std::vector<std::future<std::string>> streams;
  for (int i = 0; i < 4; ++i) {
    streams.push_back(std::async(std::launch::async, [&s, i] {
      httplib::Client c = client_for(s);
      json body = json::parse(chat_body("Story " + std::to_string(i), 400, true));
      body["temperature"] = 1;
      body["seed"] = i;
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      return r ? std::to_string(r->status) + "\n" + r->body : std::string("no response");
    }));
  }
  httplib::Client c = client_for(s);
  int64_t in_flight = 0;
  for (int attempt = 0; attempt < 500 && in_flight < 4; ++attempt) {
    auto h = c.Get("/health");
    REQUIRE(h);
    in_flight = json::parse(h->body)["requests_in_flight"].get<int64_t>();
  }
  REQUIRE(in_flight == 4);
  auto r = c.Post("/v1/chat/completions", chat_body("One more", 2), "application/json");
  CHECK(error_of(r)["code"] == "queue_full");
  CHECK(r->status == 429);
  CHECK(r->get_header_value("Retry-After") == "1");
  for (auto& f : streams) {
    const std::string out = f.get();
    INFO(out.substr(0, 300));
    CHECK(out.starts_with("200\n"));
    CHECK(out.ends_with("data: [DONE]\n\n"));
  }
  check_serving(c);
}

// Without npm: the same criterion as the openai client's test, with the text a client gets.
TEST_CASE("serve: a history resent as text reuses the previous turn's KV", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  httplib::Client c = client_for(s);
  json messages = json::array({json{{"role", "system"}, {"content", "Tell stories."}}});
  int64_t previous = -1;
  int64_t n_gaps = 0;  // tokens answered - answers with a token: the inter-token latencies
  for (int turn = 0; turn < 3; ++turn) {
    messages.push_back(json{{"role", "user"}, {"content", "And then, part " + std::to_string(turn) + "?"}});
    json body{{"model", k_model_id}, {"messages", messages}, {"max_tokens", 20}, {"temperature", 1.0}, {"seed", turn}};
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const json j = json::parse(r->body);
    const json& u = j["usage"];
    INFO(r->body);
    if (previous >= 0) CHECK(u["prompt_tokens_details"]["cached_tokens"].get<int64_t>() >= previous - 16);
    previous = u["prompt_tokens"].get<int64_t>() + u["completion_tokens"].get<int64_t>();
    n_gaps += std::max<int64_t>(0, u["completion_tokens"].get<int64_t>() - 1);
    messages.push_back(json{{"role", "assistant"}, {"content", j["choices"][0]["message"]["content"]}});
  }
  auto m = c.Get("/metrics");
  REQUIRE(m);
  CHECK(m->body.find("kvchat_generations_total{endpoint=\"chat\",outcome=\"finished\"} 3") != std::string::npos);
  CHECK(m->body.find("kvchat_time_to_first_token_seconds_count 3") != std::string::npos);
  CHECK(m->body.find("# TYPE kvchat_kv_used_bytes gauge") != std::string::npos);
  INFO(m->body);
  CHECK(n_gaps > 0);
  CHECK(metric(m->body, "kvchat_inter_token_latency_seconds_count") == static_cast<double>(n_gaps));
  CHECK(metric(m->body, "kvchat_inter_token_latency_seconds_bucket{le=\"+Inf\"}") == static_cast<double>(n_gaps));
  CHECK(metric(m->body, "kvchat_inter_token_latency_seconds_sum") > 0);
}

TEST_CASE("serve: the disk tier knows its blocks' model, and collects them first once the file is deleted",
          "[app][server]") {
  test::TempDir tmp;
  const std::string model = tmp.file("copy-of-stories260K.gguf");
  std::filesystem::copy_file(test::model_path("stories260K.gguf"), model);
  {
    test::ServeProcess s(model, tmp.file("data"), "--alias kvchat-test", tmp);
    httplib::Client c = client_for(s);
    auto r =
        c.Post("/v1/chat/completions", chat_body("Once upon a time there was a little dog", 24), "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    REQUIRE(s.stop() == 0);  // flushes the blocks written behind
  }
  const std::filesystem::path cold_dir = std::filesystem::path(tmp.file("data")) / "serve" / "kv-cache";
  {
    auto store = storage::SqliteColdStore::open(cold_dir);
    REQUIRE(store.ok());
    REQUIRE((*store)->stats().n_blocks > 0);
    CHECK((*store)->extra_stats().n_blocks_of_missing_models == 0);  // the model is still there
  }
  std::filesystem::remove(model);
  auto store = storage::SqliteColdStore::open(cold_dir);
  REQUIRE(store.ok());
  const int64_t n_blocks = (*store)->stats().n_blocks;
  CHECK(n_blocks > 0);
  CHECK((*store)->extra_stats().n_blocks_of_missing_models == n_blocks);
}

TEST_CASE("serve: --kv-type int4 holds the same conversation in 0.375x of F16's KV bytes", "[app][server]") {
  test::TempDir tmp;
  auto t0_used = [&](const std::string& kv) {
    test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data-" + kv),
                         "--alias kvchat-test --kv-type " + kv, tmp);
    httplib::Client c = client_for(s);
    auto r =
        c.Post("/v1/chat/completions", chat_body("Once upon a time there was a little dog", 40), "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    auto m = c.Get("/metrics");
    REQUIRE(m);
    const double used = metric(m->body, "kvchat_kv_used_bytes{tier=\"t0\"}");
    INFO(m->body);
    REQUIRE(used > 0);
    CHECK(s.stop() == 0);
    return used;
  };
  const double f16 = t0_used("f16");
  const double int4 = t0_used("int4");
  CHECK(int4 == Approx(f16 * 240.0 / 640.0));  // stories260K: 640 bytes per token in F16, 240 in INT4 (groups of 8)
  auto bad = test::cli("serve -m " + test::quoted(test::model_path("stories260K.gguf")) + " --port 0 --data-dir " +
                           test::quoted(tmp.file("data-bad")) + " --kv-type int5",
                       tmp);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--kv-type must be"));
}

TEST_CASE("serve: /metrics reports each KV layer group's bytes, a windowed group beside the global one",
          "[app][server]") {
  test::TempDir tmp;
  // tiny-gemma2: layers alternate local (window 64) and global, so the cache keeps two groups.
  test::ServeProcess s(test::model_path("tiny-gemma2-f16.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  httplib::Client c = client_for(s);
  auto r = c.Post("/v1/chat/completions", chat_body("Once upon a time there was a little dog", 16), "application/json");
  REQUIRE(r);
  REQUIRE(r->status == 200);
  auto m = c.Get("/metrics");
  REQUIRE(m);
  INFO(m->body);
  const double global = metric(m->body, "kvchat_kv_group_used_bytes{group=\"0\",window=\"0\",tier=\"t0\"}");
  const double local = metric(m->body, "kvchat_kv_group_used_bytes{group=\"1\",window=\"64\",tier=\"t0\"}");
  CHECK(global > 0);
  CHECK(local > 0);
  // The two groups are the whole cache: the total is their sum.
  CHECK(global + local == metric(m->body, "kvchat_kv_used_bytes{tier=\"t0\"}"));
  CHECK(metric(m->body, "kvchat_kv_group_capacity_bytes{group=\"1\",window=\"64\",tier=\"t0\"}") > 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve: a client that hangs up on a whole (non-streamed) answer cancels it", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("tiny-gqa-q8_0.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  {
    httplib::Client c = client_for(s);
    c.set_read_timeout(0, 300'000);  // gives up after 0.3 s, long before 1500 tokens
    auto r = c.Post("/v1/chat/completions", chat_body("Hi", 1500), "application/json");
    CHECK_FALSE(r);
  }
  httplib::Client c = client_for(s);
  std::string metrics;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto m = c.Get("/metrics");
    REQUIRE(m);
    metrics = m->body;
    if (metrics.find("outcome=\"cancelled\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO(metrics);
  CHECK(metrics.find("kvchat_generations_total{endpoint=\"chat\",outcome=\"cancelled\"} 1") != std::string::npos);
  check_serving(c);
}

TEST_CASE("serve: SIGTERM ends streams in flight with an error event and exits cleanly", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("tiny-gqa-q8_0.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  auto stream = std::async(std::launch::async, [&s] {
    httplib::Client c = client_for(s);
    auto r = c.Post("/v1/chat/completions", chat_body("Hi", 1500, true), "application/json");
    return r ? r->body : std::string("no response");
  });
  httplib::Client c = client_for(s);
  // Until the stream runs: bounded by time, not by polls (a busy machine admits it late).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool running = false;
  while (!running && std::chrono::steady_clock::now() < deadline) {
    auto h = c.Get("/health");
    REQUIRE(h);
    running = json::parse(h->body)["requests_in_flight"] == 1;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(running);
  CHECK(s.stop() == 0);
  const std::string body = stream.get();
  INFO(body.substr(body.size() > 400 ? body.size() - 400 : 0));
  CHECK(body.find("data: {\"choices\"") != std::string::npos);
  CHECK(body.ends_with(
      "\"code\":\"server_shutting_down\",\"message\":\"the server is shutting down; retry once it is back\","
      "\"param\":null,\"type\":\"server_error\"}}\n\n"));
}

TEST_CASE("serve: a second server on the same port or data directory is refused", "[app][server]") {
  test::TempDir tmp;
  const std::string model = test::model_path("stories260K.gguf");
  test::ServeProcess s(model, tmp.file("data"), "", tmp);
  // httplib's default socket options (SO_REUSEPORT) would let it share the port silently.
  auto r = test::cli("serve -q -m " + test::quoted(model) + " --port " + std::to_string(s.port()) + " --data-dir " +
                         test::quoted(tmp.file("other")),
                     tmp);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("cannot listen on 127.0.0.1:" + std::to_string(s.port())));
  r = test::cli("serve -q -m " + test::quoted(model) + " --port 0 --data-dir " + test::quoted(tmp.file("data")), tmp);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("another kvchat (pid ") &&
                        Catch::Contains(", kvchat-cli serve) is using the data directory"));
  httplib::Client c = client_for(s);
  auto h = c.Get("/health");
  REQUIRE(h);
  CHECK(h->status == 200);
}

TEST_CASE("serve: --cors-origin lets that origin's pages call it (preflight without the key), others are refused",
          "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"),
                       "--alias kvchat-test --api-key sesame --cors-origin http://app.example:3000", tmp);
  httplib::Client c = client_for(s);
  const httplib::Headers preflight = {{"Origin", "http://app.example:3000"},
                                      {"Access-Control-Request-Method", "POST"},
                                      {"Access-Control-Request-Headers", "authorization, content-type"}};
  auto r = c.Options("/v1/chat/completions", preflight);
  REQUIRE(r);
  CHECK(r->status == 204);  // no key needed: browsers never send it on a preflight
  CHECK(r->get_header_value("Access-Control-Allow-Origin") == "http://app.example:3000");
  CHECK_THAT(r->get_header_value("Access-Control-Allow-Methods"), Catch::Contains("POST"));
  CHECK_THAT(r->get_header_value("Access-Control-Allow-Headers"), Catch::Contains("Authorization"));

  // The real request carries the origin's header, and so does its error when the key is wrong.
  const std::string body = R"({"model":"kvchat-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":2})";
  r = c.Post("/v1/chat/completions", {{"Origin", "http://app.example:3000"}, {"Authorization", "Bearer sesame"}}, body,
             "application/json");
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(r->get_header_value("Access-Control-Allow-Origin") == "http://app.example:3000");
  r = c.Post("/v1/chat/completions", {{"Origin", "http://app.example:3000"}}, body, "application/json");
  REQUIRE(r);
  CHECK(r->status == 401);
  CHECK(r->get_header_value("Access-Control-Allow-Origin") == "http://app.example:3000");

  // Another origin: its preflight is refused with what to do, and nothing grants it access.
  r = c.Options("/v1/chat/completions", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  REQUIRE(r);
  CHECK(r->status == 403);
  CHECK_THAT(r->body, Catch::Contains("--cors-origin http://evil.example"));
  CHECK_FALSE(r->has_header("Access-Control-Allow-Origin"));
  r = c.Post("/v1/chat/completions", {{"Origin", "http://evil.example"}, {"Authorization", "Bearer sesame"}}, body,
             "application/json");
  REQUIRE(r);
  CHECK_FALSE(r->has_header("Access-Control-Allow-Origin"));
  CHECK(s.stop() == 0);
}

TEST_CASE("serve: without --cors-origin no response grants a browser origin access", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  httplib::Client c = client_for(s);
  auto r = c.Options("/v1/models", {{"Origin", "http://localhost:8081"}, {"Access-Control-Request-Method", "GET"}});
  REQUIRE(r);
  CHECK(r->status == 403);
  CHECK_FALSE(r->has_header("Access-Control-Allow-Origin"));
  // Nor does any other request from a page: refused before it runs (the browser would not let the
  // page read a 200 without the header, but a POST would still have run).
  r = c.Get("/v1/models", {{"Origin", "http://localhost:8081"}});
  REQUIRE(r);
  CHECK(r->status == 403);
  CHECK_FALSE(r->has_header("Access-Control-Allow-Origin"));
  r = c.Get("/v1/models");  // clients that are not browsers send no Origin
  REQUIRE(r);
  CHECK(r->status == 200);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve: reasoning_effort is checked, reaches gpt-oss's template, and a reply without channels is all content",
          "[app][server]") {
  test::TempDir tmp;
  const std::string gpt_oss = test::model_with_template(tmp, "openai-gpt-oss-120b.jinja").string();
  test::ServeProcess s(gpt_oss, tmp.file("data"), "--alias kvchat-test", tmp);
  auto c = client_for(s);
  const auto body = [](json extra) {
    json j = json::parse(chat_body("Hi", 6));
    j.merge_patch(extra);
    return j.dump();
  };
  auto bad = c.Post("/v1/chat/completions", body({{"reasoning_effort", "extreme"}}), "application/json");
  REQUIRE(bad);
  CHECK(bad->status == 400);
  const json e = error_of(bad);
  CHECK(e["param"] == "reasoning_effort");
  CHECK(e["message"] == "reasoning_effort must be one of low, medium, high, not \"extreme\"");

  // A random model writes no channels: its reply is all content, whole or streamed alike.
  auto whole = c.Post("/v1/chat/completions", body({{"reasoning_effort", "high"}}), "application/json");
  REQUIRE(whole);
  REQUIRE(whole->status == 200);
  const json w = json::parse(whole->body);
  const json& message = w["choices"][0]["message"];
  CHECK_FALSE(message.contains("reasoning_content"));
  const std::string content = message["content"].get<std::string>();
  CHECK_FALSE(content.empty());
  auto streamed =
      c.Post("/v1/chat/completions", body({{"chat_template_kwargs", {{"reasoning_effort", "high"}}}, {"stream", true}}),
             "application/json");
  REQUIRE(streamed);
  REQUIRE(streamed->status == 200);
  std::string deltas;
  for (size_t at = streamed->body.find("data: {"); at != std::string::npos;
       at = streamed->body.find("data: {", at + 1)) {
    const json chunk = json::parse(streamed->body.substr(at + 6, streamed->body.find('\n', at) - at - 6));
    const json& delta = chunk["choices"][0]["delta"];
    CHECK_FALSE(delta.contains("reasoning_content"));
    if (delta.contains("content")) deltas += delta["content"].get<std::string>();
  }
  CHECK(deltas == content);  // the same prompt (effort high both ways), greedy
  CHECK(s.stop() == 0);

  // Another model's template has no effort: a valid one is ignored.
  test::ServeProcess other(test::model_path("stories260K.gguf"), tmp.file("data-other"), "--alias kvchat-test", tmp);
  auto oc = client_for(other);
  auto ignored = oc.Post("/v1/chat/completions", body({{"reasoning_effort", "low"}}), "application/json");
  REQUIRE(ignored);
  CHECK(ignored->status == 200);
}

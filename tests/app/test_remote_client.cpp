// The OpenAI-compatible client against real HTTP on loopback: the model list, a streamed answer
// with usage and cached_tokens, and each failure a user must be told about plainly: a closed
// port, 401, 429, a stream that drops or stalls mid-answer, a page that is not an API.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "app/remote/remote_client.h"
#include "support/loopback_http.h"

using namespace kvc;

namespace {

std::string chunk(const std::string& content) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + content + "\"},\"finish_reason\":null}]}\n\n";
}

const std::string k_stream = ": a comment line\n\n" + chunk("Hel") + chunk("lo") + chunk(" there") +
                             "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                             "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,"
                             "\"prompt_tokens_details\":{\"cached_tokens\":8}}}\n\n"
                             "data: [DONE]\n\n";

test::HttpResponse sse(const std::string& body) {
  test::HttpResponse r;
  r.headers = {{"Content-Type", "text/event-stream"}};
  r.body = body;
  return r;
}

test::HttpResponse fake_api(const test::HttpRequest& req) {
  test::HttpResponse r;
  const std::string& p = req.path;
  if (p == "/v1/models") {
    r.body = R"({"object":"list","data":[{"id":"alpha","object":"model"},{"id":"beta","object":"model"}]})";
  } else if (p.rfind("/denied/", 0) == 0) {
    r.status = 401;
    r.body = R"({"error":{"message":"invalid api key","type":"invalid_request_error","code":"invalid_api_key"}})";
  } else if (p.rfind("/busy/", 0) == 0) {
    r.status = 429;
    r.headers = {{"Retry-After", "3"}};
    r.body = R"({"error":{"message":"too many requests in flight","type":"rate_limit_error"}})";
  } else if (p == "/v1/chat/completions") {
    r = sse(k_stream);
  } else if (p == "/drop/v1/chat/completions") {
    r = sse(k_stream);
    r.drop_after = chunk("Hel").size() + chunk("lo").size() + std::string(": a comment line\n\n").size();
  } else if (p == "/stall/v1/chat/completions") {
    r = sse(k_stream);
    r.chunk_bytes = std::string(": a comment line\n\n").size() + chunk("Hel").size();
    r.chunk_delay_ms = 4000;
  } else if (p == "/plain/v1/chat/completions") {
    r.body =
        R"({"choices":[{"index":0,"message":{"role":"assistant","content":"whole answer"},"finish_reason":"stop"}]})";
  } else if (p == "/html/v1/models" || p == "/html/v1/chat/completions") {
    r.body = "<!doctype html><title>router</title>";
  } else if (p == "/failing/v1/chat/completions") {
    r = sse(chunk("par") + "data: {\"error\":{\"message\":\"the server is shutting down\"}}\n\n");
  } else if (p == "/metrics") {
    r.body = "vllm:kv_cache_usage_perc 0.5\n";
  } else {
    r.status = 404;
    r.body = R"({"error":{"message":"unknown route"}})";
  }
  return r;
}

remote::Endpoint endpoint(const test::LoopbackHttpServer& s, const std::string& prefix = "", double timeout_s = 10) {
  remote::Endpoint e;
  e.base_url = s.url(prefix + "/v1");
  e.timeout_s = timeout_s;
  return e;
}

// A port nothing listens on: bound, then closed.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

const std::vector<chat::ChatMessage> k_messages = {{"system", "be brief"}, {"user", "hi"}};

}  // namespace

TEST_CASE("remote client: base URLs are normalized, bad ones named", "[app]") {
  CHECK(*remote::normalize_base_url("gpu-box:8000") == "http://gpu-box:8000/v1");
  CHECK(*remote::normalize_base_url(" http://127.0.0.1:8080/ ") == "http://127.0.0.1:8080/v1");
  CHECK(*remote::normalize_base_url("https://api.example.org/openai/v1/") == "https://api.example.org/openai/v1");
  CHECK(*remote::normalize_base_url("http://localhost:11434/v1") == "http://localhost:11434/v1");
  CHECK(remote::normalize_base_url("").error().message.find("enter the server's URL") != std::string::npos);
  CHECK(remote::normalize_base_url("ftp://x/v1").error().message.find("not an http://") != std::string::npos);
  CHECK(remote::normalize_base_url("http:///v1").error().message.find("no host") != std::string::npos);
  CHECK(remote::metrics_url("http://h:8000/v1") == "http://h:8000/metrics");
  CHECK(remote::metrics_url("http://h:8000/api") == "http://h:8000/api/metrics");
}

TEST_CASE("remote client: models listed, a streamed answer with usage, the key in the header only", "[app]") {
  test::LoopbackHttpServer server(fake_api);
  remote::Endpoint e = endpoint(server);
  e.api_key = "sk-secret-123";
  auto models = remote::list_models(e);
  REQUIRE(models.ok());
  CHECK(*models == std::vector<std::string>{"alpha", "beta"});

  std::string streamed;
  int n_calls = 0;
  remote::ChatOptions o;
  o.model = "alpha";
  o.generation.max_tokens = 32;
  o.generation.sampling.seed = 7;
  remote::StreamedAnswer a;
  const Status st = remote::stream_chat(
      e, o, k_messages,
      [&](std::string_view t) {
        streamed += t;
        ++n_calls;
        return true;
      },
      a);
  REQUIRE(st.ok());
  CHECK(a.text == "Hello there");
  CHECK(streamed == "Hello there");
  CHECK(a.n_deltas == 3);
  CHECK(a.finish_reason == "stop");
  CHECK(a.done);
  CHECK(a.prompt_tokens == 12);
  CHECK(a.completion_tokens == 3);
  CHECK(a.cached_tokens == 8);
  CHECK(a.ttft_ms > 0);
  CHECK(a.decode_ms >= 0);
  const auto reqs = server.requests();
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[1].method == "POST");
  CHECK(reqs[1].header("authorization") == "Bearer sk-secret-123");
  CHECK(reqs[1].body.find("\"model\":\"alpha\"") != std::string::npos);
  CHECK(reqs[1].body.find("\"stream\":true") != std::string::npos);
  CHECK(reqs[1].body.find("\"include_usage\":true") != std::string::npos);
  CHECK(reqs[1].body.find("\"max_tokens\":32") != std::string::npos);
  CHECK(reqs[1].body.find("\"content\":\"be brief\"") != std::string::npos);
  CHECK(reqs[1].body.find("sk-secret") == std::string::npos);

  auto page = remote::fetch_metrics(e);
  REQUIRE(page.ok());
  CHECK(page->find("vllm:kv_cache_usage_perc") != std::string::npos);
}

TEST_CASE("remote client: stopping mid-answer is not an error", "[app]") {
  test::LoopbackHttpServer server(fake_api);
  remote::StreamedAnswer a;
  remote::ChatOptions o;
  o.model = "alpha";
  const Status st = remote::stream_chat(
      endpoint(server), o, k_messages, [&](std::string_view t) { return t.empty() || a.n_deltas < 1; }, a);
  REQUIRE(st.ok());
  CHECK(a.stopped);
  CHECK(a.text == "Hel");
}

TEST_CASE("remote client: a closed port, 401, 429 and a page that is no API are said plainly", "[app]") {
  test::LoopbackHttpServer server(fake_api);
  remote::Endpoint closed;
  closed.base_url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1";
  auto refused = remote::list_models(closed);
  REQUIRE_FALSE(refused.ok());
  INFO(refused.error().message);
  CHECK(refused.error().message.find("cannot reach") != std::string::npos);
  CHECK(refused.error().message.find("connection refused") != std::string::npos);

  auto denied = remote::list_models(endpoint(server, "/denied"));
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().message.find("refused the API key (HTTP 401: invalid api key)") != std::string::npos);

  remote::ChatOptions o;
  o.model = "alpha";
  remote::StreamedAnswer a;
  const Status busy = remote::stream_chat(
      endpoint(server, "/busy"), o, k_messages, [](std::string_view) { return true; }, a);
  REQUIRE_FALSE(busy.ok());
  CHECK(busy.error().message.find("HTTP 429") != std::string::npos);
  CHECK(busy.error().message.find("try again in 3 s") != std::string::npos);
  CHECK(a.text.empty());

  auto html = remote::list_models(endpoint(server, "/html"));
  REQUIRE_FALSE(html.ok());
  CHECK(html.error().message.find("did not answer with a model list") != std::string::npos);
  const Status not_stream = remote::stream_chat(
      endpoint(server, "/html"), o, k_messages, [](std::string_view) { return true; }, a);
  REQUIRE_FALSE(not_stream.ok());
  CHECK(not_stream.error().message.find("did not answer with a chat completion stream") != std::string::npos);

  auto missing = remote::list_models(endpoint(server, "/nothing"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("HTTP 404") != std::string::npos);
}

TEST_CASE("remote client: a stream dropped or stalled mid-answer fails, keeping what came", "[app]") {
  test::LoopbackHttpServer server(fake_api);
  remote::ChatOptions o;
  o.model = "alpha";
  remote::StreamedAnswer a;
  const Status dropped = remote::stream_chat(
      endpoint(server, "/drop"), o, k_messages, [](std::string_view) { return true; }, a);
  REQUIRE_FALSE(dropped.ok());
  INFO(dropped.error().message);
  CHECK(dropped.error().message.find("dropped mid-answer") != std::string::npos);
  CHECK(dropped.error().message.find("kept") != std::string::npos);
  CHECK(a.text == "Hello");

  const auto t0 = std::chrono::steady_clock::now();
  const Status stalled = remote::stream_chat(
      endpoint(server, "/stall", 1), o, k_messages, [](std::string_view) { return true; }, a);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_FALSE(stalled.ok());
  INFO(stalled.error().message);
  CHECK(stalled.error().message.find("timeout") != std::string::npos);
  CHECK(stalled.error().message.find("middle of the answer") != std::string::npos);
  CHECK(a.text == "Hel");
  CHECK(s < 3.5);  // the client gave up before the server sent again (4 s)

  const Status failing = remote::stream_chat(
      endpoint(server, "/failing"), o, k_messages, [](std::string_view) { return true; }, a);
  REQUIRE_FALSE(failing.ok());
  CHECK(failing.error().message.find("the server is shutting down") != std::string::npos);
  CHECK(a.text == "par");

  // A server that ignores stream: true and answers in one object.
  const Status plain = remote::stream_chat(
      endpoint(server, "/plain"), o, k_messages, [](std::string_view) { return true; }, a);
  REQUIRE(plain.ok());
  CHECK(a.text == "whole answer");
}

TEST_CASE("remote client: SSE events cut anywhere are joined", "[app]") {
  std::vector<std::string> events;
  remote::SseParser p;
  const std::string text = "data: one\r\n\r\nevent: x\ndata: two\ndata: lines\n\n: comment\n\ndata:three\n\n";
  for (char c : text) p.feed(std::string_view(&c, 1), [&](std::string_view e) { events.emplace_back(e); });
  CHECK(events == std::vector<std::string>{"one", "two\nlines", "three"});
}

// kvchat-cli serve under HTTP-level abuse, over raw sockets: idle and slow connections do not
// starve it, a burst is answered, a web page of another origin or name cannot drive it,
// pipelined requests are all answered, ambiguous lengths and huge numbers are refused, kept-alive
// requests are not held back by Nagle's algorithm, and refused huge prompts give their memory back.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "server/serve_process.h"
#include "support/test_support.h"

using namespace kvc;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A plain TCP connection to the server, written and read byte for byte as a test wants.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  void send(const std::string& bytes) const {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      REQUIRE(n > 0);
      off += static_cast<size_t>(n);
    }
  }

  // Reads until `n_responses` whole responses (by Content-Length) have arrived, the peer closes,
  // or `timeout` passes; what arrived.
  std::string read_responses(int n_responses, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    const auto end = Clock::now() + timeout;
    while (count_responses(buf_) < n_responses && Clock::now() < end) {
      if (!read_some(end)) break;
    }
    return buf_;
  }

  // True when the server closed the connection (EOF or reset) within `timeout`.
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      if (!read_some(end)) return eof_;
    }
    return false;
  }

 private:
  // False on EOF, error or the deadline.
  bool read_some(Clock::time_point end) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0))) <= 0) return false;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  static int count_responses(const std::string& s) {
    int n = 0;
    size_t at = 0;
    while (true) {
      const size_t head_end = s.find("\r\n\r\n", at);
      if (head_end == std::string::npos) return n;
      const size_t cl = s.find("Content-Length: ", at);
      size_t body = 0;
      if (cl != std::string::npos && cl < head_end) body = std::stoul(s.substr(cl + 16));
      if (s.size() < head_end + 4 + body) return n;
      ++n;
      at = head_end + 4 + body;
    }
  }

  int fd_ = -1;
  std::string buf_;
  bool eof_ = false;
};

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

int count_of(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

std::string chat_body(const std::string& user, int max_tokens) {
  return json{{"model", "kvchat-test"},
              {"messages", json::array({json{{"role", "user"}, {"content", user}}})},
              {"max_tokens", max_tokens},
              {"temperature", 0}}
      .dump();
}

std::string post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

const std::string k_health = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

// GET /health on a fresh connection: its status and how long the answer took.
std::pair<int, double> timed_health(int port) {
  const auto t0 = Clock::now();
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  auto r = c.Get("/health");
  return {r ? r->status : -1, seconds_since(t0)};
}

// The resident memory of a process, in MiB (VmRSS in /proc/PID/status).
double rss_mib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

// The number of generations the server ran, from /metrics.
double n_generations(int port) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics");
  REQUIRE(r);
  double n = 0;
  size_t at = 0;
  while ((at = r->body.find("\nkvchat_generations_total{", at)) != std::string::npos) {
    at = r->body.find("} ", at);
    n += std::stod(r->body.substr(at + 2));
  }
  return n;
}

}  // namespace

TEST_CASE("serve: idle and slow connections do not hold up other clients", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<RawConnection>(s.port()));
  // Slow ones: a request head begun and never finished.
  for (int i = 0; i < 50; ++i) {
    idle.push_back(std::make_unique<RawConnection>(s.port()));
    idle.back()->send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-");
  }
  // Half-sent bodies.
  for (int i = 0; i < 50; ++i) {
    idle.push_back(std::make_unique<RawConnection>(s.port()));
    idle.back()->send(post("/v1/chat/completions", chat_body("Once upon a time", 4)).substr(0, 120));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // every one accepted and waiting
  for (int i = 0; i < 3; ++i) {
    const auto [status, took] = timed_health(s.port());
    CHECK(status == 200);
    CHECK(took < 1.0);
  }
  // And a generation still runs beside them.
  RawConnection c(s.port());
  c.send(post("/v1/chat/completions", chat_body("Once upon a time", 4)));
  CHECK(status_of(c.read_responses(1)) == 200);
}

TEST_CASE("serve: --timeout closes silent connections and answers a head that comes too slowly with 408",
          "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test --timeout 1", tmp);
  RawConnection silent(s.port());
  RawConnection slow(s.port());
  slow.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  const auto t0 = Clock::now();
  CHECK(silent.closed_within(std::chrono::seconds(5)));
  CHECK(seconds_since(t0) < 3.0);
  CHECK(status_of(slow.read_responses(1, std::chrono::seconds(5))) == 408);
  // Kept alive after an answer, then idle: closed after the keep-alive time (5 s).
  RawConnection kept(s.port());
  kept.send(k_health);
  CHECK(status_of(kept.read_responses(1)) == 200);
  CHECK(kept.closed_within(std::chrono::seconds(8)));
}

TEST_CASE("serve: past --max-connections the longest idle connection is closed, not the new one", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"),
                       "--alias kvchat-test --max-connections 16", tmp);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 40; ++i) {
    idle.push_back(std::make_unique<RawConnection>(s.port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto [status, took] = timed_health(s.port());
  CHECK(status == 200);
  CHECK(took < 1.0);
  // The first ones were closed to make room; the last ones are still open.
  CHECK(idle.front()->closed_within(std::chrono::milliseconds(500)));
  CHECK_FALSE(idle.back()->closed_within(std::chrono::milliseconds(300)));
}

TEST_CASE("serve: a burst of 300 connections is answered, none reset", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  std::vector<std::unique_ptr<RawConnection>> burst;
  for (int i = 0; i < 300; ++i) burst.push_back(std::make_unique<RawConnection>(s.port()));
  for (auto& c : burst) c->send(k_health);
  const auto t0 = Clock::now();
  int n_ok = 0;
  for (auto& c : burst) n_ok += status_of(c->read_responses(1)) == 200 ? 1 : 0;
  CHECK(n_ok == 300);
  CHECK(seconds_since(t0) < 5.0);
}

TEST_CASE("serve: a page of another origin or another host name cannot drive the server", "[app][server]") {
  test::TempDir tmp;
  const bool with_key = GENERATE(false, true);
  INFO("with --api-key: " << with_key);
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"),
                       std::string("--alias kvchat-test") + (with_key ? " --api-key sekret" : ""), tmp);
  const std::string key = with_key ? "Authorization: Bearer sekret\r\n" : "";
  const std::string evil = "Origin: https://evil.example\r\n";
  SECTION("a simple cross-origin POST (text/plain, no preflight) is refused before it runs") {
    RawConnection c(s.port());
    c.send(post("/v1/chat/completions", chat_body("Once upon a time", 8), evil + "Content-Type: text/plain\r\n"));
    const std::string r = c.read_responses(1);
    CHECK(status_of(r) == 403);
    CHECK(r.find("cors_origin_not_allowed") != std::string::npos);
    CHECK(r.find("--cors-origin https://evil.example") != std::string::npos);
    CHECK(n_generations(s.port()) == 0);
  }
  SECTION("even with the right key, and on a GET") {
    RawConnection c(s.port());
    c.send(post("/v1/chat/completions", chat_body("Once upon a time", 8), evil + key));
    c.send("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n" + evil + key + "\r\n");
    const std::string r = c.read_responses(2);
    CHECK(count_of(r, "HTTP/1.1 403") == 2);
    CHECK(n_generations(s.port()) == 0);
  }
  SECTION("a request addressed to another name (DNS rebinding) is refused") {
    RawConnection c(s.port());
    c.send("GET /v1/models HTTP/1.1\r\nHost: evil.example:8080\r\n" + key + "\r\n");
    const std::string r = c.read_responses(1);
    CHECK(status_of(r) == 403);
    CHECK(r.find("host_not_allowed") != std::string::npos);
    for (const char* host : {"localhost:1234", "127.0.0.1", "[::1]:80", "app.localhost"}) {
      RawConnection ok(s.port());
      ok.send(std::string("GET /v1/models HTTP/1.1\r\nHost: ") + host + "\r\n" + key + "\r\n");
      INFO(host);
      CHECK(status_of(ok.read_responses(1)) == 200);
    }
  }
}

TEST_CASE("serve: pipelined requests are all answered, in order", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  RawConnection c(s.port());
  c.send(k_health + post("/v1/chat/completions", chat_body("Once upon a time", 4)) +
         "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  const std::string r = c.read_responses(3);
  CHECK(count_of(r, "HTTP/1.1 200 OK") == 3);
  const size_t health = r.find("\"status\":\"ok\""), answer = r.find("chat.completion"),
               models = r.find("\"object\":\"list\"");
  REQUIRE(health != std::string::npos);
  REQUIRE(answer != std::string::npos);
  REQUIRE(models != std::string::npos);
  CHECK(health < answer);
  CHECK(answer < models);
  // A refused request's body is skipped, not read as the next request.
  RawConnection d(s.port());
  d.send(post("/v1/chat/completions", chat_body("Once upon a time", 4), "Origin: https://evil.example\r\n") + k_health);
  const std::string r2 = d.read_responses(2);
  CHECK(status_of(r2) == 403);
  CHECK(count_of(r2, "HTTP/1.1 200 OK") == 1);
}

TEST_CASE("serve: ambiguous lengths are refused and their connection closed", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  const std::string body = chat_body("Once upon a time", 4);
  const std::string n = std::to_string(body.size());
  for (const std::string& headers :
       {"Content-Length: " + n + "\r\nContent-Length: 5\r\n",
        "Content-Length: " + n + "\r\nTransfer-Encoding: chunked\r\n", std::string("Content-Length: 0x10\r\n")}) {
    INFO(headers);
    RawConnection c(s.port());
    c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + "\r\n" + body);
    const std::string r = c.read_responses(1);
    CHECK(status_of(r) == 400);
    CHECK(r.find("ambiguous") != std::string::npos);
    CHECK(c.closed_within(std::chrono::seconds(3)));
  }
  CHECK(n_generations(s.port()) == 0);
}

TEST_CASE("serve: a head over 64 KiB is answered 431", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  RawConnection c(s.port());
  c.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + std::string(70'000, 'x') + "\r\n\r\n");
  CHECK(status_of(c.read_responses(1)) == 431);
  CHECK(timed_health(s.port()).first == 200);
}

TEST_CASE("serve: a number beyond a double's range is a 400 that does not echo the number", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  for (const std::string& number : {std::string("1e309"), std::string("-1e999"), "9" + std::string(5000, '9') + "e9"}) {
    RawConnection c(s.port());
    const std::string body = R"({"model": "kvchat-test", "temperature": )" + number +
                             R"(, "messages": [{"role": "user", "content": "Hi"}]})";
    c.send(post("/v1/chat/completions", body));
    const std::string r = c.read_responses(1);
    INFO(r.substr(0, 400));
    CHECK(status_of(r) == 400);
    CHECK(r.find("too large") != std::string::npos);
    CHECK(r.size() < 600);  // the number is not echoed back
  }
}

TEST_CASE("serve: kept-alive requests are answered as fast as fresh ones (no Nagle delay)", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  httplib::Client c("127.0.0.1", s.port());
  c.set_keep_alive(true);
  REQUIRE(c.Get("/health"));
  // Nagle's algorithm on the server's socket held each answer's second write ~40 ms for the
  // client's delayed ACK: 50 requests took over 2 s, about 10 ms without it.
  const auto t0 = Clock::now();
  for (int i = 0; i < 50; ++i) {
    auto r = c.Post("/v1/chat/completions", chat_body("Hi", 1), "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 200);
  }
  CHECK(seconds_since(t0) < 1.5);
}

TEST_CASE("serve: refused huge prompts give their memory back", "[app][server]") {
  test::TempDir tmp;
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  REQUIRE(timed_health(s.port()).first == 200);
  const double before = rss_mib(s.pid());
  REQUIRE(before > 0);
  std::string words;
  while (words.size() < 3'000'000) words += "the quick brown fox jumps over the lazy dog. ";
  const std::vector<std::string> prompts = {std::string(3'000'000, 'a'), words};
  double peak = before;
  for (int i = 0; i < 15; ++i) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_read_timeout(60, 0);
    const std::string& prompt = prompts[static_cast<size_t>(i) % prompts.size()];
    auto r = i % 3 == 2 ? c.Post("/v1/completions",
                                 json{{"model", "kvchat-test"}, {"prompt", prompt}, {"max_tokens", 4}}.dump(),
                                 "application/json")
                        : c.Post("/v1/chat/completions", chat_body(prompt, 4), "application/json");
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(r->body.find("context_length_exceeded") != std::string::npos);
    peak = std::max(peak, rss_mib(s.pid()));
  }
  const double after = rss_mib(s.pid());
  INFO("RSS before " << before << " MiB, after " << after << " MiB, peak " << peak << " MiB");
  CHECK(after - before < 200.0);
}

TEST_CASE("serve: with a damaged answers.db it says at the start and at the end that answers stay in memory",
          "[app][server]") {
  test::TempDir tmp;
  std::filesystem::create_directories(tmp.path() / "data" / "serve");
  {
    std::ofstream bad(tmp.path() / "data" / "serve" / "answers.db", std::ios::binary);
    bad << "SQLite format 3" << std::string(4096, '\x5a');  // a header, then nothing a database could be
  }
  test::ServeProcess s(test::model_path("stories260K.gguf"), tmp.file("data"), "--alias kvchat-test", tmp);
  RawConnection c(s.port());
  c.send(post("/v1/chat/completions", chat_body("Once upon a time", 4)));
  CHECK(status_of(c.read_responses(1)) == 200);
  CHECK(s.stop() == 0);
  const std::string log = s.log();
  INFO(log);
  CHECK(log.find("answers are kept in memory only") != std::string::npos);
  CHECK(log.find("the KV cache and the answers are on disk") == std::string::npos);
  CHECK(log.find("the answers were kept in memory only") != std::string::npos);
}

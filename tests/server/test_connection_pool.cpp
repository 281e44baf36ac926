// ConnectionPool in-process (also built under ASan and TSan): many clients at once with idle and
// half-sent connections beside them, pipelining, timeouts, the connection cap and a stop while
// requests are being served.
#include <catch2/catch.hpp>

#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "app/server/connection_pool.h"
#include "support/sanitizer.h"

using namespace kvc::server;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// A PooledHttpServer on a free loopback port, listening on its own thread.
struct TestServer {
  explicit TestServer(const ConnectionLimits& limits) : http(limits) {
    http.Get("/hello", [](const httplib::Request&, httplib::Response& res) { res.set_content("hello", "text/plain"); });
    http.Post("/echo",
              [](const httplib::Request& req, httplib::Response& res) { res.set_content(req.body, "text/plain"); });
    http.Get("/slow", [this](const httplib::Request&, httplib::Response& res) {
      ++n_slow_started;
      std::this_thread::sleep_for(300ms);
      res.set_content("slow", "text/plain");
    });
    port = http.bind_to_any_port("127.0.0.1");
    REQUIRE(port > 0);
    REQUIRE(http.set_backlog(511));
    thread = std::thread([this] {
      http.listen_after_bind();
      http.shutdown_connections();
    });
    while (!http.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~TestServer() { stop(); }
  void stop() {
    if (!thread.joinable()) return;
    http.stop();
    thread.join();
  }
  PooledHttpServer http;
  int port = 0;
  std::atomic<int> n_slow_started{0};
  std::thread thread;
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

void send_all(int fd, const std::string& s) {
  REQUIRE(::send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
}

// What arrives on fd until `needle` has been seen `n` times, the peer closes, or `timeout`.
std::string read_until(int fd, const std::string& needle, int n, std::chrono::milliseconds timeout = 5000ms) {
  std::string got;
  const auto end = Clock::now() + timeout;
  auto count = [&] {
    int k = 0;
    for (size_t at = got.find(needle); at != std::string::npos; at = got.find(needle, at + 1)) ++k;
    return k;
  };
  while (count() < n && Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

bool closed_by_peer(int fd, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buf[4096];
    if (::recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("connection pool: clients at once beside idle and half-sent connections, each served", "[app][server]") {
  ConnectionLimits limits;
  limits.n_workers = 4;
  TestServer s(limits);
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) idle.push_back(connect_to(s.port));
  for (int i = 0; i < 16; ++i) {
    idle.push_back(connect_to(s.port));
    send_all(idle.back(), "POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly part");
  }
  const int n_clients = 8;
  const int n_each = kvc::test::loop_count(nullptr, 40, 10);
  std::atomic<int> n_ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < n_clients; ++t) {
    clients.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", s.port);
      c.set_keep_alive(true);
      for (int i = 0; i < n_each; ++i) {
        const std::string body = "client " + std::to_string(t) + " request " + std::to_string(i);
        auto r = i % 2 ? c.Get("/hello") : c.Post("/echo", body, "text/plain");
        if (r && r->status == 200 && r->body == (i % 2 ? "hello" : body)) ++n_ok;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  CHECK(n_ok == n_clients * n_each);
  const ConnectionStats st = s.http.connection_stats();
  CHECK(st.n_open >= 80);  // the idle ones are still open
  CHECK(st.n_requests >= n_clients * n_each);
  s.stop();
  CHECK(s.http.connection_stats().n_open == 0);
  for (const int fd : idle) {
    CHECK(closed_by_peer(fd, 1000ms));
    ::close(fd);
  }
}

TEST_CASE("connection pool: pipelined requests in one write, and one split byte by byte", "[app][server]") {
  TestServer s(ConnectionLimits{});
  const int fd = connect_to(s.port);
  const std::string three =
      "GET /hello HTTP/1.1\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\nping"
      "GET /hello HTTP/1.1\r\n\r\n";
  send_all(fd, three);
  const std::string r = read_until(fd, "hello", 2);  // the third answer's body, after the other two
  CHECK(r.find("hello") < r.find("ping"));
  CHECK(r.rfind("hello") > r.find("ping"));
  for (const char c : three) send_all(fd, std::string(1, c));
  const std::string r2 = read_until(fd, "hello", 2);
  CHECK(r2.find("ping") != std::string::npos);
  CHECK(r2.rfind("hello") > r2.find("ping"));
  ::close(fd);
}

TEST_CASE("connection pool: silent, slow and idle connections time out", "[app][server]") {
  ConnectionLimits limits;
  limits.first_byte_timeout = 200ms;
  limits.head_timeout = 300ms;
  limits.keep_alive_timeout = 200ms;
  TestServer s(limits);
  const int silent = connect_to(s.port);
  const int slow = connect_to(s.port);
  send_all(slow, "GET /hello HTTP/1.1\r\n");
  const int kept = connect_to(s.port);
  send_all(kept, "GET /hello HTTP/1.1\r\n\r\n");
  CHECK(read_until(kept, "hello", 1).find("200 OK") != std::string::npos);
  const auto t0 = Clock::now();
  CHECK(closed_by_peer(silent, 2000ms));
  CHECK(read_until(slow, "408", 1).find("408 Request Timeout") != std::string::npos);
  CHECK(closed_by_peer(kept, 2000ms));
  CHECK(Clock::now() - t0 < 1500ms);
  CHECK(s.http.connection_stats().n_timed_out == 3);
  for (const int fd : {silent, slow, kept}) ::close(fd);
}

TEST_CASE("connection pool: at the cap the longest idle connection makes room, else the new one gets a 503",
          "[app][server]") {
  ConnectionLimits limits;
  limits.max_connections = 4;
  TestServer s(limits);
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    fds.push_back(connect_to(s.port));
    std::this_thread::sleep_for(20ms);
  }
  const int fresh = connect_to(s.port);
  send_all(fresh, "GET /hello HTTP/1.1\r\n\r\n");
  CHECK(read_until(fresh, "hello", 1).find("200 OK") != std::string::npos);
  CHECK(closed_by_peer(fds[0], 1000ms));  // the oldest idle one
  CHECK(s.http.connection_stats().n_evicted >= 1);
  // All four connections busy with a request each: no room for a fifth.
  for (int i = 1; i < 4; ++i) send_all(fds[static_cast<size_t>(i)], "GET /slow HTTP/1.1\r\n\r\n");
  send_all(fresh, "GET /slow HTTP/1.1\r\n\r\n");
  while (s.n_slow_started < 4) std::this_thread::sleep_for(5ms);
  const int refused = connect_to(s.port);
  const std::string r = read_until(refused, "\r\n\r\n", 1);
  CHECK(r.find("503") != std::string::npos);
  CHECK(r.find("--max-connections") != std::string::npos);
  CHECK(s.http.connection_stats().n_refused == 1);
  for (int i = 1; i < 4; ++i)
    CHECK(read_until(fds[static_cast<size_t>(i)], "slow", 1).find("200 OK") != std::string::npos);
  for (const int fd : fds) ::close(fd);
  ::close(fresh);
  ::close(refused);
}

TEST_CASE("connection pool: a stop waits for the requests being served and closes the rest", "[app][server]") {
  TestServer s(ConnectionLimits{});
  const int busy = connect_to(s.port);
  const int idle = connect_to(s.port);
  send_all(busy, "GET /slow HTTP/1.1\r\n\r\n");
  while (s.n_slow_started < 1) std::this_thread::sleep_for(5ms);
  s.stop();  // returns once the slow handler has answered
  CHECK(read_until(busy, "slow", 1).find("200 OK") != std::string::npos);
  CHECK(closed_by_peer(idle, 1000ms));
  CHECK(s.http.connection_stats().n_open == 0);
  ::close(busy);
  ::close(idle);
}

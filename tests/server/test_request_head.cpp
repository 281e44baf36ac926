// RequestHead (the connection pool's view of a request's head and framing) and the loopback
// name checks, on byte strings.
#include <catch2/catch.hpp>

#include <string>

#include "app/server/loopback.h"
#include "app/server/request_head.h"

using namespace kvc::server;

namespace {

constexpr size_t k_limit = 64 * 1024;

}  // namespace

TEST_CASE("request head: complete only with its blank line, framed by Content-Length", "[app][server]") {
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-LENGTH:  12 \r\n\r\n";
  for (size_t n = 0; n < head.size(); ++n) {
    INFO(n);
    CHECK(scan_request_head(head.substr(0, n), k_limit).state == RequestHead::State::incomplete);
  }
  const RequestHead h = scan_request_head(head + "{\"a\": 1}", k_limit);
  REQUIRE(h.state == RequestHead::State::complete);
  CHECK(h.head_bytes == head.size());
  CHECK(h.has_length);
  CHECK(h.content_length == 12);
  CHECK(h.length_known());
  CHECK(h.request_bytes() == head.size() + 12);
  CHECK_FALSE(h.ambiguous);
}

TEST_CASE("request head: bare LF line ends, no body, and Expect", "[app][server]") {
  const RequestHead get = scan_request_head("GET /health HTTP/1.1\nHost: x\n\nGET /next", k_limit);
  REQUIRE(get.state == RequestHead::State::complete);
  CHECK(get.head_bytes == std::string("GET /health HTTP/1.1\nHost: x\n\n").size());
  CHECK(get.request_bytes() == get.head_bytes);
  const RequestHead expect =
      scan_request_head("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n", k_limit);
  CHECK(expect.expect_continue);
  CHECK(expect.length_known());
}

TEST_CASE("request head: two lengths, a length that is no number, or a length with a transfer coding are ambiguous",
          "[app][server]") {
  const auto scan = [](const std::string& headers) {
    return scan_request_head("POST / HTTP/1.1\r\n" + headers + "\r\n", k_limit);
  };
  CHECK(scan("Content-Length: 5\r\nContent-Length: 6\r\n").ambiguous);
  CHECK_FALSE(scan("Content-Length: 5\r\nContent-Length: 5\r\n").ambiguous);  // the same value twice is one
  CHECK(scan("Content-Length: 0x10\r\n").ambiguous);
  CHECK(scan("Content-Length: -1\r\n").ambiguous);
  CHECK(scan("Content-Length: 99999999999999999999\r\n").ambiguous);
  CHECK(scan("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n").ambiguous);
  const RequestHead chunked = scan("Transfer-Encoding: chunked\r\n");
  CHECK_FALSE(chunked.ambiguous);
  CHECK_FALSE(chunked.length_known());  // read by httplib; the connection is closed after it
  CHECK(chunked.request_bytes() == 0);
  for (const char* h : {"Content-Length: 5\r\nContent-Length: 6\r\n", "Content-Length: x\r\n"}) {
    INFO(h);
    CHECK_FALSE(scan(h).length_known());
  }
}

TEST_CASE("request head: a head with no end within the limit is too large", "[app][server]") {
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(k_limit, 'a');
  CHECK(scan_request_head(big, k_limit).state == RequestHead::State::too_large);
  CHECK(scan_request_head(big.substr(0, k_limit - 1), k_limit).state == RequestHead::State::incomplete);
  // The limit counts the head only: a long body after a short head is fine.
  const std::string ok = "POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + std::string(100'000, 'b');
  CHECK(scan_request_head(ok, k_limit).state == RequestHead::State::complete);
}

TEST_CASE("request head: empty lines before a request line are skipped", "[app][server]") {
  CHECK(leading_empty_lines("\r\n\r\nGET /") == 4);
  CHECK(leading_empty_lines("\n\r\nGET /") == 3);
  CHECK(leading_empty_lines("\r") == 0);  // maybe the start of "\r\n": wait for more
  CHECK(leading_empty_lines("GET /") == 0);
}

TEST_CASE("loopback: listen addresses and Host headers", "[app][server]") {
  for (const char* a :
       {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LocalHost", "app.localhost", "::ffff:127.0.0.1"}) {
    INFO(a);
    CHECK(is_loopback_address(a));
  }
  for (const char* a : {"0.0.0.0", "::", "192.168.1.2", "example.com", "localhost.example.com", "128.0.0.1", ""}) {
    INFO(a);
    CHECK_FALSE(is_loopback_address(a));
  }
  for (const char* h : {"localhost:8080", "127.0.0.1", "127.0.0.1:80", "[::1]:8080", "[::1]", "x.localhost:1"}) {
    INFO(h);
    CHECK(is_loopback_host_header(h));
  }
  for (const char* h : {"evil.example:8080", "evil.example", "[::1]evil", "127.0.0.1.nip.io:80", "", "[::1"}) {
    INFO(h);
    CHECK_FALSE(is_loopback_host_header(h));
  }
}

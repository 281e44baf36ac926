// A real HTTP/1.1 server on 127.0.0.1 for the download tests: each test answers requests with a
// handler and can serve a range, ignore it, redirect, fail, stall or drop the connection mid-body.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kvc::test {

struct HttpRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names lowercase
  std::string body;                            // as long as its Content-Length says
  std::string header(const std::string& lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  size_t drop_after = static_cast<size_t>(-1);  // close the connection after this many body bytes
  size_t chunk_bytes = 64 * 1024;               // the body is sent in chunks of this size
  int chunk_delay_ms = 0;                       // and this long apart (a slow server)
};

// `body` answering `req` the way a file server does: 206 with Content-Range for "Range: bytes=N-",
// 416 for a range past the end, 200 for the whole file (also when honour_range is false).
HttpResponse serve_file(const HttpRequest& req, const std::string& body, bool honour_range = true);

// Listens on an ephemeral loopback port; one connection at a time ("Connection: close").
class LoopbackHttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  explicit LoopbackHttpServer(Handler handler);
  ~LoopbackHttpServer();
  LoopbackHttpServer(const LoopbackHttpServer&) = delete;
  LoopbackHttpServer& operator=(const LoopbackHttpServer&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path) const;  // "http://127.0.0.1:PORT" + path
  std::vector<HttpRequest> requests() const;       // every request received so far

 private:
  void serve();
  void answer(int fd);
  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<HttpRequest> requests_;
  std::thread thread_;
};

}  // namespace kvc::test

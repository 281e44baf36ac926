// LoopbackHttpServer: plain sockets, one request per connection, answered by the test's handler.
#include "support/loopback_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <stdexcept>

namespace kvc::test {

std::string HttpRequest::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpResponse serve_file(const HttpRequest& req, const std::string& body, bool honour_range) {
  HttpResponse r;
  const std::string range = req.header("range");
  unsigned long long from = 0;
  if (honour_range && std::sscanf(range.c_str(), "bytes=%llu-", &from) == 1) {
    if (from >= body.size()) {
      r.status = 416;
      r.headers.emplace_back("Content-Range", "bytes */" + std::to_string(body.size()));
      return r;
    }
    r.status = 206;
    r.headers.emplace_back("Content-Range", "bytes " + std::to_string(from) + "-" + std::to_string(body.size() - 1) +
                                                "/" + std::to_string(body.size()));
    r.body = body.substr(from);
    return r;
  }
  if (honour_range) r.headers.emplace_back("Accept-Ranges", "bytes");
  r.body = body;
  return r;
}

LoopbackHttpServer::LoopbackHttpServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket() failed");
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 8) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { serve(); });
}

LoopbackHttpServer::~LoopbackHttpServer() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::string LoopbackHttpServer::url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<HttpRequest> LoopbackHttpServer::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

void LoopbackHttpServer::serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    answer(fd);
    ::close(fd);
  }
}

namespace {

bool send_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 206: return "Partial Content";
    case 302: return "Found";
    case 404: return "Not Found";
    case 401: return "Unauthorized";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    default: return "Status";
  }
}

}  // namespace

void LoopbackHttpServer::answer(int fd) {
  std::string head;
  char buf[4096];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    head.append(buf, static_cast<size_t>(n));
  }
  HttpRequest req;
  size_t line_end = head.find("\r\n");
  {
    const std::string first = head.substr(0, line_end);
    const size_t s1 = first.find(' '), s2 = first.find(' ', s1 + 1);
    if (s1 == std::string::npos || s2 == std::string::npos) return;
    req.method = first.substr(0, s1);
    req.path = first.substr(s1 + 1, s2 - s1 - 1);
  }
  for (size_t pos = line_end + 2; pos < head.size();) {
    const size_t e = head.find("\r\n", pos);
    if (e == std::string::npos || e == pos) break;
    const std::string line = head.substr(pos, e - pos);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      req.headers[name] = line.substr(v);
    }
    pos = e + 2;
  }
  if (const std::string length = req.header("content-length"); !length.empty()) {
    const size_t n_body = std::min<size_t>(std::stoul(length), size_t{16} << 20);
    req.body = head.substr(head.find("\r\n\r\n") + 4);
    while (req.body.size() < n_body) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) return;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.body.append(buf, static_cast<size_t>(n));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(req);
  }
  const HttpResponse r = handler_(req);
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\nConnection: close\r\n";
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  out += "\r\n";
  if (!send_all(fd, out.data(), out.size())) return;
  if (req.method == "HEAD") return;
  size_t sent = 0;
  while (sent < r.body.size() && !stop_) {
    size_t n = std::min(r.chunk_bytes, r.body.size() - sent);
    if (r.drop_after != static_cast<size_t>(-1)) {
      if (sent >= r.drop_after) break;
      n = std::min(n, r.drop_after - sent);
    }
    if (!send_all(fd, r.body.data() + sent, n)) return;
    sent += n;
    if (r.chunk_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(r.chunk_delay_ms));
  }
  // A drop: a reset, so the client sees the connection end before Content-Length bytes.
  ::shutdown(fd, SHUT_RDWR);
}

}  // namespace kvc::test

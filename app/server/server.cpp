// Server: the httplib listener, its threads, limits and timeouts, and the orderly stop.
#include "app/server/server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "app/server/connection_pool.h"
#include "app/server/server_context.h"

namespace kvc::server {

namespace {

// A listen backlog that holds a burst of clients until the listener takes them.
constexpr int k_listen_backlog = 511;

ConnectionLimits connection_limits(const ServerOptions& o) {
  ConnectionLimits l;
  // Every generation holds a worker while it streams; the extra ones answer 429, /health and
  // /metrics while the queue is full.
  l.n_workers = o.n_http_threads > 0 ? o.n_http_threads : static_cast<int>(o.max_queue) + 8;
  l.max_connections = std::max(1, o.max_connections);
  l.first_byte_timeout = std::chrono::seconds(o.read_timeout_s);
  l.head_timeout = std::chrono::seconds(o.read_timeout_s);
  l.read_timeout = std::chrono::seconds(o.read_timeout_s);
  l.write_timeout = std::chrono::seconds(o.write_timeout_s);
  l.keep_alive_timeout = std::chrono::seconds(5);
  l.max_body_bytes = static_cast<uint64_t>(std::max<int64_t>(0, o.max_body_bytes));
  return l;
}

}  // namespace

struct Server::Impl {
  Impl(const model::Model& m, EngineHost& h, storage::AnswerStore& a, const ServerOptions& o)
      : ctx(m, h, a, o), http(connection_limits(o)) {}
  ServerContext ctx;
  PooledHttpServer http;
  int port = -1;
  std::atomic<bool> entered{false};   // run() was called
  std::atomic<bool> returned{false};  // run() has returned
  std::mutex stop_mu;                 // one stop() at a time
};

Server::Server(const model::Model& m, EngineHost& host, storage::AnswerStore& answers, const ServerOptions& o)
    : impl_(std::make_unique<Impl>(m, host, answers, o)) {
  httplib::Server& http = impl_->http;
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port
  // and take half of its connections: only SO_REUSEADDR (a restart need not wait for TIME_WAIT).
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_payload_max_length(static_cast<size_t>(o.max_body_bytes));
  register_routes(http, impl_->ctx);
}

Server::~Server() { stop(); }

Status Server::bind() {
  const ServerOptions& o = impl_->ctx.options;
  bool ok = false;
  if (o.port == 0) {
    impl_->port = impl_->http.bind_to_any_port(o.host);
    ok = impl_->port > 0;
  } else {
    ok = impl_->http.bind_to_port(o.host, o.port);
    impl_->port = o.port;
  }
  if (ok) impl_->http.set_backlog(k_listen_backlog);
  if (!ok) {
    return make_error(ErrorCode::io, "cannot listen on " + o.host + ":" + std::to_string(o.port) +
                                         ": the port is in use or the address is not one of this machine's; choose "
                                         "another --port or --host");
  }
  return {};
}

int Server::port() const { return impl_->port; }

Status Server::run() {
  impl_->entered = true;  // before reading stopping: stop() sees one or run() sees the other
  if (impl_->ctx.stopping.load()) {
    impl_->returned = true;
    return {};
  }
  const bool ok = impl_->http.listen_after_bind();
  impl_->http.shutdown_connections();  // the requests being served end; idle connections are closed
  impl_->returned = true;
  if (!ok && !impl_->ctx.stopping.load()) {
    return make_error(ErrorCode::io, "the HTTP listener stopped unexpectedly; see the messages above");
  }
  return {};
}

void Server::stop() {
  std::lock_guard lock(impl_->stop_mu);
  ServerContext& ctx = impl_->ctx;
  if (!ctx.stopping.exchange(true)) {
    ctx.host.shutdown();                         // cancels every generation in flight and waits for them to end
    ctx.wait_inactive(std::chrono::seconds(5));  // their responses write their last event
  }
  // stop() before run() entered its loop is lost by httplib: repeat until run() returned.
  if (!impl_->entered.load()) return;
  for (int i = 0; i < 1000 && !impl_->returned.load(); ++i) {
    impl_->http.stop();
    if (!impl_->returned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace kvc::server

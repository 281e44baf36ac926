// Server: the httplib listener, its threads, limits and timeouts, and the orderly stop.
#include "app/server/server.h"

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "app/server/server_context.h"

namespace kvc::server {

struct Server::Impl {
  Impl(const model::Model& m, EngineHost& h, storage::AnswerStore& a, const ServerOptions& o) : ctx(m, h, a, o) {}
  ServerContext ctx;
  httplib::Server http;
  int port = -1;
  std::atomic<bool> entered{false};   // run() was called
  std::atomic<bool> returned{false};  // run() has returned
  std::mutex stop_mu;                 // one stop() at a time
};

Server::Server(const model::Model& m, EngineHost& host, storage::AnswerStore& answers, const ServerOptions& o)
    : impl_(std::make_unique<Impl>(m, host, answers, o)) {
  httplib::Server& http = impl_->http;
  // Every generation holds a thread while it streams; the extra ones answer 429, /health and
  // /metrics while the queue is full.
  const int n_threads = o.n_http_threads > 0 ? o.n_http_threads : static_cast<int>(o.max_queue) + 8;
  http.new_task_queue = [n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n_threads)); };
  // httplib's default also sets SO_REUSEPORT, which lets a second server bind the same port
  // and take half of its connections: only SO_REUSEADDR (a restart need not wait for TIME_WAIT).
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.set_payload_max_length(static_cast<size_t>(o.max_body_bytes));
  http.set_read_timeout(o.read_timeout_s, 0);
  http.set_write_timeout(o.write_timeout_s, 0);
  http.set_keep_alive_timeout(5);
  http.set_keep_alive_max_count(1000);
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

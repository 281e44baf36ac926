// ConnectionPool: the server's HTTP connections, waited on together by one thread and served by
// a few workers only once a whole request has arrived — so idle and slow clients cost a socket
// and a small buffer, never a worker.
//
//   accept (httplib's listener) ──adopt──▶ poller thread: one epoll set of idle connections
//                                            reads heads (and bodies up to a bound) as they come,
//                                            times out the idle and the slow, caps the open count
//                                              │ a request has arrived whole
//                                              ▼
//                                          ready queue ──▶ worker: httplib parses and routes it,
//                                              ▲             writes the response; pipelined requests
//                                              └─ idle again ┘ already received are served in turn
//
// cpp-httplib 0.11 serves a connection on a pool thread from accept to close and waits for each
// next request there, so a few hundred idle sockets starved every other client. Its request
// parsing and routing are kept (Server::process_request); only the connection handling is ours.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace kvc::server {

struct ConnectionLimits {
  int n_workers = 8;          // threads that serve requests (a streamed answer holds one throughout)
  int max_connections = 512;  // open at once; beyond, the longest idle one is closed, else the new one refused
  std::chrono::milliseconds first_byte_timeout{10'000};  // a new connection that sends nothing is closed
  std::chrono::milliseconds keep_alive_timeout{5'000};   // so is one idle between requests
  std::chrono::milliseconds head_timeout{10'000};        // a request head must arrive whole within this (408)
  std::chrono::milliseconds read_timeout{10'000};        // a body that pauses longer is dropped
  std::chrono::milliseconds write_timeout{10'000};       // a client that reads nothing this long is dropped
  size_t max_head_bytes = 64 * 1024;                     // a longer head is answered 431
  uint64_t max_body_bytes = uint64_t{4} << 20;           // bodies up to this arrive before a worker sees them
  uint64_t max_pending_body_bytes = uint64_t{64} << 20;  // the bodies waited for, all connections together
  int max_requests_per_connection = 1000;
};

// Counters since the pool started, and the connections open now.
struct ConnectionStats {
  int64_t n_open = 0;       // now: idle, waiting for a worker, or served
  int64_t n_accepted = 0;   // connections taken from the listener
  int64_t n_refused = 0;    // closed with a 503 at the cap (no idle one to close instead)
  int64_t n_evicted = 0;    // idle ones closed to make room for a new one
  int64_t n_timed_out = 0;  // closed for sending nothing, or a head too slowly
  int64_t n_requests = 0;   // requests handed to workers
};

class ConnectionPool {
 public:
  // Reads one request from the stream and writes its response: httplib's Server::process_request.
  using ServeRequest = std::function<bool(httplib::Stream& strm, bool close_connection, bool& connection_closed)>;

  ConnectionPool(const ConnectionLimits& limits, ServeRequest serve);
  ~ConnectionPool();  // shutdown()
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Takes an accepted socket (any thread); it is closed by the pool.
  void adopt(int fd);
  // Closes every idle connection, lets the workers finish the request each is serving, joins
  // them; adopt() then closes what it is given.
  void shutdown();
  ConnectionStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// On a worker, while it serves a request: that connection's socket; -1 on any other thread.
int current_connection_socket();
// On a worker: close this request's connection once its response is written (its framing is
// not to be trusted, or its body was not read). No effect elsewhere.
void close_connection_after_response();

// httplib's Server with its accepted connections handed to a ConnectionPool.
class PooledHttpServer : public httplib::Server {
 public:
  explicit PooledHttpServer(const ConnectionLimits& limits);
  ~PooledHttpServer() override;
  PooledHttpServer(const PooledHttpServer&) = delete;
  PooledHttpServer& operator=(const PooledHttpServer&) = delete;

  // After bind_to_port: a listen backlog of `n` (httplib's is 5, so a burst of connections
  // overflowed it and clients saw resets or SYN retries instead of an answer).
  bool set_backlog(int n);
  // After listen_after_bind returned: the pool's shutdown (every handler has ended after it).
  void shutdown_connections() { pool_.shutdown(); }
  ConnectionStats connection_stats() const { return pool_.stats(); }

 private:
  bool process_and_close_socket(socket_t sock) override;
  ConnectionPool pool_;
};

}  // namespace kvc::server

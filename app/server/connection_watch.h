// ConnectionWatch: tells a request handler that its client has hung up, so that the generation
// it waits for can be cancelled before anything is written back.
//
// The handler runs on the connection pool's worker that serves its connection
// (app/server/connection_pool.h), which knows the socket; it is polled: a peer that closed (FIN
// or RST) shows as POLLRDHUP / POLLHUP / POLLERR, or as a zero-byte peek.
#pragma once

namespace kvc::server {

class ConnectionWatch {
 public:
  // The connection of the request this thread serves; inert (never reports a hang-up) on a
  // thread that serves none.
  ConnectionWatch();
  bool found() const { return fd_ >= 0; }
  // True once the peer has closed its side of the connection.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace kvc::server

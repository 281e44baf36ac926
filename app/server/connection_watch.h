// ConnectionWatch: tells a request handler that its client has hung up, so that the generation
// it waits for can be cancelled before anything is written back.
//
// cpp-httplib 0.11 gives a handler no way to see its connection. The handler knows the peer's
// and its own address and port, and its connection stays open while it runs, so the socket is
// found once among the process's descriptors by those, and polled: a peer that closed (FIN or
// RST) shows as POLLRDHUP / POLLHUP / POLLERR, or as a zero-byte peek.
#pragma once

#include <string>

namespace kvc::server {

class ConnectionWatch {
 public:
  // Inert (never reports a hang-up) when no such socket is found.
  ConnectionWatch(const std::string& remote_addr, int remote_port, int local_port);
  bool found() const { return fd_ >= 0; }
  // True once the peer has closed its side of the connection.
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace kvc::server

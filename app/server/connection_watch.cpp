// ConnectionWatch: the socket of the request being served, polled for the peer's hang-up.
#include "app/server/connection_watch.h"

#include <poll.h>
#include <sys/socket.h>

#include "app/server/connection_pool.h"

namespace kvc::server {

ConnectionWatch::ConnectionWatch() : fd_(current_connection_socket()) {}

bool ConnectionWatch::closed() const {
  if (fd_ < 0) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLIN | POLLRDHUP;
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // readable with nothing to read: EOF
  }
  return false;
}

}  // namespace kvc::server

// ConnectionWatch: the handler's socket found by its addresses among /proc/self/fd, then polled.
#include "app/server/connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace kvc::server {

namespace {

// The port of an IPv4 or IPv6 address, and its text ("127.0.0.1", "::1"); false otherwise.
bool describe(const sockaddr_storage& a, std::string& host, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    port = ntohs(in->sin_port);
    if (!inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf)) return false;
  } else if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    port = ntohs(in6->sin6_port);
    if (!inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf)) return false;
  } else {
    return false;
  }
  host = buf;
  return true;
}

bool matches(int fd, const std::string& remote_addr, int remote_port, int local_port) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage peer{}, self{};
  socklen_t n_peer = sizeof peer, n_self = sizeof self;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &n_peer) != 0) return false;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &n_self) != 0) return false;
  std::string peer_host, self_host;
  int peer_port = -1, self_port = -1;
  if (!describe(peer, peer_host, peer_port) || !describe(self, self_host, self_port)) return false;
  // httplib writes IPv4-mapped peers as plain IPv4; compare the ports, then the text loosely.
  return peer_port == remote_port && self_port == local_port &&
         (peer_host == remote_addr || peer_host.ends_with(":" + remote_addr));
}

}  // namespace

ConnectionWatch::ConnectionWatch(const std::string& remote_addr, int remote_port, int local_port) {
  if (remote_port <= 0 || local_port <= 0) return;
  DIR* dir = ::opendir("/proc/self/fd");
  if (!dir) return;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    if (matches(static_cast<int>(fd), remote_addr, remote_port, local_port)) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  ::closedir(dir);
}

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

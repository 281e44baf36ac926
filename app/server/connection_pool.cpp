// ConnectionPool: one epoll thread holds the idle connections; workers serve whole requests.
#include "app/server/connection_pool.h"

#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "app/server/request_head.h"

namespace kvc::server {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t k_recv_chunk = 16 * 1024;
constexpr auto k_linger = std::chrono::milliseconds(2'000);  // reading what a closed connection still sends
// After a request this large, what its parsing freed is handed back to the system: glibc keeps
// freed heap memory, and a few refused multi-megabyte prompts left gigabytes resident.
constexpr size_t k_trim_after_bytes = size_t{1} << 20;

// One client connection. Owned by exactly one of: the poller (idle, in its epoll set), the
// ready queue, or the worker serving it.
//
//   buf: | consumed by httplib | received, not yet read |
//        0                    pos                     size()
//   While a request is served, buf[0, pos) is its part already read; between requests buf
//   starts at the next request (or is empty).
struct Connection {
  int fd = -1;
  std::string buf;
  size_t pos = 0;
  RequestHead head;              // of the request at buf's start, once its head is complete
  Clock::time_point deadline;    // the poller closes it then
  Clock::time_point idle_since;  // eviction order: the longest idle goes first
  bool started = false;          // a byte of the next request has arrived
  bool peer_eof = false;         // the client closed its side
  bool lingering = false;        // the poller reads and drops what comes until EOF, then closes
  bool must_close = false;       // close once the response is written
  uint64_t pending_body = 0;     // body bytes reserved against max_pending_body_bytes
  int n_served = 0;
};

thread_local Connection* t_current = nullptr;

// Waits for `events` on fd up to `timeout`; false on timeout or error.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (r > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Acknowledge what arrived at once. A client that writes its request's head and body
// separately (most do) keeps the body back under Nagle's algorithm until the head is
// acknowledged, and Linux delays that ACK by up to 40 ms; quick-ACK mode lapses by itself, so it
// is asked for again after every read.
void ack_now(int fd) {
  const int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &yes, sizeof yes);
}

void describe_address(const sockaddr_storage& a, socklen_t n, std::string& ip, int& port) {
  char host[NI_MAXHOST] = {};
  char serv[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&a), n, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return;
  }
  ip = host;
  port = std::atoi(serv);
}

// httplib's view of a connection: reads come from the bytes the poller already received, then
// from the socket; writes go straight out. One stream serves every request of a connection, so
// pipelined requests received with an earlier one are not lost.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(Connection& c, const ConnectionLimits& limits) : c_(c), limits_(limits) {}

  bool is_readable() const override { return c_.pos < c_.buf.size() || wait_for(c_.fd, POLLIN, limits_.read_timeout); }
  bool is_writable() const override { return wait_for(c_.fd, POLLOUT, limits_.write_timeout); }

  ssize_t read(char* ptr, size_t size) override {
    if (c_.pos == c_.buf.size()) {
      if (c_.peer_eof) return 0;
      if (!wait_for(c_.fd, POLLIN, limits_.read_timeout)) return -1;
      char chunk[k_recv_chunk];
      const ssize_t n = ::recv(c_.fd, chunk, sizeof chunk, MSG_DONTWAIT);
      ack_now(c_.fd);
      if (n == 0) {
        c_.peer_eof = true;
        return 0;
      }
      if (n < 0) return -1;
      c_.buf.append(chunk, static_cast<size_t>(n));
    }
    const size_t n = std::min(size, c_.buf.size() - c_.pos);
    std::memcpy(ptr, c_.buf.data() + c_.pos, n);
    c_.pos += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_for(c_.fd, POLLOUT, limits_.write_timeout)) return -1;
    return ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    if (::getpeername(c_.fd, reinterpret_cast<sockaddr*>(&a), &n) == 0) describe_address(a, n, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &n) == 0) describe_address(a, n, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  Connection& c_;
  const ConnectionLimits& limits_;
};

// A short answer written by the poller itself (it never blocks: the socket's buffer takes it).
void send_canned(int fd, int status, const char* reason, const std::string& message) {
  const std::string body =
      R"({"error":{"message":")" + message + R"(","type":"invalid_request_error","param":null,"code":null}})";
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                  "\r\nContent-Type: application/json\r\nConnection: close\r\n";
  if (status == 503) r += "Retry-After: 1\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  [[maybe_unused]] const ssize_t n = ::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

struct ConnectionPool::Impl {
  Impl(const ConnectionLimits& l, ServeRequest s) : limits(l), serve(std::move(s)) {}

  ConnectionLimits limits;
  ServeRequest serve;
  int epoll_fd = -1;
  int wake_fd = -1;
  std::thread poller;
  std::vector<std::thread> workers;

  std::atomic<bool> stopping{false};
  std::atomic<int64_t> n_open{0}, n_accepted{0}, n_refused{0}, n_evicted{0}, n_timed_out{0}, n_requests{0};

  // Handed to the poller: new sockets and connections back from workers.
  std::mutex inbox_mu;
  std::vector<int> new_fds;
  std::vector<std::unique_ptr<Connection>> returned;
  bool poller_done = false;

  // The poller's own: its connections by socket, and the body bytes they wait for.
  std::unordered_map<int, std::unique_ptr<Connection>> idle;
  uint64_t pending_body = 0;

  std::mutex ready_mu;
  std::condition_variable ready_cv;
  std::deque<std::unique_ptr<Connection>> ready;

  void start();
  void stop();
  void wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  // Poller side.
  void poll_loop();
  void take_inbox();
  void admit(int fd);
  void watch(std::unique_ptr<Connection> c);
  void on_readable(Connection& c);
  void examine(int fd);
  void dispatch(int fd);
  void expire();
  void close_idle(int fd);
  void linger(int fd);
  bool evict_one();

  // Worker side.
  void work_loop();
  void serve_connection(std::unique_ptr<Connection> c);
  void give_back(std::unique_ptr<Connection> c);
  void close_connection(std::unique_ptr<Connection> c);
};

void ConnectionPool::Impl::start() {
  epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  poller = std::thread([this] {
    pthread_setname_np(pthread_self(), "kvc-http-poll");
    poll_loop();
  });
  for (int i = 0; i < std::max(1, limits.n_workers); ++i) {
    workers.emplace_back([this] {
      pthread_setname_np(pthread_self(), "kvc-http");
      work_loop();
    });
  }
}

void ConnectionPool::Impl::stop() {
  if (stopping.exchange(true)) return;
  wake();
  ready_cv.notify_all();
  if (poller.joinable()) poller.join();
  for (std::thread& t : workers) t.join();
  // What the workers could not hand back once the poller was gone.
  std::lock_guard lock(inbox_mu);
  for (const int fd : new_fds) ::close(fd);
  new_fds.clear();
  for (auto& c : returned) ::close(c->fd);
  n_open -= static_cast<int64_t>(returned.size());
  returned.clear();
  ::close(wake_fd);
  ::close(epoll_fd);
}

// ---- the poller -----------------------------------------------------------------------------

void ConnectionPool::Impl::poll_loop() {
  epoll_event events[64];
  while (!stopping.load()) {
    // Wake for the earliest deadline, and at least once a second.
    auto next = Clock::now() + std::chrono::seconds(1);
    for (const auto& [fd, c] : idle) next = std::min(next, c->deadline);
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    const int n = ::epoll_wait(epoll_fd, events, 64, static_cast<int>(std::clamp<int64_t>(wait_ms + 1, 0, 1000)));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd, &count, sizeof count);
        take_inbox();
      } else if (auto it = idle.find(fd); it != idle.end()) {
        on_readable(*it->second);
        examine(fd);
      }
    }
    expire();
  }
  std::lock_guard lock(inbox_mu);
  poller_done = true;
  for (auto& [fd, c] : idle) ::close(fd);
  n_open -= static_cast<int64_t>(idle.size());
  idle.clear();
}

void ConnectionPool::Impl::take_inbox() {
  std::vector<int> fds;
  std::vector<std::unique_ptr<Connection>> back;
  {
    std::lock_guard lock(inbox_mu);
    fds.swap(new_fds);
    back.swap(returned);
  }
  for (auto& c : back) {
    const int fd = c->fd;
    watch(std::move(c));
    examine(fd);  // a pipelined request may be partly here already
  }
  for (const int fd : fds) admit(fd);
}

void ConnectionPool::Impl::admit(int fd) {
  ++n_accepted;
  if (n_open.load() >= limits.max_connections && !evict_one()) {
    ++n_refused;
    send_canned(fd, 503, "Service Unavailable",
                "the server has " + std::to_string(limits.max_connections) +
                    " connections open, its limit (kvchat-cli serve --max-connections); retry shortly");
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
    return;
  }
  ++n_open;
  const int yes = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // answers are written in pieces
  ack_now(fd);
  auto c = std::make_unique<Connection>();
  c->fd = fd;
  c->idle_since = Clock::now();
  c->deadline = c->idle_since + limits.first_byte_timeout;
  watch(std::move(c));
}

void ConnectionPool::Impl::watch(std::unique_ptr<Connection> c) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  const int fd = c->fd;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    ::close(fd);
    --n_open;
    return;
  }
  idle.emplace(fd, std::move(c));
}

void ConnectionPool::Impl::on_readable(Connection& c) {
  // Read what is there, but no more than the head limit plus the body this request may bring.
  const RequestHead h = scan_request_head(c.buf, limits.max_head_bytes);
  const uint64_t want = c.lingering ? k_recv_chunk
                        : h.length_known() && h.content_length <= limits.max_body_bytes
                            ? std::max<uint64_t>(h.request_bytes(), c.buf.size() + 1)
                            : limits.max_head_bytes + 1;
  char chunk[k_recv_chunk];
  while (c.lingering || c.buf.size() < want) {
    const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      ack_now(c.fd);
      if (!c.lingering) c.buf.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) c.peer_eof = true;
    if (n < 0 && errno == EINTR) continue;
    break;
  }
}

// What the connection's bytes say now: wait on, hand to a worker, or close.
void ConnectionPool::Impl::examine(int fd) {
  auto it = idle.find(fd);
  if (it == idle.end()) return;
  Connection& c = *it->second;
  if (c.lingering) {
    if (c.peer_eof) close_idle(fd);
    return;
  }
  if (!c.started) c.buf.erase(0, leading_empty_lines(c.buf));
  if (c.buf.empty()) {
    if (c.peer_eof) close_idle(fd);
    return;
  }
  const auto now = Clock::now();
  if (!c.started) {
    c.started = true;
    c.deadline = now + limits.head_timeout;
  }
  const RequestHead h = scan_request_head(c.buf, limits.max_head_bytes);
  if (h.state == RequestHead::State::too_large) {
    send_canned(fd, 431, "Request Header Fields Too Large",
                "the request's head is over " + std::to_string(limits.max_head_bytes) + " bytes");
    return linger(fd);
  }
  if (h.state == RequestHead::State::incomplete) {
    if (c.peer_eof) close_idle(fd);  // a request cut off: nobody to answer
    return;
  }
  c.head = h;
  const uint64_t body = h.length_known() ? h.content_length : 0;
  if (!h.length_known() || h.expect_continue || body > limits.max_body_bytes || c.buf.size() >= h.request_bytes())
    return dispatch(fd);
  // The body is on its way: wait for it here while the pending bodies stay within their bound.
  if (c.pending_body == 0) {
    if (pending_body + body > limits.max_pending_body_bytes) return dispatch(fd);
    c.pending_body = body;
    pending_body += body;
  }
  if (c.peer_eof) return close_idle(fd);
  c.deadline = now + limits.read_timeout;  // a body that keeps coming keeps its connection
}

void ConnectionPool::Impl::dispatch(int fd) {
  auto it = idle.find(fd);
  std::unique_ptr<Connection> c = std::move(it->second);
  idle.erase(it);
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  pending_body -= c->pending_body;
  c->pending_body = 0;
  ++n_requests;
  {
    std::lock_guard lock(ready_mu);
    ready.push_back(std::move(c));
  }
  ready_cv.notify_one();
}

void ConnectionPool::Impl::expire() {
  const auto now = Clock::now();
  std::vector<int> due;
  for (const auto& [fd, c] : idle) {
    if (c->deadline <= now) due.push_back(fd);
  }
  for (const int fd : due) {
    Connection& c = *idle.at(fd);
    if (!c.lingering) ++n_timed_out;
    if (c.started && !c.lingering) {
      send_canned(fd, 408, "Request Timeout",
                  "the request did not arrive whole within " +
                      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limits.head_timeout).count()) +
                      " s");
    }
    close_idle(fd);
  }
}

void ConnectionPool::Impl::close_idle(int fd) {
  auto it = idle.find(fd);
  if (it == idle.end()) return;
  pending_body -= it->second->pending_body;
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  idle.erase(it);
  --n_open;
}

// Stops sending, then reads and drops until the client closes (or a short while): closing with
// unread bytes would reset the connection, and the client could lose the answer just written.
void ConnectionPool::Impl::linger(int fd) {
  Connection& c = *idle.at(fd);
  ::shutdown(fd, SHUT_WR);
  c.lingering = true;
  c.buf.clear();
  c.deadline = Clock::now() + k_linger;
  pending_body -= c.pending_body;
  c.pending_body = 0;
}

// Closes the connection idle the longest that holds no part of a request; false when none does.
bool ConnectionPool::Impl::evict_one() {
  int victim = -1;
  Clock::time_point oldest = Clock::time_point::max();
  for (const auto& [fd, c] : idle) {
    const bool holds_request = c->started && !c->lingering;
    if (!holds_request && c->idle_since < oldest) {
      oldest = c->idle_since;
      victim = fd;
    }
  }
  if (victim < 0) return false;
  ++n_evicted;
  close_idle(victim);
  return true;
}

// ---- the workers ----------------------------------------------------------------------------

void ConnectionPool::Impl::work_loop() {
  while (true) {
    std::unique_ptr<Connection> c;
    {
      std::unique_lock lock(ready_mu);
      ready_cv.wait(lock, [&] { return !ready.empty() || stopping.load(); });
      if (ready.empty()) return;
      c = std::move(ready.front());
      ready.pop_front();
    }
    if (stopping.load()) {
      close_connection(std::move(c));
      continue;
    }
    serve_connection(std::move(c));
  }
}

void ConnectionPool::Impl::serve_connection(std::unique_ptr<Connection> c) {
  ConnectionStream strm(*c, limits);
  t_current = c.get();
  bool keep = true;
  while (keep) {
    c->pos = 0;
    c->must_close = false;
    bool closed = false;
    const bool last = stopping.load() || c->n_served + 1 >= limits.max_requests_per_connection;
    const bool ok = serve(strm, last, closed);
    ++c->n_served;
#ifdef __GLIBC__
    if (c->pos >= k_trim_after_bytes) ::malloc_trim(0);
#endif
    keep = ok && !closed && !last && !c->must_close;
    // The body httplib left unread (a request refused before its body was needed) is skipped
    // when it is here; otherwise the connection cannot find the next request and is closed.
    if (keep) {
      const uint64_t end = c->head.request_bytes();
      if (!c->head.length_known() || end > c->buf.size()) {
        keep = false;
      } else {
        c->buf.erase(0, std::max<size_t>(c->pos, static_cast<size_t>(end)));
        c->pos = 0;
      }
    }
    if (!keep) break;
    // A next request already here whole is served at once; anything less goes back to the poller.
    c->buf.erase(0, leading_empty_lines(c->buf));
    const RequestHead h = scan_request_head(c->buf, limits.max_head_bytes);
    if (h.state == RequestHead::State::complete && h.length_known() && !h.expect_continue &&
        c->buf.size() >= h.request_bytes()) {
      c->head = h;
      ++n_requests;
      continue;
    }
    t_current = nullptr;
    // An idle connection keeps no room for the large body it once had.
    if (c->buf.capacity() > 4 * k_recv_chunk && c->buf.size() < k_recv_chunk) c->buf.shrink_to_fit();
    c->head = RequestHead{};
    c->started = false;
    c->idle_since = Clock::now();
    c->deadline = c->idle_since + limits.keep_alive_timeout;
    return give_back(std::move(c));
  }
  t_current = nullptr;
  close_connection(std::move(c));
}

void ConnectionPool::Impl::give_back(std::unique_ptr<Connection> c) {
  {
    std::lock_guard lock(inbox_mu);
    if (!poller_done) {
      returned.push_back(std::move(c));
      c = nullptr;
    }
  }
  if (c) return close_connection(std::move(c));
  wake();
}

void ConnectionPool::Impl::close_connection(std::unique_ptr<Connection> c) {
  // Bytes still unread (the rest of a refused body, a pipelined request): let the poller drain
  // them after the answer, so that closing does not reset the connection under it.
  const bool unread = c->pos < c->buf.size() || (!c->peer_eof && wait_for(c->fd, POLLIN, std::chrono::milliseconds(0)));
  if (unread && !stopping.load()) {
    ::shutdown(c->fd, SHUT_WR);
    c->lingering = true;
    c->buf.clear();
    c->pos = 0;
    c->deadline = Clock::now() + k_linger;
    return give_back(std::move(c));
  }
  ::shutdown(c->fd, SHUT_RDWR);
  ::close(c->fd);
  --n_open;
}

// ---- the pool -------------------------------------------------------------------------------

ConnectionPool::ConnectionPool(const ConnectionLimits& limits, ServeRequest serve)
    : impl_(std::make_unique<Impl>(limits, std::move(serve))) {
  impl_->start();
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::adopt(int fd) {
  {
    std::lock_guard lock(impl_->inbox_mu);
    if (!impl_->poller_done && !impl_->stopping.load()) {
      impl_->new_fds.push_back(fd);
      fd = -1;
    }
  }
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  impl_->wake();
}

void ConnectionPool::shutdown() { impl_->stop(); }

ConnectionStats ConnectionPool::stats() const {
  ConnectionStats s;
  s.n_open = impl_->n_open.load();
  s.n_accepted = impl_->n_accepted.load();
  s.n_refused = impl_->n_refused.load();
  s.n_evicted = impl_->n_evicted.load();
  s.n_timed_out = impl_->n_timed_out.load();
  s.n_requests = impl_->n_requests.load();
  return s;
}

int current_connection_socket() { return t_current ? t_current->fd : -1; }

void close_connection_after_response() {
  if (t_current) t_current->must_close = true;
}

// ---- httplib's side -------------------------------------------------------------------------

namespace {

// httplib's listener hands each accepted socket to its task queue: run it at once, on the
// listener's thread; process_and_close_socket below only passes the socket on.
class HandOver final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

PooledHttpServer::PooledHttpServer(const ConnectionLimits& limits)
    : pool_(limits, [this](httplib::Stream& strm, bool close_connection, bool& connection_closed) {
        return process_request(strm, close_connection, connection_closed, nullptr);
      }) {
  new_task_queue = [] { return new HandOver; };
}

PooledHttpServer::~PooledHttpServer() { pool_.shutdown(); }

bool PooledHttpServer::set_backlog(int n) {
  const socket_t s = svr_sock_;
  return s != INVALID_SOCKET && ::listen(s, n) == 0;
}

bool PooledHttpServer::process_and_close_socket(socket_t sock) {
  pool_.adopt(sock);
  return true;
}

}  // namespace kvc::server

// The data directory's advisory lock: flock on DIR/lock, with the holder's pid written inside.
#include "storage/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kvc::storage {

namespace {

// What the lock file says about its holder ("pid 1234, the kvchat app"), or "" if unreadable.
std::string read_holder(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s.find('\n') == std::string::npos ? s : "";
}

}  // namespace

Result<DataDirLock> DataDirLock::acquire(const std::filesystem::path& dir, std::string_view holder) {
  std::filesystem::path path = dir / "lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return make_error(ErrorCode::io, "cannot create " + path.string() + ": " + std::strerror(errno) +
                                         "; make the data directory writable or choose another with --data-dir");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string who = read_holder(fd);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return make_error(ErrorCode::io, "cannot lock " + path.string() + ": " + std::strerror(err));
    }
    return make_error(ErrorCode::invalid_argument, "another kvchat (" +
                                                       (who.empty() ? std::string("a process that left no pid") : who) +
                                                       ") is using the data directory " + dir.string() +
                                                       "; close it, or start this one with another --data-dir");
  }
  // Ours now: say who holds it, for the message of the next one refused. Best effort.
  const std::string note = "pid " + std::to_string(::getpid()) + ", " + std::string(holder) + "\n";
  if (::ftruncate(fd, 0) == 0) { [[maybe_unused]] const ssize_t n = ::pwrite(fd, note.data(), note.size(), 0); }
  return DataDirLock(fd, std::move(path));
}

DataDirLock::DataDirLock(DataDirLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), path_(std::move(other.path_)) {}

DataDirLock& DataDirLock::operator=(DataDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

// Closing the descriptor releases the lock; the file stays (removing it could race a newcomer).
DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kvc::storage

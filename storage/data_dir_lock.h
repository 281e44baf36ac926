// One writer per data directory: an advisory lock (flock) on DIR/lock, held for a process's life.
//
// The app and `kvchat-cli serve` each take it before they open their databases and cold store;
// a second one on the same directory gets an error naming the holder instead of two processes
// writing the same files behind each other's backs. Read-only commands do not take it. The
// kernel drops the lock when the holder exits, however it exits (SIGKILL included), so a stale
// lock file never blocks anyone.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/util/result.h"

namespace kvc::storage {

class DataDirLock {
 public:
  // Locks DIR/lock (creating it); `holder` says who holds it in a refused one's message
  // ("the kvchat app", "kvchat-cli serve"). The directory must exist. Held elsewhere: an
  // error code invalid_argument whose message names the holder's pid and what to do.
  static Result<DataDirLock> acquire(const std::filesystem::path& dir, std::string_view holder);

  DataDirLock(DataDirLock&& other) noexcept;
  DataDirLock& operator=(DataDirLock&& other) noexcept;
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;
  ~DataDirLock();

  const std::filesystem::path& path() const { return path_; }

 private:
  DataDirLock(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

}  // namespace kvc::storage

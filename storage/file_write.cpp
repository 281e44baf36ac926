// Whole-file writes with the kernel's reason and what to do when they fail.
#include "storage/file_write.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace kvc::storage {

const char* write_errno_advice(int err) {
  switch (err) {
    case ENOSPC: return "the disk is full; free space or choose another --data-dir";
    case EFBIG:
      return "the file reached the size limit this process may write (EFBIG: `ulimit -f`, or the file system's "
             "largest file); raise the limit or choose another --data-dir";
    case EDQUOT: return "the disk quota is used up; free space within it or choose another --data-dir";
    case EROFS: return "the file system is read-only; remount it writable or choose another --data-dir";
    case EACCES:
    case EPERM: return "permission denied; fix the permissions or choose another --data-dir";
    default: return nullptr;
  }
}

int likely_write_errno(const std::filesystem::path& file) {
  rlimit lim{};
  if (::getrlimit(RLIMIT_FSIZE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    for (const char* suffix : {"", "-wal", "-journal"}) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(file.string() + suffix, ec);
      if (!ec && size + 64 * 1024 >= lim.rlim_cur) return EFBIG;
    }
  }
  struct statvfs st {};
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  if (::statvfs(dir.c_str(), &st) == 0 && static_cast<uint64_t>(st.f_bavail) * st.f_frsize < (uint64_t{1} << 20)) {
    return ENOSPC;
  }
  return 0;
}

namespace {

Error write_error(int err, std::string_view what, const std::filesystem::path& path) {
  std::string msg = "cannot write " + std::string(what) + " " + path.string() + ": ";
  if (const char* a = write_errno_advice(err)) {
    msg += a;
  } else {
    msg += std::strerror(err);
  }
  return make_error(ErrorCode::io, std::move(msg));
}

}  // namespace

Status write_file_replacing(const std::filesystem::path& path, std::string_view bytes, std::string_view what) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return write_error(errno, what, path);
  size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return write_error(err, what, path);
  }
  return {};
}

}  // namespace kvc::storage

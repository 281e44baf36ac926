// Block payload files: atomic writes by rename, exact-size reads.
#include "storage/payload_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "storage/file_write.h"

namespace kvc::storage {

namespace {

constexpr const char* k_suffix = ".kvb";

Error io_error(const std::filesystem::path& path, const char* doing, int err) {
  const char* known = write_errno_advice(err);  // EFBIG says "size limit", as for the databases
  const std::string advice = known ? known : std::strerror(err);
  return make_error(ErrorCode::io, std::string("cannot ") + doing + " cold KV block " + path.string() + ": " + advice);
}

}  // namespace

std::filesystem::path PayloadFiles::path_of(const kv::BlockKey& key) const {
  const std::string hex = key.hex();
  return root_ / hex.substr(0, 2) / (hex + k_suffix);
}

Status PayloadFiles::write(const kv::BlockKey& key, std::span<const uint8_t> payload) {
  const auto path = path_of(key);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  auto tmp = path;
  tmp += ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(tmp, "create", errno);
  size_t done = 0;
  while (done < payload.size()) {
    const ssize_t n = ::write(fd, payload.data() + done, payload.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      return io_error(tmp, "write", err);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return io_error(tmp, "write", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return io_error(path, "write", err);
  }
  return {};
}

bool PayloadFiles::read(const kv::BlockKey& key, std::span<uint8_t> out) const {
  const auto path = path_of(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == out.size();
  size_t done = 0;
  while (ok && done < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ok = false;
    else
      done += static_cast<size_t>(n);
  }
  ::close(fd);
  return ok;
}

void PayloadFiles::remove(const kv::BlockKey& key) const { ::unlink(path_of(key).c_str()); }

int64_t PayloadFiles::remove_orphans(const std::unordered_set<kv::BlockKey, kv::BlockKeyHash>& keep) const {
  std::error_code ec;
  int64_t n_removed = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(root_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto name = it->path().filename().string();
    const bool is_block = name.size() == 32 + std::strlen(k_suffix) && name.ends_with(k_suffix);
    if (is_block && keep.count(kv::BlockKey::from_hex(name.substr(0, 32)))) continue;
    std::error_code rm_ec;
    if (std::filesystem::remove(it->path(), rm_ec)) ++n_removed;
  }
  return n_removed;
}

}  // namespace kvc::storage

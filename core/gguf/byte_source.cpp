// Read-only file mapping with mmap, or an owned buffer, behind one interface.
#include "core/gguf/byte_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kvc::gguf {

ByteSource::ByteSource(std::vector<uint8_t> bytes)
    : owned_(std::move(bytes)), data_(owned_.data()), n_bytes_(owned_.size()) {}

Result<ByteSource> ByteSource::map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorCode::io, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(ErrorCode::io, "cannot stat " + path + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::io, "cannot open " + path + ": not a regular file");
  }
  ByteSource src;
  if (st.st_size > 0) {
    const auto n = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return make_error(ErrorCode::io, "cannot map " + path + ": " + std::strerror(e));
    }
    src.mapping_ = p;
    src.data_ = static_cast<const uint8_t*>(p);
    src.n_bytes_ = n;
  }
  ::close(fd);  // the mapping keeps the file alive
  return src;
}

ByteSource::ByteSource(ByteSource&& o) noexcept { *this = std::move(o); }

ByteSource& ByteSource::operator=(ByteSource&& o) noexcept {
  if (this == &o) return *this;
  release();
  owned_ = std::move(o.owned_);  // a moved vector keeps its buffer, so data_ stays valid
  mapping_ = std::exchange(o.mapping_, nullptr);
  data_ = std::exchange(o.data_, nullptr);
  n_bytes_ = std::exchange(o.n_bytes_, 0);
  o.owned_.clear();
  return *this;
}

ByteSource::~ByteSource() { release(); }

void ByteSource::release() {
  if (mapping_ != nullptr) ::munmap(mapping_, n_bytes_);
  mapping_ = nullptr;
  owned_.clear();
  owned_.shrink_to_fit();
  data_ = nullptr;
  n_bytes_ = 0;
}

}  // namespace kvc::gguf

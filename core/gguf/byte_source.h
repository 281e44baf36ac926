// ByteSource: the bytes of a file, either mapped read-only from disk or owned in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/result.h"

namespace kvc::gguf {

// Move-only. data() stays valid and unchanged for the object's life, across moves.
// A mapped file must not be truncated by another process while mapped (that is SIGBUS,
// which no reader can prevent).
class ByteSource {
 public:
  ByteSource() = default;
  explicit ByteSource(std::vector<uint8_t> bytes);
  // Maps a regular file read-only; errors name the path and the system's reason.
  static Result<ByteSource> map_file(const std::string& path);

  ByteSource(ByteSource&& o) noexcept;
  ByteSource& operator=(ByteSource&& o) noexcept;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;
  ~ByteSource();

  const uint8_t* data() const { return data_; }
  size_t size() const { return n_bytes_; }

 private:
  void release();

  std::vector<uint8_t> owned_;
  void* mapping_ = nullptr;  // non-null when mapped; then data_ == mapping_
  const uint8_t* data_ = nullptr;
  size_t n_bytes_ = 0;
};

}  // namespace kvc::gguf

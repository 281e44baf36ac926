// GgufWriter: validation, GGUF v3 encoding, and the atomic write through a temporary file.
#include "core/gguf/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>

#include "core/gguf/gguf_format.h"
#include "core/gguf/tensor_types.h"

namespace kvc::gguf {

namespace {

Error invalid(std::string msg) { return make_error(ErrorCode::invalid_argument, "GGUF writer: " + std::move(msg)); }

// Appends little-endian encodings to a byte buffer.
class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}

  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void put_value(const Value& v) {
    std::visit([&](const auto& x) { put_payload(x); }, v.storage());
  }

 private:
  template <typename T>
  void put_payload(const T& x) {
    put(x);
  }
  void put_payload(bool b) { put(static_cast<uint8_t>(b ? 1 : 0)); }
  void put_payload(const std::string& s) { put_string(s); }
  void put_payload(const Array& a) {
    put(static_cast<uint32_t>(a.element_type()));
    put(static_cast<uint64_t>(a.size()));
    std::visit(
        [&](const auto& elems) {
          for (const auto& e : elems) put_payload(e);
        },
        a.elements());
  }

  std::vector<uint8_t>& out_;
};

// Nesting depth of an array value: 1 for an array of scalars.
int array_depth(const Array& a) {
  int inner = 0;
  if (const auto* arrays = a.as<Array>()) {
    for (const Array& x : *arrays) inner = std::max(inner, array_depth(x));
  }
  return 1 + inner;
}

size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

struct GgufWriter::Layout {
  size_t alignment = k_default_alignment;
  std::vector<uint8_t> head;      // header, metadata, tensor infos and (with tensors) padding
  std::vector<uint64_t> offsets;  // per tensor, from the data section start
  std::vector<size_t> n_bytes;    // per tensor
};

void GgufWriter::set(std::string key, Value value) {
  for (MetadataEntry& e : metadata_) {
    if (e.key == key) {
      e.value = std::move(value);
      return;
    }
  }
  metadata_.push_back({std::move(key), std::move(value)});
}

void GgufWriter::erase(std::string_view key) {
  std::erase_if(metadata_, [&](const MetadataEntry& e) { return e.key == key; });
}

void GgufWriter::add_tensor(std::string name, std::vector<int64_t> shape, kernels::DType type,
                            std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  const size_t n = owned->size();
  tensors_.push_back({std::move(name), std::move(shape), type, n,
                      [owned](const ByteSink& sink) { return sink(std::span<const uint8_t>(*owned)); }});
}

void GgufWriter::add_tensor_view(std::string name, std::vector<int64_t> shape, kernels::DType type,
                                 std::span<const uint8_t> bytes) {
  tensors_.push_back(
      {std::move(name), std::move(shape), type, bytes.size(), [bytes](const ByteSink& sink) { return sink(bytes); }});
}

void GgufWriter::add_tensor_stream(std::string name, std::vector<int64_t> shape, kernels::DType type,
                                   TensorProducer produce) {
  tensors_.push_back({std::move(name), std::move(shape), type, std::nullopt, std::move(produce)});
}

Result<GgufWriter::Layout> GgufWriter::plan() const {
  Layout layout;
  for (const MetadataEntry& e : metadata_) {
    if (e.key == k_alignment_key) {
      const uint32_t* a = e.value.as<uint32_t>();
      if (a == nullptr) return invalid("general.alignment must be a u32, not " + describe(e.value));
      if (*a == 0 || !std::has_single_bit(*a)) {
        return invalid("alignment " + std::to_string(*a) + " is not a power of two greater than zero");
      }
      layout.alignment = *a;
    }
    if (const Array* arr = e.value.as<Array>(); arr && array_depth(*arr) > k_max_array_depth) {
      return invalid("metadata " + printable(e.key) + ": arrays are nested more than " +
                     std::to_string(k_max_array_depth) + " levels deep");
    }
  }

  std::set<std::string_view> names;
  uint64_t data_bytes = 0;
  for (const PendingTensor& t : tensors_) {
    const std::string what = "tensor " + printable(t.name) + ": ";
    if (!names.insert(t.name).second) return invalid(what + "duplicate tensor name");
    if (t.shape.empty() || t.shape.size() > k_max_dims) {
      return invalid(what + "has " + std::to_string(t.shape.size()) + " dimensions; a GGUF tensor has 1 to 4");
    }
    int64_t n_elements = 1;
    for (int64_t d : t.shape) {
      if (d < 1) return invalid(what + "dimension " + std::to_string(d) + " is not positive");
      if (n_elements > std::numeric_limits<int64_t>::max() / d) return invalid(what + "element count overflows");
      n_elements *= d;
    }
    if (!supported_tensor_type(static_cast<uint32_t>(t.type))) {
      return invalid(what + "type id " + std::to_string(static_cast<uint32_t>(t.type)) + " cannot be stored");
    }
    const kernels::DTypeInfo& info = kernels::dtype_info(t.type);
    if (t.shape[0] % info.block_elems != 0) {
      return invalid(what + "row length " + std::to_string(t.shape[0]) + " is not a multiple of " + info.name +
                     "'s block of " + std::to_string(info.block_elems) + " elements");
    }
    const auto n_blocks = static_cast<size_t>(n_elements / info.block_elems);
    if (n_blocks > (std::numeric_limits<size_t>::max() - data_bytes - layout.alignment) / info.block_bytes) {
      return invalid(what + "byte size overflows");
    }
    const size_t n_bytes = n_blocks * info.block_bytes;
    if (t.known_bytes && *t.known_bytes != n_bytes) {
      return invalid(what + "has " + std::to_string(*t.known_bytes) + " bytes of data, but its shape and type " +
                     info.name + " need " + std::to_string(n_bytes));
    }
    data_bytes = align_up(data_bytes, layout.alignment);
    layout.offsets.push_back(data_bytes);
    layout.n_bytes.push_back(n_bytes);
    data_bytes += n_bytes;
  }

  Encoder enc(layout.head);
  layout.head.insert(layout.head.end(), {'G', 'G', 'U', 'F'});
  enc.put(k_write_version);
  enc.put(static_cast<uint64_t>(tensors_.size()));
  enc.put(static_cast<uint64_t>(metadata_.size()));
  for (const MetadataEntry& e : metadata_) {
    enc.put_string(e.key);
    enc.put(static_cast<uint32_t>(e.value.type()));
    enc.put_value(e.value);
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PendingTensor& t = tensors_[i];
    enc.put_string(t.name);
    enc.put(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) enc.put(static_cast<uint64_t>(d));
    enc.put(static_cast<uint32_t>(t.type));
    enc.put(layout.offsets[i]);
  }
  // Without tensors there is no data section to align (the reader accepts that), so a large
  // alignment costs nothing.
  if (!tensors_.empty()) layout.head.resize(align_up(layout.head.size(), layout.alignment), 0);
  return layout;
}

Status GgufWriter::write_to(const ByteSink& sink) const {
  Result<Layout> layout = plan();
  if (!layout.ok()) return layout.error();
  KVC_TRY(sink(layout->head));
  static constexpr uint8_t k_zeros[256] = {};
  uint64_t pos = 0;  // within the data section
  for (size_t i = 0; i < tensors_.size(); ++i) {
    for (uint64_t pad = layout->offsets[i] - pos; pad > 0;) {
      const size_t n = std::min<uint64_t>(pad, sizeof k_zeros);
      KVC_TRY(sink(std::span<const uint8_t>(k_zeros, n)));
      pad -= n;
    }
    uint64_t n_written = 0;
    const ByteSink counting = [&](std::span<const uint8_t> chunk) -> Status {
      n_written += chunk.size();
      if (n_written > layout->n_bytes[i]) return Status();  // reported below; drop the excess
      return sink(chunk);
    };
    KVC_TRY(tensors_[i].produce(counting));
    if (n_written != layout->n_bytes[i]) {
      return invalid("tensor " + printable(tensors_[i].name) + ": its producer wrote " + std::to_string(n_written) +
                     " bytes, but its shape and type need " + std::to_string(layout->n_bytes[i]));
    }
    pos = layout->offsets[i] + layout->n_bytes[i];
  }
  return {};
}

Result<std::vector<uint8_t>> GgufWriter::write_to_memory() const {
  std::vector<uint8_t> out;
  Status s = write_to([&](std::span<const uint8_t> chunk) {
    out.insert(out.end(), chunk.begin(), chunk.end());
    return Status();
  });
  if (!s.ok()) return s.error();
  return out;
}

namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  return make_error(ErrorCode::io, "cannot " + what + " " + path + ": " + std::strerror(err));
}

// Buffered writes to a file descriptor; all errors carry the path and errno text.
class FileSink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(k_buffer_bytes); }

  Status put(std::span<const uint8_t> chunk) {
    if (buf_.size() + chunk.size() > k_buffer_bytes) KVC_TRY(flush());
    if (chunk.size() >= k_buffer_bytes) return write_all(chunk);
    buf_.insert(buf_.end(), chunk.begin(), chunk.end());
    return {};
  }
  Status flush() {
    Status s = write_all(buf_);
    buf_.clear();
    return s;
  }

 private:
  static constexpr size_t k_buffer_bytes = size_t{1} << 20;

  Status write_all(std::span<const uint8_t> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return io_error("write", path_, errno);
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
    return {};
  }

  int fd_;
  std::string path_;
  std::vector<uint8_t> buf_;
};

}  // namespace

Status GgufWriter::write(const std::string& path) const {
  if (Result<Layout> layout = plan(); !layout.ok()) return layout.error();  // fail before touching disk
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return io_error("create a temporary file next to", path, errno);
  auto fail = [&](Error e) -> Status {
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  };
  if (::fchmod(fd, 0644) != 0) return fail(io_error("set permissions of", tmp, errno));
  FileSink file(fd, tmp);
  if (Status s = write_to([&](std::span<const uint8_t> c) { return file.put(c); }); !s.ok()) return fail(s.error());
  if (Status s = file.flush(); !s.ok()) return fail(s.error());
  if (::fsync(fd) != 0) return fail(io_error("sync", tmp, errno));
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return io_error("close", tmp, e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return io_error("rename " + tmp + " to", path, e);
  }
  // Make the rename itself durable.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace kvc::gguf

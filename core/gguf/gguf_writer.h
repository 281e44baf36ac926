// GgufWriter: builds a GGUF v3 file from metadata and tensors and writes it atomically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_value.h"
#include "core/util/result.h"
#include "kernels/cpu/dtype.h"

namespace kvc::gguf {

// Receives bytes in order, in chunks of any size.
using ByteSink = std::function<Status(std::span<const uint8_t>)>;
// Produces a tensor's bytes, exactly its n_bytes in total, by calling the sink; it is called
// once per write and may fail (reading a source file, say).
using TensorProducer = std::function<Status(const ByteSink&)>;

// Nothing is checked until a write, which validates everything first and emits nothing on
// a validation error: alignment (general.alignment, a u32 power of two), array nesting depth,
// unique tensor names, shapes (1..4 dims, each >= 1), row lengths against the type's block
// size, and each tensor's byte count against its shape and type.
class GgufWriter {
 public:
  // Sets a key; setting an existing key replaces its value and keeps its position.
  void set(std::string key, Value value);
  void set_u8(std::string key, uint8_t v) { set(std::move(key), Value(v)); }
  void set_i8(std::string key, int8_t v) { set(std::move(key), Value(v)); }
  void set_u16(std::string key, uint16_t v) { set(std::move(key), Value(v)); }
  void set_i16(std::string key, int16_t v) { set(std::move(key), Value(v)); }
  void set_u32(std::string key, uint32_t v) { set(std::move(key), Value(v)); }
  void set_i32(std::string key, int32_t v) { set(std::move(key), Value(v)); }
  void set_u64(std::string key, uint64_t v) { set(std::move(key), Value(v)); }
  void set_i64(std::string key, int64_t v) { set(std::move(key), Value(v)); }
  void set_f32(std::string key, float v) { set(std::move(key), Value(v)); }
  void set_f64(std::string key, double v) { set(std::move(key), Value(v)); }
  void set_bool(std::string key, bool v) { set(std::move(key), Value(v)); }
  void set_string(std::string key, std::string v) { set(std::move(key), Value(std::move(v))); }
  void set_array(std::string key, Array v) { set(std::move(key), Value(std::move(v))); }
  void set_string_array(std::string key, std::vector<std::string> v) { set_array(std::move(key), Array(std::move(v))); }
  // Any element type of ArrayElements: std::vector<float>, std::vector<int32_t>, std::vector<Array>, ...
  template <typename T>
  void set_vector(std::string key, std::vector<T> v) {
    set_array(std::move(key), Array(std::move(v)));
  }
  // Sets general.alignment (the default, 32, needs no key).
  void set_alignment(uint32_t alignment) { set_u32("general.alignment", alignment); }
  // Removes a key if present.
  void erase(std::string_view key);

  const std::vector<MetadataEntry>& metadata() const { return metadata_; }

  // A tensor whose bytes the writer keeps (a copy or a moved-in buffer).
  void add_tensor(std::string name, std::vector<int64_t> shape, kernels::DType type, std::vector<uint8_t> bytes);
  // A tensor whose bytes the caller keeps alive, unchanged, until the last write returns.
  void add_tensor_view(std::string name, std::vector<int64_t> shape, kernels::DType type,
                       std::span<const uint8_t> bytes);
  // A tensor whose bytes are produced during the write: big models never sit in memory twice.
  void add_tensor_stream(std::string name, std::vector<int64_t> shape, kernels::DType type, TensorProducer produce);

  // Writes to `path` through a temporary file in the same folder, fsynced and renamed over
  // `path`, so a crash leaves either the old file or the complete new one.
  Status write(const std::string& path) const;
  Result<std::vector<uint8_t>> write_to_memory() const;
  // Streams the whole file to `sink` (after validation).
  Status write_to(const ByteSink& sink) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<int64_t> shape;  // (ne[0], ne[1], ...)
    kernels::DType type;
    std::optional<size_t> known_bytes;  // the size of an in-memory buffer; none for a stream
    TensorProducer produce;
  };
  struct Layout;

  Result<Layout> plan() const;

  std::vector<MetadataEntry> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace kvc::gguf

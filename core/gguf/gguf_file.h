// GgufFile: a validated, read-only view of a GGUF v2/v3 model file (metadata and tensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/gguf/byte_source.h"
#include "core/gguf/gguf_value.h"
#include "core/util/result.h"
#include "kernels/cpu/dtype.h"

namespace kvc::gguf {

inline constexpr size_t k_default_alignment = 32;
inline constexpr int k_max_array_depth = 8;  // an array nested in 8 arrays is the deepest allowed
inline constexpr uint32_t k_max_dims = 4;

struct MetadataEntry {
  std::string key;
  Value value;
};

// One tensor as the file describes it.
// Invariants (checked when the file is opened): 1 <= shape.size() <= 4, every dim >= 1,
// shape[0] (the row length, fastest-varying) is a multiple of the type's block size,
// n_bytes = n_elements / block_elems * block_bytes, offset is a multiple of the alignment,
// and [data_offset + offset, data_offset + offset + n_bytes) lies inside the file and
// overlaps no other tensor.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // (ne[0], ne[1], ...): ne[0] varies fastest
  kernels::DType type = kernels::DType::f32;
  uint64_t offset = 0;  // from the start of the data section
  size_t n_bytes = 0;

  int64_t n_elements() const;
};

// Opening validates the whole file first: every count, length and offset is bounded by
// the bytes that remain, so a truncated or hostile file gives an error, never a crash, a
// hang or an allocation beyond a small multiple of the bytes read (an empty string costs a
// 32-byte std::string for its 8 bytes on disk). Strings are kept as bytes (UTF-8 not required).
class GgufFile {
 public:
  // Maps `path` read-only. Errors name the path (io) or what is malformed (invalid_file,
  // unsupported for a well-formed file kvchat cannot use).
  static Result<GgufFile> open(const std::string& path);
  // Parses bytes the GgufFile then owns (tests, the fuzzer).
  static Result<GgufFile> from_memory(std::vector<uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  // Start of the data section, in bytes; a file without tensors may end before it.
  size_t data_offset() const { return data_offset_; }
  size_t file_bytes() const { return bytes_.size(); }

  // Metadata in file order; keys are unique.
  const std::vector<MetadataEntry>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;

  // Typed getters. A missing key or a value of another type is an invalid_file error that
  // names the key, what was expected and what was found.
  Result<std::string> get_string(std::string_view key) const;
  Result<uint64_t> get_uint(std::string_view key) const;  // any integer type, if >= 0
  Result<int64_t> get_int(std::string_view key) const;    // any integer type, if it fits
  Result<double> get_float(std::string_view key) const;   // f32 or f64
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  Result<std::vector<int32_t>> get_i32_array(std::string_view key) const;  // any integer array that fits

  // For optional keys: a missing key gives `fallback`; a present key of the wrong type is
  // still an error.
  Result<std::string> get_string_or(std::string_view key, std::string fallback) const;
  Result<uint64_t> get_uint_or(std::string_view key, uint64_t fallback) const;
  Result<int64_t> get_int_or(std::string_view key, int64_t fallback) const;
  Result<double> get_float_or(std::string_view key, double fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;

  // Tensors in file order; names are unique.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The tensor's n_bytes bytes inside the file; `t` must be one of tensors().
  const uint8_t* tensor_data(const TensorInfo& t) const;
  // The data section's bytes, [data_offset, end of file): empty when the file ends before it
  // (it may hold bytes even when there are no tensors).
  std::span<const uint8_t> data_section() const;

  // Re-checks the invariants of every TensorInfo against the file (for asserts and tests).
  bool check_invariants() const;

 private:
  friend class GgufParser;
  explicit GgufFile(ByteSource bytes) : bytes_(std::move(bytes)) {}
  static Result<GgufFile> parse(ByteSource bytes);

  ByteSource bytes_;
  uint32_t version_ = 0;
  size_t alignment_ = k_default_alignment;
  size_t data_offset_ = 0;
  std::vector<MetadataEntry> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;  // key -> index in metadata_
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_
};

}  // namespace kvc::gguf

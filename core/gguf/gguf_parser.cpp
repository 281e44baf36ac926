// Parses and validates GGUF bytes into a GgufFile; every count, size and offset is checked
// against the bytes that remain before anything is allocated or read.
//
// File layout (little-endian):
//   "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x    (string key | u32 value type | value)
//   n_tensors x (string name | u32 n_dims | n_dims x u64 dim | u32 ggml type | u64 offset)
//   padding to the alignment | data section: tensor bytes at their offsets
// A string is u64 length + bytes; an array is u32 element type + u64 count + elements.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/gguf/gguf_file.h"
#include "core/gguf/gguf_format.h"
#include "core/gguf/tensor_types.h"

namespace kvc::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr size_t k_min_kv_bytes = 8 + 4 + 1;                   // empty key, type, one-byte value
constexpr size_t k_min_tensor_info_bytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset
constexpr size_t k_min_array_bytes = 4 + 8;                    // element type + count
constexpr size_t k_max_reserve = 4096;                         // elements reserved ahead of reading them

size_t min_element_bytes(ValueType t) {
  if (t == ValueType::string) return 8;
  if (t == ValueType::array) return k_min_array_bytes;
  return fixed_value_bytes(t);
}

}  // namespace

class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t n_bytes) : data_(data), n_bytes_(n_bytes) {}

  Status run(GgufFile& f) {
    uint64_t n_tensors = 0;
    uint64_t n_kv = 0;
    if (!read_header(f, n_tensors, n_kv) || !read_metadata(f, n_kv) || !read_alignment(f) ||
        !read_tensor_infos(f, n_tensors) || !place_tensors(f)) {
      return error_;
    }
    return {};
  }

 private:
  size_t remaining() const { return n_bytes_ - pos_; }

  bool fail(ErrorCode code, const std::string& msg) {
    error_ = make_error(code, context_.empty() ? msg : context_ + ": " + msg);
    return false;
  }
  bool fail(const std::string& msg) { return fail(ErrorCode::invalid_file, msg); }
  // "tensor x has ...": a sentence about the thing in context, without a colon.
  bool fail_has(ErrorCode code, const std::string& msg) {
    error_ = make_error(code, context_ + " has " + msg);
    return false;
  }

  bool need(size_t n, const char* what) {
    if (n <= remaining()) return true;
    return fail(std::string(what) + " (" + std::to_string(n) + " bytes at offset " + hex(pos_) +
                ") lies past the end of the file (" + hex(n_bytes_) + " bytes); the file is truncated");
  }

  template <typename T>
  bool read(T& out, const char* what) {
    if (!need(sizeof(T), what)) return false;
    std::memcpy(&out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  bool read_string(std::string& out, const char* what) {
    uint64_t n = 0;
    if (!read(n, what)) return false;
    if (n > remaining()) {
      return fail(std::string(what) + " has length " + std::to_string(n) + " but only " + std::to_string(remaining()) +
                  " bytes remain in the file");
    }
    out.assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }

  bool read_bool(bool& out, const char* what) {
    uint8_t b = 0;
    if (!read(b, what)) return false;
    if (b > 1) return fail(std::string(what) + " is " + std::to_string(b) + ", but a bool must be 0 or 1");
    out = b == 1;
    return true;
  }

  bool read_value(ValueType t, Value& out) {
    switch (t) {
      case ValueType::u8: return read_scalar<uint8_t>(out);
      case ValueType::i8: return read_scalar<int8_t>(out);
      case ValueType::u16: return read_scalar<uint16_t>(out);
      case ValueType::i16: return read_scalar<int16_t>(out);
      case ValueType::u32: return read_scalar<uint32_t>(out);
      case ValueType::i32: return read_scalar<int32_t>(out);
      case ValueType::f32: return read_scalar<float>(out);
      case ValueType::u64: return read_scalar<uint64_t>(out);
      case ValueType::i64: return read_scalar<int64_t>(out);
      case ValueType::f64: return read_scalar<double>(out);
      case ValueType::boolean: {
        bool b = false;
        if (!read_bool(b, "value")) return false;
        out = Value(b);
        return true;
      }
      case ValueType::string: {
        std::string s;
        if (!read_string(s, "string value")) return false;
        out = Value(std::move(s));
        return true;
      }
      case ValueType::array: {
        Array a;
        if (!read_array(1, a)) return false;
        out = Value(std::move(a));
        return true;
      }
    }
    return fail("unknown value type");
  }

  template <typename T>
  bool read_scalar(Value& out) {
    T v{};
    if (!read(v, "value")) return false;
    out = Value(v);
    return true;
  }

  // `depth` counts the arrays enclosing this one's elements, itself included.
  bool read_array(int depth, Array& out) {
    if (depth > k_max_array_depth) {
      return fail("arrays are nested more than " + std::to_string(k_max_array_depth) + " levels deep");
    }
    uint32_t raw_type = 0;
    uint64_t n = 0;
    if (!read(raw_type, "array element type")) return false;
    if (raw_type >= k_n_value_types) {
      return fail("array has unknown element type " + std::to_string(raw_type) + " (valid types are 0..12)");
    }
    if (!read(n, "array length")) return false;
    const auto t = static_cast<ValueType>(raw_type);
    if (n > remaining() / min_element_bytes(t)) {
      return fail("array of " + std::to_string(n) + " " + to_string(t) + " elements cannot fit in the remaining " +
                  std::to_string(remaining()) + " bytes");
    }
    const auto count = static_cast<size_t>(n);
    switch (t) {
      case ValueType::u8: return read_numeric_array<uint8_t>(count, out);
      case ValueType::i8: return read_numeric_array<int8_t>(count, out);
      case ValueType::u16: return read_numeric_array<uint16_t>(count, out);
      case ValueType::i16: return read_numeric_array<int16_t>(count, out);
      case ValueType::u32: return read_numeric_array<uint32_t>(count, out);
      case ValueType::i32: return read_numeric_array<int32_t>(count, out);
      case ValueType::f32: return read_numeric_array<float>(count, out);
      case ValueType::u64: return read_numeric_array<uint64_t>(count, out);
      case ValueType::i64: return read_numeric_array<int64_t>(count, out);
      case ValueType::f64: return read_numeric_array<double>(count, out);
      case ValueType::boolean: {
        std::vector<bool> v(count);
        for (size_t i = 0; i < count; ++i) {
          bool b = false;
          if (!read_bool(b, "array element")) return at_element(i);
          v[i] = b;
        }
        out = Array(std::move(v));
        return true;
      }
      case ValueType::string: {
        std::vector<std::string> v;  // grown as read: memory follows the bytes consumed
        v.reserve(std::min(count, k_max_reserve));
        for (size_t i = 0; i < count; ++i) {
          if (!read_string(v.emplace_back(), "string")) return at_element(i);
        }
        out = Array(std::move(v));
        return true;
      }
      case ValueType::array: {
        std::vector<Array> v;  // grown as read, so nested arrays cannot each reserve the rest of the file
        v.reserve(std::min(count, k_max_reserve));
        for (size_t i = 0; i < count; ++i) {
          if (!read_array(depth + 1, v.emplace_back())) return at_element(i);
        }
        out = Array(std::move(v));
        return true;
      }
    }
    return fail("unknown array element type");
  }

  template <typename T>
  bool read_numeric_array(size_t count, Array& out) {
    std::vector<T> v(count);  // count * sizeof(T) <= remaining(), checked by the caller
    if (count > 0) std::memcpy(v.data(), data_ + pos_, count * sizeof(T));
    pos_ += count * sizeof(T);
    out = Array(std::move(v));
    return true;
  }

  bool at_element(size_t i) {
    error_.message += " (at array element " + std::to_string(i) + ")";
    return false;
  }

  bool read_header(GgufFile& f, uint64_t& n_tensors, uint64_t& n_kv) {
    context_ = "header";
    if (n_bytes_ < 4) {
      return fail("the file is " + std::to_string(n_bytes_) + " bytes long, too short to be a GGUF model");
    }
    if (std::memcmp(data_, "GGUF", 4) != 0) {
      char got[64];
      std::snprintf(got, sizeof got, "%02x %02x %02x %02x", data_[0], data_[1], data_[2], data_[3]);
      return fail(std::string("not a GGUF file: it starts with bytes ") + got +
                  ", a GGUF model starts with \"GGUF\" (47 47 55 46)");
    }
    pos_ = 4;
    uint32_t version = 0;
    if (!read(version, "version")) return false;
    if (version == 0x02000000u || version == 0x03000000u) {
      return fail(ErrorCode::unsupported, "this is a big-endian GGUF file; kvchat reads little-endian files only");
    }
    if (version == 1) {
      return fail(ErrorCode::unsupported,
                  "GGUF version 1 is obsolete and not supported (kvchat reads versions 2 and 3); "
                  "convert the model again with a current converter");
    }
    if (version != 2 && version != 3) {
      return fail(ErrorCode::unsupported,
                  "unknown GGUF version " + std::to_string(version) + " (kvchat reads versions 2 and 3)");
    }
    f.version_ = version;
    if (!read(n_tensors, "tensor count") || !read(n_kv, "metadata count")) return false;
    if (n_kv > remaining() / k_min_kv_bytes) {
      return fail("n_kv = " + std::to_string(n_kv) + " metadata pairs cannot fit in the remaining " +
                  std::to_string(remaining()) + " bytes");
    }
    if (n_tensors > remaining() / k_min_tensor_info_bytes ||
        n_kv * k_min_kv_bytes + n_tensors * k_min_tensor_info_bytes > remaining()) {
      return fail("n_tensors = " + std::to_string(n_tensors) + " tensor infos (after " + std::to_string(n_kv) +
                  " metadata pairs) cannot fit in the remaining " + std::to_string(remaining()) + " bytes");
    }
    return true;
  }

  bool read_metadata(GgufFile& f, uint64_t n_kv) {
    f.metadata_.reserve(std::min(static_cast<size_t>(n_kv), k_max_reserve));
    for (uint64_t i = 0; i < n_kv; ++i) {
      context_ = "metadata key #" + std::to_string(i);
      std::string key;
      if (!read_string(key, "key")) return false;
      context_ += " (" + printable(key) + ")";
      uint32_t raw_type = 0;
      if (!read(raw_type, "value type")) return false;
      if (raw_type >= k_n_value_types) {
        return fail("unknown value type " + std::to_string(raw_type) + " (valid types are 0..12)");
      }
      Value v;
      if (!read_value(static_cast<ValueType>(raw_type), v)) return false;
      const auto [it, inserted] = f.key_index_.emplace(key, f.metadata_.size());
      if (!inserted) return fail("duplicate key (also metadata key #" + std::to_string(it->second) + ")");
      f.metadata_.push_back({std::move(key), std::move(v)});
    }
    return true;
  }

  bool read_alignment(GgufFile& f) {
    context_ = "metadata " + std::string(k_alignment_key);
    const Value* v = f.find(k_alignment_key);
    if (v == nullptr) return true;
    const uint32_t* a = v->as<uint32_t>();
    if (a == nullptr) return fail("expected u32, found " + describe(*v));
    if (*a == 0 || !std::has_single_bit(*a)) {
      return fail("alignment " + std::to_string(*a) + " is not a power of two greater than zero");
    }
    f.alignment_ = *a;
    return true;
  }

  bool read_tensor_infos(GgufFile& f, uint64_t n_tensors) {
    f.tensors_.reserve(std::min(static_cast<size_t>(n_tensors), k_max_reserve));
    for (uint64_t i = 0; i < n_tensors; ++i) {
      context_ = "tensor info #" + std::to_string(i);
      TensorInfo t;
      if (!read_string(t.name, "name")) return false;
      context_ = "tensor " + printable(t.name);
      uint32_t n_dims = 0;
      if (!read(n_dims, "number of dimensions")) return false;
      if (n_dims < 1 || n_dims > k_max_dims) {
        return fail_has(ErrorCode::invalid_file, std::to_string(n_dims) + " dimensions; a GGUF tensor has 1 to 4");
      }
      int64_t n_elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        uint64_t dim = 0;
        if (!read(dim, "dimension")) return false;
        if (dim == 0) return fail("dimension " + std::to_string(d) + " is 0");
        constexpr auto k_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
        if (dim > k_max || static_cast<uint64_t>(n_elements) > k_max / dim) {
          return fail("the element count overflows at dimension " + std::to_string(d) + " (" + std::to_string(dim) +
                      ")");
        }
        n_elements *= static_cast<int64_t>(dim);
        t.shape.push_back(static_cast<int64_t>(dim));
      }
      uint32_t raw_type = 0;
      if (!read(raw_type, "type")) return false;
      if (!check_type(raw_type, t, n_elements)) return false;
      if (!read(t.offset, "data offset")) return false;
      if (t.offset % f.alignment_ != 0) {
        return fail("data offset " + hex(t.offset) + " is not a multiple of the alignment " +
                    std::to_string(f.alignment_));
      }
      const auto [it, inserted] = f.tensor_index_.emplace(t.name, f.tensors_.size());
      if (!inserted) return fail("duplicate tensor name (also tensor info #" + std::to_string(it->second) + ")");
      f.tensors_.push_back(std::move(t));
    }
    return true;
  }

  bool check_type(uint32_t raw, TensorInfo& t, int64_t n_elements) {
    const auto type = supported_tensor_type(raw);
    if (!type) {
      if (const char* name = ggml_type_name(raw)) {
        return fail_has(ErrorCode::unsupported,
                        "type " + std::string(name) + " (" + std::to_string(raw) +
                            "), which kvchat does not support yet; supported: " + supported_tensor_type_list());
      }
      return fail_has(ErrorCode::invalid_file, "unknown type id " + std::to_string(raw));
    }
    t.type = *type;
    const kernels::DTypeInfo& info = kernels::dtype_info(*type);
    if (t.shape[0] % info.block_elems != 0) {
      return fail("row length " + std::to_string(t.shape[0]) + " is not a multiple of " + info.name + "'s block of " +
                  std::to_string(info.block_elems) + " elements");
    }
    const auto n_blocks = static_cast<uint64_t>(n_elements / info.block_elems);
    if (n_blocks > std::numeric_limits<size_t>::max() / info.block_bytes) {
      return fail("byte size of " + std::to_string(n_elements) + " elements overflows");
    }
    t.n_bytes = static_cast<size_t>(n_blocks) * info.block_bytes;
    return true;
  }

  bool place_tensors(GgufFile& f) {
    context_ = "tensor data";
    const size_t pad = (f.alignment_ - pos_ % f.alignment_) % f.alignment_;
    f.data_offset_ = pos_ + pad;
    if (f.tensors_.empty()) return true;  // a file without tensors may omit the final padding
    if (pad > remaining()) {
      return fail("the data section would start at " + hex(f.data_offset_) + ", past the end of the file (" +
                  hex(n_bytes_) + " bytes)");
    }
    const size_t avail = n_bytes_ - f.data_offset_;
    for (const TensorInfo& t : f.tensors_) {
      if (t.offset > avail || t.n_bytes > avail - t.offset) {
        context_ = "tensor " + printable(t.name);
        return fail("data " + range(f.data_offset_, t.offset, t.n_bytes) + " lies past the end of the file (" +
                    hex(n_bytes_) + " bytes)");
      }
    }
    std::vector<size_t> order(f.tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = f.tensors_[order[k - 1]];
      const TensorInfo& cur = f.tensors_[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset) {  // both lie inside the file: no overflow
        context_ = "tensor " + printable(cur.name);
        return fail("data " + range(f.data_offset_, cur.offset, cur.n_bytes) + " overlaps tensor " +
                    printable(prev.name) + " " + range(f.data_offset_, prev.offset, prev.n_bytes));
      }
    }
    return true;
  }

  // "[0x1000, 0x2000)" in file offsets, saturating where a hostile offset would wrap.
  static std::string range(size_t data_offset, uint64_t offset, uint64_t n_bytes) {
    const uint64_t begin = sat_add(data_offset, offset);
    return "[" + hex(begin) + ", " + hex(sat_add(begin, n_bytes)) + ")";
  }
  static uint64_t sat_add(uint64_t a, uint64_t b) {
    return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max() : a + b;
  }

  const uint8_t* data_;
  size_t n_bytes_;
  size_t pos_ = 0;
  std::string context_;  // what is being read: "metadata key #5 (tokenizer.ggml.tokens)"
  Error error_;
};

Result<GgufFile> GgufFile::parse(ByteSource bytes) {
  GgufFile f(std::move(bytes));
  GgufParser parser(f.bytes_.data(), f.bytes_.size());
  if (Status s = parser.run(f); !s.ok()) return s.error();
  return f;
}

}  // namespace kvc::gguf

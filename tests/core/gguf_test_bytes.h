// Hand-encoding of GGUF bytes for tests, written from the format description, independent
// of kvc::gguf's writer, so that reader and writer are each checked against the spec.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace kvc::test {

class GgufBytes {
 public:
  GgufBytes& raw(std::string_view s) {
    for (char c : s) b_.push_back(static_cast<uint8_t>(c));  // not insert(): GCC 12 warns falsely
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return put(v); }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& i32(int32_t v) { return put(v); }
  GgufBytes& f32(float v) { return put(v); }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    return raw(s);
  }
  // "GGUF", version, n_tensors, n_kv.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key with a value type; the value follows.
  GgufBytes& key(std::string_view k, uint32_t type) { return str(k).u32(type); }
  // A tensor info: name, dims, type, offset.
  GgufBytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad_to(size_t alignment) {
    while (b_.size() % alignment != 0) b_.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    b_.insert(b_.end(), n, 0);
    return *this;
  }

  size_t size() const { return b_.size(); }
  const std::vector<uint8_t>& bytes() const { return b_; }

 private:
  template <typename T>
  GgufBytes& put(T v) {
    uint8_t p[sizeof(T)];
    std::memcpy(p, &v, sizeof(T));  // the test host is little-endian, like the format
    for (uint8_t c : p) b_.push_back(c);
    return *this;
  }

  std::vector<uint8_t> b_;
};

}  // namespace kvc::test

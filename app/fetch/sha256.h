// SHA-256 (FIPS 180-4), incremental: what a download's bytes hash to, checked against the
// hash the server publishes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvc::fetch {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n_bytes);
  // Lowercase hex of the digest; the object is spent afterwards (reset() to reuse).
  std::string hex_digest();
  void reset();

 private:
  void compress(const uint8_t* block);  // one 64-byte block into state_
  std::array<uint32_t, 8> state_{};
  std::array<uint8_t, 64> buffer_{};
  size_t n_buffered_ = 0;
  uint64_t n_total_bytes_ = 0;
};

std::string sha256_hex(std::string_view bytes);

// True for 64 hex digits (either case).
bool is_sha256_hex(std::string_view s);

}  // namespace kvc::fetch

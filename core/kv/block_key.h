// BlockKey: the 128-bit identity of a KV block, chained from the model fingerprint.
//
//   key(block 0) = H(fingerprint, tokens[0, B))
//   key(block i) = H(key(block i-1), tokens[iB, (i+1)B))
//
// Same key => same tokens at the same positions after the same prefix, on the same model,
// KV format and block size: the same KV content, on any tier, across restarts.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>

namespace kvc::kv {

struct BlockKey {
  uint64_t hi = 0;
  uint64_t lo = 0;

  friend bool operator==(const BlockKey&, const BlockKey&) = default;
  friend auto operator<=>(const BlockKey&, const BlockKey&) = default;
  bool is_null() const { return hi == 0 && lo == 0; }
  std::string hex() const;  // 32 lowercase hex digits, hi first
  // Parses hex(); a null key for anything malformed.
  static BlockKey from_hex(std::string_view s);
};

// XXH3-128 of the parent key's 16 bytes followed by the tokens (int32, little-endian).
BlockKey chain_key(const BlockKey& parent, std::span<const int32_t> tokens);

// XXH3-128 of arbitrary bytes (fingerprints, checksums).
BlockKey hash_bytes(std::span<const uint8_t> bytes, const BlockKey& seed = {});

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const noexcept {
    return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull));
  }
};

}  // namespace kvc::kv

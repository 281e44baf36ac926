// BlockKey hashing through xxHash's XXH3-128.
#include "core/kv/block_key.h"

#include <xxhash.h>

#include <vector>

namespace kvc::kv {

namespace {
BlockKey from_xxh(XXH128_hash_t h) { return BlockKey{h.high64, h.low64}; }
}  // namespace

std::string BlockKey::hex() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[static_cast<size_t>(15 - i)] = digits[(hi >> (4 * i)) & 0xf];
    s[static_cast<size_t>(31 - i)] = digits[(lo >> (4 * i)) & 0xf];
  }
  return s;
}

BlockKey BlockKey::from_hex(std::string_view s) {
  if (s.size() != 32) return {};
  BlockKey k;
  for (size_t i = 0; i < 32; ++i) {
    const char c = s[i];
    uint64_t d;
    if (c >= '0' && c <= '9')
      d = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<uint64_t>(c - 'a' + 10);
    else
      return {};
    uint64_t& half = i < 16 ? k.hi : k.lo;
    half = (half << 4) | d;
  }
  return k;
}

BlockKey chain_key(const BlockKey& parent, std::span<const int32_t> tokens) {
  // [parent.hi, parent.lo as little-endian u64][tokens as little-endian int32], hashed in one go.
  // Blocks are small (B <= 64 tokens): hash from the stack, falling back to the heap.
  uint8_t stack[16 + 4 * 64];
  std::vector<uint8_t> heap;
  const size_t n_bytes = 16 + 4 * tokens.size();
  uint8_t* buf = stack;
  if (n_bytes > sizeof stack) {
    heap.resize(n_bytes);
    buf = heap.data();
  }
  for (int i = 0; i < 8; ++i) {
    buf[i] = static_cast<uint8_t>(parent.hi >> (8 * i));
    buf[8 + i] = static_cast<uint8_t>(parent.lo >> (8 * i));
  }
  size_t n = 16;
  for (int32_t t : tokens) {
    const auto u = static_cast<uint32_t>(t);
    for (int i = 0; i < 4; ++i) buf[n++] = static_cast<uint8_t>(u >> (8 * i));
  }
  return from_xxh(XXH3_128bits(buf, n_bytes));
}

BlockKey hash_bytes(std::span<const uint8_t> bytes, const BlockKey& seed) {
  return from_xxh(XXH3_128bits_withSeed(bytes.data(), bytes.size(), seed.lo ^ seed.hi));
}

}  // namespace kvc::kv

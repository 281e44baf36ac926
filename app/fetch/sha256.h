// SHA-256, incremental (OpenSSL's EVP digest): what a download's bytes hash to, checked against
// the hash the server publishes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace kvc::fetch {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(const void* data, size_t n_bytes);
  // Lowercase hex of the digest; the object is spent afterwards (reset() to reuse).
  std::string hex_digest();
  void reset();

 private:
  evp_md_ctx_st* ctx_ = nullptr;
};

std::string sha256_hex(std::string_view bytes);

// True for 64 hex digits (either case).
bool is_sha256_hex(std::string_view s);

}  // namespace kvc::fetch

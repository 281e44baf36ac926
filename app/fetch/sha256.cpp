// SHA-256 through OpenSSL's EVP interface (libcrypto picks the CPU's SHA extensions).
#include "app/fetch/sha256.h"

#include <openssl/evp.h>

#include "core/util/assert.h"

namespace kvc::fetch {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  KVC_ASSERT(ctx_ != nullptr);
  reset();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

// libcrypto fails these only on allocation failure or a digest it does not have: bugs here.
void Sha256::reset() {
  const int ok = EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr);
  KVC_ASSERT(ok == 1);
}

void Sha256::update(const void* data, size_t n_bytes) {
  const int ok = EVP_DigestUpdate(ctx_, data, n_bytes);
  KVC_ASSERT(ok == 1);
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  const int ok = EVP_DigestFinal_ex(ctx_, digest, &n);
  KVC_ASSERT(ok == 1 && n == 32);
  static const char* const k_hex = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (unsigned int i = 0; i < n; ++i) {
    out += k_hex[digest[i] >> 4];
    out += k_hex[digest[i] & 0xf];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex_digest();
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return false;
  }
  return true;
}

}  // namespace kvc::fetch

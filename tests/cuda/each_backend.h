// Runs one test body on every backend this machine has, and says visibly when CUDA is skipped.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "core/backend/backend.h"

namespace kvc::test {

// Calls body(backend) for "cpu" and, when a CUDA device is usable, "cuda" (in a SECTION each).
// Without one it WARNs "skipped: no CUDA device (<why>)", so the skip shows in every run.
template <typename Body>
void for_each_backend(Body&& body) {
  for (const char* kind : {"cpu", "cuda"}) {
    auto be = backend::create_backend(kind, 2);
    if (!be.ok()) {
      REQUIRE(std::string(kind) == "cuda");
      WARN("skipped: no CUDA device (" << be.error().message << ")");
      continue;
    }
    SECTION(kind) { body(**be); }
  }
}

// A backend buffer holding a copy of host data, freed with the buffer.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer(backend::Backend& be, size_t n) : be_(be), n_(n) {
    p_ = static_cast<T*>(be.alloc(n * sizeof(T)));
    REQUIRE(p_ != nullptr);
  }
  DeviceBuffer(backend::Backend& be, const std::vector<T>& host) : DeviceBuffer(be, host.size()) {
    be.copy_from_host(host.data(), p_, n_ * sizeof(T));
  }
  ~DeviceBuffer() { be_.free(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return p_; }
  std::vector<T> to_host() const {
    std::vector<T> out(n_);
    be_.copy_to_host(p_, out.data(), n_ * sizeof(T));
    return out;
  }

 private:
  backend::Backend& be_;
  size_t n_;
  T* p_ = nullptr;
};

}  // namespace kvc::test

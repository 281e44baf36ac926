// Runs one test body on every backend: a test case for each, the CUDA one skipped without a GPU.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "core/backend/backend.h"
#include "support/test_support.h"

namespace kvc::test {

// Why no CUDA backend can be made here ("" when one can).
inline std::string cuda_unavailable() {
  auto be = backend::create_backend("cuda", 0);
  return be.ok() ? std::string() : be.error().message;
}

// Runs body(backend) on a fresh backend of `kind`; skips the test case (KVC_SKIP) when this
// machine cannot make one, which only CUDA may.
template <typename Body>
void run_on_backend(const char* kind, Body&& body) {
  auto be = backend::create_backend(kind, 2);
  if (!be.ok()) {
    REQUIRE(std::string(kind) == "cuda");
    KVC_SKIP(be.error().message);
  }
  body(**be);
}

}  // namespace kvc::test

// One test body, registered as two test cases, "NAME (cpu)" and "NAME (cuda)", so the CPU half
// passes everywhere and the CUDA half shows as skipped where there is no GPU. The body that
// follows the macro sees the backend as `be`.
#define KVC_BACKEND_TEST_CASE(name, tags) \
  KVC_BACKEND_TEST_CASE_IMPL(name, tags, KVC_TEST_CAT(kvc_backend_body_, __LINE__))
#define KVC_TEST_CAT(a, b) KVC_TEST_CAT_(a, b)
#define KVC_TEST_CAT_(a, b) a##b
#define KVC_BACKEND_TEST_CASE_IMPL(name, tags, body)                           \
  static void body(kvc::backend::Backend& be);                                 \
  TEST_CASE(name " (cpu)", tags) { kvc::test::run_on_backend("cpu", body); }   \
  TEST_CASE(name " (cuda)", tags) { kvc::test::run_on_backend("cuda", body); } \
  static void body([[maybe_unused]] kvc::backend::Backend& be)

namespace kvc::test {

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

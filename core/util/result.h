// kvc::Result<T>: a value or an Error carrying a code and a message a user can act on.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace kvc {

enum class ErrorCode {
  io,                // a file could not be opened, read, written or mapped
  invalid_file,      // a file's contents are malformed (bad GGUF, bad tokenizer data)
  unsupported,       // well-formed, but a feature kvchat does not implement yet
  invalid_argument,  // bad user input (a flag, a prompt, a setting)
  out_of_memory,     // an allocation the user asked for cannot be satisfied
  internal,          // a failure in a library we call, reported with its own words
};

const char* to_string(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;

  // "invalid file: tensor blk.3.attn_q.weight: offset 0x... lies past the end of the file"
  std::string what() const { return std::string(to_string(code)) + ": " + message; }
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace kvc

// Propagates an error from an expression returning Result<...>.
#define KVC_TRY(expr)                                \
  do {                                               \
    auto&& kvc_try_r_ = (expr);                      \
    if (!kvc_try_r_.ok()) return kvc_try_r_.error(); \
  } while (0)

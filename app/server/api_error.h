// ApiError: an HTTP status with an OpenAI-style error object, the answer to every refused request.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kvc::server {

//   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault, "" for none (null in JSON)
  std::string code;   // a machine-readable code ("model_not_found"), "" for none

  nlohmann::json to_json() const;
};

// Text from a request shown in an error message: at most `max_bytes` of it (cut at a UTF-8
// boundary, "..." added), so an error never echoes a huge field back.
std::string ellipsize(std::string_view text, size_t max_bytes = 120);

inline ApiError bad_request(std::string message, std::string param = "") {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

// The parse of a request: the request, or the error to answer with.
template <typename T>
struct Parsed {
  T value{};
  bool ok = false;
  ApiError error;

  static Parsed success(T v) { return Parsed{std::move(v), true, {}}; }
  static Parsed failure(ApiError e) { return Parsed{T{}, false, std::move(e)}; }
};

}  // namespace kvc::server

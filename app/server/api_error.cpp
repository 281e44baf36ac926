// ApiError as the JSON body OpenAI clients expect.
#include "app/server/api_error.h"

#include "core/util/utf8.h"

namespace kvc::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return nlohmann::json{{"error", e}};
}

std::string ellipsize(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return std::string(utf8_prefix(text, max_bytes)) + "...";
}

}  // namespace kvc::server

// response_format of a chat request: text, json_object or json_schema, the last two compiled to
// the grammar that constrains sampling.
#pragma once

#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/server/api_error.h"
#include "core/sampling/grammar.h"

namespace kvc::server {

// Reads body.response_format: absent or {"type":"text"}: grammar stays null; {"type":"json_object"}:
// any JSON object; {"type":"json_schema","json_schema":{"name","schema","strict"}}: the schema's
// grammar. A 400 naming response_format for anything else, or a schema kvchat cannot enforce.
std::optional<ApiError> read_response_format(const nlohmann::json& body,
                                             std::shared_ptr<const sampling::Grammar>& grammar);

}  // namespace kvc::server

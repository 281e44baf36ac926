// response_format: the OpenAI shapes checked, the schema compiled by sampling::json_schema_grammar.
#include "app/server/response_format.h"

#include <string>

#include "core/sampling/json_schema_grammar.h"

namespace kvc::server {

namespace {

// The member, or null when `o` is not an object or lacks it (JSON null counts as absent).
const nlohmann::json* member(const nlohmann::json& o, const char* name) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(name);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

std::optional<ApiError> read_response_format(const nlohmann::json& body,
                                             std::shared_ptr<const sampling::Grammar>& grammar) {
  grammar.reset();
  const nlohmann::json* format = member(body, "response_format");
  if (!format) return std::nullopt;
  const char* param = "response_format";
  const nlohmann::json* type = member(*format, "type");
  if (!type || !type->is_string())
    return bad_request("response_format must be an object with a string \"type\"", param);
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") {
    grammar = sampling::json_object_grammar();
    return std::nullopt;
  }
  if (t != "json_schema") {
    return bad_request("response_format.type must be \"text\", \"json_object\" or \"json_schema\", not \"" + t + "\"",
                       param);
  }
  const nlohmann::json* spec = member(*format, "json_schema");
  if (!spec || !spec->is_object()) {
    return bad_request("response_format.json_schema must be an object with name and schema", param);
  }
  const nlohmann::json* schema = member(*spec, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean())) {
    return bad_request("response_format.json_schema.schema must be a JSON Schema object", param);
  }
  auto g = sampling::json_schema_grammar(schema->dump());
  if (!g.ok()) return bad_request("response_format.json_schema: " + g.error().message, param);
  grammar = *g;
  return std::nullopt;
}

}  // namespace kvc::server

// A small JSON Schema validator for the subset the grammar compiler supports, written
// independently of it, so tests can check generated JSON against its schema.
#pragma once

#include <nlohmann/json.hpp>

#include <regex>
#include <string>

namespace kvc::test {

// Empty when `v` validates against `schema` (whose $refs resolve against `root`), else why not.
inline std::string schema_violation(const nlohmann::json& v, const nlohmann::json& schema, const nlohmann::json& root) {
  using json = nlohmann::json;
  if (schema.is_boolean()) return schema.get<bool>() ? "" : "schema false";
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    return schema_violation(v, root.at(json::json_pointer(ref.substr(1))), root);
  }
  if (schema.contains("const") && v != schema["const"]) return "not the const " + schema["const"].dump();
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found = found || e == v;
    if (!found) return v.dump() + " not in enum";
  }
  if (schema.contains("anyOf")) {
    for (const json& s : schema["anyOf"]) {
      if (schema_violation(v, s, root).empty()) return "";
    }
    return v.dump() + " matches no anyOf branch";
  }
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    bool ok = false;
    for (const json& t : types) {
      const std::string n = t;
      ok = ok || (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
           (n == "string" && v.is_string()) || (n == "number" && v.is_number()) ||
           (n == "integer" && (v.is_number_integer())) || (n == "boolean" && v.is_boolean()) ||
           (n == "null" && v.is_null());
    }
    if (!ok) return v.dump() + " is not of type " + schema["type"].dump();
  }
  if (v.is_number() && schema.contains("minimum") && v.get<double>() < schema["minimum"].get<double>()) {
    return v.dump() + " below minimum";
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& r : schema.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return "missing required " + r.dump();
    }
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (auto e = schema_violation(x, props[k], root); !e.empty()) return k + ": " + e;
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>()) return "unexpected property " + k;
        if (auto e = schema_violation(x, extra, root); !e.empty()) return k + ": " + e;
      }
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) return "too few items";
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) return "too many items";
    if (schema.contains("items")) {
      for (const json& x : v) {
        if (auto e = schema_violation(x, schema["items"], root); !e.empty()) return "item: " + e;
      }
    }
  }
  if (v.is_string()) {
    const std::string s = v;
    size_t n_chars = 0;  // code points
    for (const char c : s) n_chars += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
    if (schema.contains("minLength") && n_chars < schema["minLength"].get<size_t>()) return "too short";
    if (schema.contains("maxLength") && n_chars > schema["maxLength"].get<size_t>()) return "too long";
    if (schema.contains("pattern") && !std::regex_search(s, std::regex(schema["pattern"].get<std::string>()))) {
      return json(s).dump() + " does not match the pattern";
    }
  }
  return "";
}

inline std::string schema_violation(const nlohmann::json& v, const nlohmann::json& schema) {
  return schema_violation(v, schema, schema);
}

}  // namespace kvc::test

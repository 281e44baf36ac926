// Each format's forced-call shape built from the request's tools: literal prefix, JSON Schema, literal suffix.
#include "core/chat/tool_constraint.h"

#include <nlohmann/json.hpp>

namespace kvc::chat {
namespace {

using nlohmann::json;

// The call object a format writes around the arguments: {"name": F, KEY: PARAMS}, closed.
json call_schema(const std::string& name, const json& params, const char* key) {
  return json{{"type", "object"},
              {"properties", {{"name", {{"const", name}}}, {key, params}}},
              {"required", json::array({"name", key})},
              {"additionalProperties", false}};
}

std::string text(const json& j) { return j.dump(); }

}  // namespace

Result<ToolConstraints> tool_constraints(ToolFormat format, std::string_view tools_json,
                                         const std::optional<std::string>& only, bool parallel) {
  json tools = json::parse(tools_json.begin(), tools_json.end(), nullptr, false);
  if (tools.is_discarded() || !tools.is_array()) {
    return make_error(ErrorCode::invalid_argument, "tools must be a JSON array of function tools");
  }
  struct Tool {
    std::string name;
    json params;
  };
  std::vector<Tool> chosen;
  for (const json& t : tools) {
    const json* f = t.is_object() && t.contains("function") ? &t["function"] : nullptr;
    if (!f || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string()) {
      return make_error(ErrorCode::invalid_argument,
                        "each tool must be {\"type\": \"function\", \"function\": {\"name\"}}");
    }
    const std::string name = (*f)["name"];
    if (only && name != *only) continue;
    json params =
        f->contains("parameters") && (*f)["parameters"].is_object() ? (*f)["parameters"] : json{{"type", "object"}};
    chosen.push_back({name, std::move(params)});
  }
  if (chosen.empty()) {
    return make_error(ErrorCode::invalid_argument,
                      only ? "tool_choice names \"" + *only + "\", which is not among the tools" : "tools is empty");
  }
  ToolConstraints out;
  out.repeat = parallel && !only;
  switch (format) {
    case ToolFormat::hermes:
      for (const Tool& t : chosen) {
        out.alternatives.push_back(
            {"<tool_call>\n", text(call_schema(t.name, t.params, "arguments")), "\n</tool_call>"});
      }
      out.separator = "\n";
      break;
    case ToolFormat::llama3:
      for (const Tool& t : chosen)
        out.alternatives.push_back({"", text(call_schema(t.name, t.params, "parameters")), ""});
      out.separator = "; ";
      break;
    case ToolFormat::mistral: {
      json any = json::array();
      for (const Tool& t : chosen) any.push_back(call_schema(t.name, t.params, "arguments"));
      json items = any.size() == 1 ? any[0] : json{{"anyOf", any}};
      json array{{"type", "array"}, {"items", items}, {"minItems", 1}};
      if (!out.repeat) array["maxItems"] = 1;
      out.alternatives.push_back({"[TOOL_CALLS]", text(array), ""});
      out.repeat = false;  // the array holds them all
      break;
    }
    case ToolFormat::harmony:
      for (const Tool& t : chosen) {
        out.alternatives.push_back({"<|channel|>commentary to=functions." + t.name + " <|constrain|>json<|message|>",
                                    text(t.params), "<|call|>"});
      }
      out.separator = "<|start|>assistant";
      break;
    case ToolFormat::deepseek:
      for (const Tool& t : chosen) {
        out.alternatives.push_back(
            {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>" + t.name + "\n```json\n",
             text(t.params), "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"});
      }
      out.separator = "";
      break;
    case ToolFormat::gemma:
      for (const Tool& t : chosen) {
        out.alternatives.push_back({"```json\n", text(call_schema(t.name, t.params, "parameters")), "\n```"});
      }
      out.separator = "\n";
      break;
    case ToolFormat::none:
      return make_error(ErrorCode::invalid_argument,
                        "this model's chat template writes no tool calls kvchat can read, so a call cannot be forced");
  }
  return out;
}

}  // namespace kvc::chat

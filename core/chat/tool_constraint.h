// What a forced tool call (tool_choice "required" or a named function) must look like in each format: a literal
// prefix, a JSON Schema for the JSON the model writes, a literal suffix, for grammar-constrained sampling.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/tool_calls.h"
#include "core/util/result.h"

namespace kvc::chat {

// One way the constrained output may go: prefix, then JSON matching `schema_json`, then suffix,
// all three as the model's text (its special tokens written out, "<tool_call>"). The output is
// one of the alternatives; with `repeat` (parallel_tool_calls), that alternative list may follow
// itself again after `separator`, as many times as the model likes.
//
//   hermes    "<tool_call>\n" {"name": {"const": F}, "arguments": PARAMS} "\n</tool_call>"   (one per tool)
//   llama3    "" {"name": {"const": F}, "parameters": PARAMS} ""                           (separator "; ")
//   mistral   "[TOOL_CALLS]" [{"name": {"const": F}, "arguments": PARAMS}, ...] ""        (one array: anyOf items)
//   harmony   "<|channel|>commentary to=functions.F <|constrain|>json<|message|>" PARAMS "<|call|>"
//   deepseek  "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>F\n```json\n" PARAMS
//   "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>" gemma     "```json\n" {"name": {"const": F}, "parameters": PARAMS}
//   "\n```"
//
// Each output parses back with parse_reply (tool_calls.h) into the call(s).
struct ToolConstraint {
  std::string prefix;
  std::string schema_json;  // a JSON Schema (the tool's "parameters", or a call object around them)
  std::string suffix;
};

struct ToolConstraints {
  std::vector<ToolConstraint> alternatives;  // one per tool that may be called (one for mistral)
  bool repeat = false;                       // parallel calls: the output may hold further calls
  std::string separator;                     // between repeated calls
};

// tools_json: the request's tools (a JSON array of {"type": "function", "function": {...}});
// only: the named function of tool_choice, else any of them (tool_choice "required").
// invalid_argument when the tools are not such an array, `only` is not among them, or the
// format has no calls.
Result<ToolConstraints> tool_constraints(ToolFormat format, std::string_view tools_json,
                                         const std::optional<std::string>& only, bool parallel);

}  // namespace kvc::chat

// response_format of a chat request: text, json_object or json_schema, the last two compiled to
// the grammar that constrains sampling.
#pragma once

#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "app/server/api_error.h"
#include "core/chat/tool_constraint.h"
#include "core/sampling/grammar.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/result.h"

namespace kvc::server {

// Reads body.response_format: absent or {"type":"text"}: grammar stays null; {"type":"json_object"}:
// any JSON object; {"type":"json_schema","json_schema":{"name","schema","strict"}}: the schema's
// grammar. A 400 naming response_format for anything else, or a schema kvchat cannot enforce.
std::optional<ApiError> read_response_format(const nlohmann::json& body,
                                             std::shared_ptr<const sampling::Grammar>& grammar);

// The grammar of a forced tool call (tool_choice "required" or a named function): the format's
// prefix, the call's JSON, its suffix, as tool_constraints() gives them. The control tokens the
// prefix and suffix spell ("<|channel|>", "[TOOL_CALLS]") must be those tokens, not their text;
// the vocabulary's user-defined pieces (Qwen's "<tool_call>") are text and match either way.
Result<std::shared_ptr<const sampling::Grammar>> tool_call_grammar(const chat::ToolConstraints& constraints,
                                                                   const tokenizer::Tokenizer& tok);

}  // namespace kvc::server

// Request bodies of Anthropic's POST /v1/messages and /v1/messages/count_tokens, read into the
// ChatRequest that /v1/chat/completions answers (one mapping layer, one engine path); every bad
// field answered with a 400 that names it as Anthropic spells it.
#pragma once

#include <string>
#include <string_view>

#include "app/server/request_parsing.h"

namespace kvc::server {

struct MessagesRequest {
  // system -> a system message; content blocks -> text (joined by newlines); an assistant's
  // tool_use blocks -> tool_calls (input as JSON text), its thinking blocks -> reasoning_content; a
  // user's tool_result blocks -> tool messages (before the user's text, as Anthropic orders them).
  // tools -> tools_json as OpenAI's function tools; tool_choice auto / any / tool / none ->
  // automatic / required / named / none; stop_sequences -> params.stop.
  ChatRequest chat;
  bool thinking = false;      // thinking {type: enabled}
  int64_t budget_tokens = 0;  // its budget (>= 1024, below max_tokens, as Anthropic requires)
};

// count_tokens: max_tokens is not required there, and sampling fields are not read.
enum class MessagesBody { create, count_tokens };

// uses_reasoning_effort: the model's template reads reasoning_effort (gpt-oss): thinking's budget
// picks it (under 4096 tokens low, under 16384 medium, else high).
Parsed<MessagesRequest> parse_messages_request(std::string_view body, const RequestLimits& limits, MessagesBody kind,
                                               bool uses_reasoning_effort);

}  // namespace kvc::server

// The OpenAI response objects kvchat serve writes: completions, streamed chunks, usage, models.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/tool_calls.h"
#include "core/engine/engine.h"

namespace kvc::server {

// Who and when, shared by every object of one response.
struct ResponseIds {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// What a chat request's history mapped to: its engine conversation, and how many of its earlier
// answers were found again as the engine's own ids (ConversationMapper).
struct HistoryInfo {
  int64_t conversation = 0;
  int64_t n_answers = 0;
  int64_t n_answers_mapped = 0;
  int64_t n_outside_context = 0;  // earlier messages the context overflow policy left out
};

// "stop" (end of generation, a stop string) or "length" (max_tokens, the context).
const char* finish_reason(model::StopReason r);

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details": {"cached_tokens"}}
nlohmann::json usage_json(const engine::RequestResult& r, int64_t n_prompt);
// kvchat's own figures, beside usage: {"cached_tokens_by_tier": {"t0", "t1", "t2"}, "ttft_ms",
// "conversation" (16 hex digits, "" for none), "history_answers", "history_answers_mapped",
// "messages_outside_context" (the oldest messages left out of a history longer than the context;
// 0 when it fits) and "context_note" (what that means in words, "" for none)}
nlohmann::json kvchat_json(const engine::RequestResult& r, const HistoryInfo& h);

nlohmann::json chat_completion(const ResponseIds& ids, const engine::RequestResult& r, int64_t n_prompt,
                               const HistoryInfo& h);
// A chat.completion.chunk with one choice: `delta` and a finish reason ("" for null).
nlohmann::json chat_chunk(const ResponseIds& ids, nlohmann::json delta, std::string_view finish);
// The last chunk when stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk(const ResponseIds& ids, const char* object, const engine::RequestResult& r, int64_t n_prompt,
                           const HistoryInfo& h);

// An assistant message's tool_calls[i]: {"id", "type": "function", "function": {"name", "arguments"}}.
nlohmann::json tool_call_json(const chat::ToolCall& c);
// A whole reply read for tool calls into choices[0].message (content null when only calls, reasoning_content
// when there is some, tool_calls) and its finish_reason ("tool_calls" when it made calls).
void set_tool_reply(nlohmann::json& body, const chat::ParsedReply& reply);
// The two deltas OpenAI streams a call as: {"tool_calls": [{index, id, type, function: {name, arguments: ""}}]},
// then {"tool_calls": [{index, function: {arguments}}]}.
std::vector<nlohmann::json> tool_call_deltas(size_t index, const chat::ToolCall& c);
// The server-sent events a piece of a streamed reply read for tool calls adds: its reasoning_content, its content,
// then each call that completed with it (tool_call_deltas).
std::string tool_stream_events(const ResponseIds& ids, const chat::ToolCallStream::Delta& d);

nlohmann::json text_completion(const ResponseIds& ids, const engine::RequestResult& r, int64_t n_prompt);
nlohmann::json text_completion_chunk(const ResponseIds& ids, std::string_view text, std::string_view finish);

nlohmann::json model_object(const std::string& id, int64_t created);

// JSON text; invalid UTF-8 (never expected from the decoder) becomes U+FFFD instead of throwing.
std::string dump(const nlohmann::json& j);
// One server-sent event: "data: <json>\n\n".
std::string sse_event(const nlohmann::json& j);
constexpr std::string_view k_sse_done = "data: [DONE]\n\n";

// A fresh response id: prefix + 24 hex digits.
std::string new_response_id(std::string_view prefix);
int64_t unix_now();

}  // namespace kvc::server

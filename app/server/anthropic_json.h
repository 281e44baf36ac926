// Anthropic Messages responses kvchat serve writes: the message with its content blocks, its
// streamed events, usage (cache_read_input_tokens from kvchat's cache) and the error object.
//
//   stream:  event: message_start  event: ping
//            (content_block_start, content_block_delta..., content_block_stop) per block:
//              thinking (thinking_delta), text (text_delta), tool_use (input_json_delta)
//            event: message_delta {stop_reason, stop_sequence, usage}  event: message_stop
//   failed or shutting down mid-stream:  event: error {"type": "error", "error": {...}}
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/server/api_error.h"
#include "app/server/openai_json.h"
#include "core/chat/tool_calls.h"
#include "core/engine/engine.h"

namespace kvc::server {

// How a reply is read into blocks, and what its message says of itself.
struct AnthropicReply {
  ResponseIds ids;  // id "msg_...", model
  int64_t n_prompt = 0;
  HistoryInfo history;
  bool tools = false;  // the reply is read for tool calls in tool_format
  chat::ToolFormat tool_format = chat::ToolFormat::none;
  std::vector<std::string> stop_sequences;  // the request's (stop_reason "stop_sequence" names the one met)
  // The prompt ends with "<think>" (DeepSeek-R1's generation prompt opens it): the reply starts inside
  // its reasoning, and is read as if it began with the tag.
  bool opened_thinking = false;
};

// A reply's text seen as Anthropic's blocks: reasoning (harmony's analysis channel, a <think>
// block), the answer, the calls. `finished` false: only what cannot change any more (prefixes).
struct ReplyBlocks {
  std::string thinking;
  std::string text;
  std::vector<chat::ToolCall> calls;  // ids "toolu_..."
};
ReplyBlocks reply_blocks(const AnthropicReply& a, std::string_view text, bool finished);

// {"input_tokens" (the prompt less what the cache served), "cache_creation_input_tokens": 0,
//  "cache_read_input_tokens", "output_tokens"}: their sum with output is Anthropic's total.
nlohmann::json anthropic_usage(const engine::RequestResult& r, int64_t n_prompt);

// stop_reason and stop_sequence (null unless a request's stop sequence ended it). `generated`: the
// reply's whole text with what the engine cut (the stop string), to tell which sequence it was.
std::pair<std::string, nlohmann::json> anthropic_stop(const AnthropicReply& a, const engine::RequestResult& r,
                                                      std::string_view generated, bool called);

// The whole message: {id, type: "message", role, model, content, stop_reason, stop_sequence, usage, kvchat}.
nlohmann::json anthropic_message(const AnthropicReply& a, const engine::RequestResult& r, std::string_view generated);

// {"type": "error", "error": {"type": "invalid_request_error" (by status), "message"}}
nlohmann::json anthropic_error(const ApiError& e);
// One named server-sent event: "event: <type>\ndata: <json>\n\n".
std::string named_event(const nlohmann::json& j);

// A reply streamed as Anthropic's events: feed it the text as it comes, then finish.
class AnthropicStream {
 public:
  explicit AnthropicStream(AnthropicReply a) : a_(std::move(a)) {}
  std::string start() const;  // message_start, ping
  std::string feed(std::string_view piece);
  std::string finish(const engine::RequestResult& r, std::string_view generated);  // last blocks, message_delta, stop
  static std::string ping();

 private:
  std::string advance(bool finished);
  std::string open(const nlohmann::json& block);
  std::string close();

  AnthropicReply a_;
  std::string text_;
  std::string thinking_sent_, text_sent_;
  size_t calls_sent_ = 0;
  int index_ = -1;    // the open block's index (-1: none yet)
  std::string open_;  // the open block's type ("" when none is open)
};

}  // namespace kvc::server

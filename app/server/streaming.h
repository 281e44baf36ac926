// Answering a generation: as one JSON object when it ends, or as server-sent events while it
// runs; either way cancelled when the client hangs up or the server stops.
//
//   stream:  data: {chunk: role}  data: {chunk: text}...  data: {chunk: finish_reason}
//            [data: {usage chunk}]  data: [DONE]
//   failed or shutting down mid-stream:  data: {"error": {...}}   (then the stream ends)
// or, for /v1/messages, Anthropic's message and events (anthropic_json.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "app/server/anthropic_json.h"
#include "app/server/engine_host.h"
#include "app/server/openai_json.h"
#include "app/server/server_context.h"

namespace kvc::server {

struct GenerationJob {
  Endpoint endpoint = Endpoint::chat;
  ResponseIds ids;
  int64_t n_prompt = 0;
  HistoryInfo history;  // chat only
  bool include_usage = false;
  // gpt-oss's harmony reply (chat only): its analysis channel is answered as reasoning_content, its
  // final channel as content (llama.cpp's fields); the answer remembered is the whole text.
  bool harmony = false;
  // The request has tools (tool_choice not none): the reply is read for calls in this format
  // (core/chat/tool_calls.h), answered as tool_calls with finish_reason "tool_calls".
  bool tools = false;
  chat::ToolFormat tool_format = chat::ToolFormat::none;
  // Set on /v1/messages: the reply is answered as Anthropic's message or events, errors in its shape.
  std::optional<AnthropicReply> anthropic;
  // Runs once when the generation finished (not cancelled, not failed): the mapper remembers
  // the answer's ids.
  std::function<void(const engine::RequestResult&)> on_finished;
};

void respond_whole(ServerContext& ctx, httplib::Response& res, std::shared_ptr<Generation> g, GenerationJob job);
void respond_stream(ServerContext& ctx, httplib::Response& res, std::shared_ptr<Generation> g, GenerationJob job);

// The error a generation that did not finish is answered with (failed, or cut by shutdown).
ApiError generation_error(const engine::RequestResult& r, bool shutting_down);

}  // namespace kvc::server

// OpenAI response objects built from engine results.
#include "app/server/openai_json.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/chat/context_window.h"
#include "core/kv/block_key.h"

namespace kvc::server {

using nlohmann::json;

const char* finish_reason(model::StopReason r) {
  switch (r) {
    case model::StopReason::max_tokens:
    case model::StopReason::context_full: return "length";
    default: return "stop";
  }
}

json usage_json(const engine::RequestResult& r, int64_t n_prompt) {
  const auto n_out = static_cast<int64_t>(r.tokens.size());
  return json{{"prompt_tokens", n_prompt},
              {"completion_tokens", n_out},
              {"total_tokens", n_prompt + n_out},
              {"prompt_tokens_details", {{"cached_tokens", r.prefix.n_cached}}}};
}

json kvchat_json(const engine::RequestResult& r, const HistoryInfo& h) {
  const kv::BlockKey k{0, static_cast<uint64_t>(h.conversation)};
  return json{{"cached_tokens_by_tier",
               {{"t0", r.prefix.n_from_tier[0]}, {"t1", r.prefix.n_from_tier[1]}, {"t2", r.prefix.n_from_tier[2]}}},
              {"ttft_ms", r.ttft_ms},
              {"conversation", h.conversation == 0 ? std::string() : k.hex().substr(16)},
              {"history_answers", h.n_answers},
              {"history_answers_mapped", h.n_answers_mapped},
              {"messages_outside_context", h.n_outside_context},
              {"context_note", chat::outside_context_note(h.n_outside_context)}};
}

json chat_completion(const ResponseIds& ids, const engine::RequestResult& r, int64_t n_prompt, const HistoryInfo& h) {
  json choice{{"index", 0},
              {"message", {{"role", "assistant"}, {"content", r.text}}},
              {"logprobs", nullptr},
              {"finish_reason", finish_reason(r.reason)}};
  return json{{"id", ids.id},
              {"object", "chat.completion"},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array({choice})},
              {"usage", usage_json(r, n_prompt)},
              {"system_fingerprint", nullptr},
              {"kvchat", kvchat_json(r, h)}};
}

json chat_chunk(const ResponseIds& ids, json delta, std::string_view finish) {
  json choice{{"index", 0},
              {"delta", std::move(delta)},
              {"logprobs", nullptr},
              {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  return json{{"id", ids.id},       {"object", "chat.completion.chunk"}, {"created", ids.created},
              {"model", ids.model}, {"system_fingerprint", nullptr},     {"choices", json::array({choice})}};
}

json usage_chunk(const ResponseIds& ids, const char* object, const engine::RequestResult& r, int64_t n_prompt,
                 const HistoryInfo& h) {
  return json{{"id", ids.id},
              {"object", object},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array()},
              {"usage", usage_json(r, n_prompt)},
              {"kvchat", kvchat_json(r, h)}};
}

json tool_call_json(const chat::ToolCall& c) {
  return json{{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

void set_tool_reply(json& body, const chat::ParsedReply& reply) {
  json& choice = body["choices"][0];
  json& message = choice["message"];
  message["content"] = reply.content.empty() && !reply.tool_calls.empty() ? json(nullptr) : json(reply.content);
  if (reply.has_reasoning) message["reasoning_content"] = reply.reasoning;
  if (reply.tool_calls.empty()) return;
  json calls = json::array();
  for (const chat::ToolCall& c : reply.tool_calls) calls.push_back(tool_call_json(c));
  message["tool_calls"] = std::move(calls);
  choice["finish_reason"] = "tool_calls";
}

std::vector<json> tool_call_deltas(size_t index, const chat::ToolCall& c) {
  return {json{{"tool_calls", json::array({json{{"index", index},
                                                {"id", c.id},
                                                {"type", "function"},
                                                {"function", {{"name", c.name}, {"arguments", ""}}}}})}},
          json{{"tool_calls", json::array({json{{"index", index}, {"function", {{"arguments", c.arguments}}}}})}}};
}

std::string tool_stream_events(const ResponseIds& ids, const chat::ToolCallStream::Delta& d) {
  std::string out;
  if (!d.reasoning.empty()) out += sse_event(chat_chunk(ids, json{{"reasoning_content", d.reasoning}}, ""));
  if (!d.content.empty()) out += sse_event(chat_chunk(ids, json{{"content", d.content}}, ""));
  for (const auto& [index, call] : d.calls) {
    for (json& delta : tool_call_deltas(index, call)) out += sse_event(chat_chunk(ids, std::move(delta), ""));
  }
  return out;
}

json text_completion(const ResponseIds& ids, const engine::RequestResult& r, int64_t n_prompt) {
  json choice{{"index", 0}, {"text", r.text}, {"logprobs", nullptr}, {"finish_reason", finish_reason(r.reason)}};
  return json{{"id", ids.id},
              {"object", "text_completion"},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array({choice})},
              {"usage", usage_json(r, n_prompt)},
              {"kvchat", kvchat_json(r, HistoryInfo{})}};
}

json text_completion_chunk(const ResponseIds& ids, std::string_view text, std::string_view finish) {
  json choice{{"index", 0},
              {"text", text},
              {"logprobs", nullptr},
              {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}};
  return json{{"id", ids.id},
              {"object", "text_completion"},
              {"created", ids.created},
              {"model", ids.model},
              {"choices", json::array({choice})}};
}

json model_object(const std::string& id, int64_t created) {
  return json{{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "kvchat"}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

std::string new_response_id(std::string_view prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  const uint64_t n = counter.fetch_add(1) + 1;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(n & 0xffffffffull));
  return std::string(prefix) + buf;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace kvc::server

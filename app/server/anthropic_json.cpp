// Anthropic Messages responses built from engine results: blocks, usage, stop reasons, events.
#include "app/server/anthropic_json.h"

#include <algorithm>

#include "core/chat/reasoning.h"

namespace kvc::server {

using nlohmann::json;

namespace {

// "call_<hex>" (chat::tool_call_id) as Anthropic's "toolu_<hex>".
std::string toolu_id(const std::string& call_id) {
  constexpr std::string_view call = "call_";
  return "toolu_" + (call_id.starts_with(call) ? call_id.substr(call.size()) : call_id);
}

json tool_input(const chat::ToolCall& c) {
  json input = json::parse(c.arguments, nullptr, false);
  return input.is_object() ? input : json::object();
}

const char* error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status < 500 ? "invalid_request_error" : "api_error";
  }
}

}  // namespace

ReplyBlocks reply_blocks(const AnthropicReply& a, std::string_view text, bool finished) {
  ReplyBlocks b;
  std::string content;
  if (a.tools) {
    chat::ParsedReply p = chat::parse_reply(text, a.tool_format, finished, a.ids.id);
    content = std::move(p.content);
    if (p.has_reasoning) b.thinking = std::move(p.reasoning);
    for (chat::ToolCall& c : p.tool_calls) {
      c.id = toolu_id(c.id);
      b.calls.push_back(std::move(c));
    }
  } else {
    content = std::string(text);
  }
  if (a.opened_thinking) content = std::string(chat::k_think_open) + content;
  if (b.thinking.empty()) {
    chat::ReasoningSplit split = chat::split_reasoning(content, finished);
    if (split.open && !finished) {  // what may still be the closing tag, and newlines the end trims
      std::string& r = split.reasoning;
      for (size_t k = std::min(r.size(), chat::k_think_close.size() - 1); k > 0; --k) {
        if (r.ends_with(chat::k_think_close.substr(0, k))) {
          r.resize(r.size() - k);
          break;
        }
      }
      while (!r.empty() && (r.back() == '\n' || r.back() == '\r')) r.pop_back();
    }
    if (split.has_reasoning) {
      b.thinking = std::move(split.reasoning);
      content = std::move(split.answer);
    }
  }
  b.text = std::move(content);
  return b;
}

json anthropic_usage(const engine::RequestResult& r, int64_t n_prompt) {
  const int64_t cached = std::clamp<int64_t>(r.prefix.n_cached, 0, n_prompt);
  return json{{"input_tokens", n_prompt - cached},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", cached},
              {"output_tokens", static_cast<int64_t>(r.tokens.size())}};
}

std::pair<std::string, json> anthropic_stop(const AnthropicReply& a, const engine::RequestResult& r,
                                            std::string_view generated, bool called) {
  if (called) return {"tool_use", nullptr};
  switch (r.reason) {
    case model::StopReason::max_tokens:
    case model::StopReason::context_full: return {"max_tokens", nullptr};
    case model::StopReason::stop_string: {
      // The engine's text ends before the stop string; the sampled tokens still spell it.
      const size_t from = r.text.size();
      size_t best = std::string_view::npos;
      const std::string* met = nullptr;
      for (const std::string& s : a.stop_sequences) {
        const size_t at = generated.find(s, from >= s.size() ? from - s.size() + 1 : 0);
        if (at != std::string_view::npos && at + s.size() > from && (met == nullptr || at < best)) {
          best = at;
          met = &s;
        }
      }
      if (met) return {"stop_sequence", *met};
      return {"end_turn", nullptr};  // one of the template's own stop strings: the turn ended
    }
    default: return {"end_turn", nullptr};
  }
}

json anthropic_message(const AnthropicReply& a, const engine::RequestResult& r, std::string_view generated) {
  const ReplyBlocks b = reply_blocks(a, r.text, /*finished=*/true);
  json content = json::array();
  if (!b.thinking.empty()) content.push_back(json{{"type", "thinking"}, {"thinking", b.thinking}, {"signature", ""}});
  if (!b.text.empty()) content.push_back(json{{"type", "text"}, {"text", b.text}});
  for (const chat::ToolCall& c : b.calls) {
    content.push_back(json{{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", tool_input(c)}});
  }
  auto [reason, sequence] = anthropic_stop(a, r, generated, !b.calls.empty());
  return json{{"id", a.ids.id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", a.ids.model},
              {"content", std::move(content)},
              {"stop_reason", reason},
              {"stop_sequence", sequence},
              {"usage", anthropic_usage(r, a.n_prompt)},
              {"kvchat", kvchat_json(r, a.history)}};
}

json anthropic_error(const ApiError& e) {
  return json{{"type", "error"}, {"error", {{"type", error_type(e.status)}, {"message", e.message}}}};
}

std::string named_event(const json& j) { return "event: " + j.value("type", "") + "\ndata: " + dump(j) + "\n\n"; }

std::string AnthropicStream::start() const {
  const json usage{{"input_tokens", a_.n_prompt},
                   {"cache_creation_input_tokens", 0},
                   {"cache_read_input_tokens", 0},
                   {"output_tokens", 0}};
  const json message{
      {"id", a_.ids.id},          {"type", "message"},      {"role", "assistant"},      {"model", a_.ids.model},
      {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr}, {"usage", usage}};
  return named_event(json{{"type", "message_start"}, {"message", message}}) + ping();
}

std::string AnthropicStream::ping() { return named_event(json{{"type", "ping"}}); }

std::string AnthropicStream::open(const json& block) {
  std::string out = close();
  ++index_;
  open_ = block.value("type", "");
  return out + named_event(json{{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

std::string AnthropicStream::close() {
  if (open_.empty()) return "";
  open_.clear();
  return named_event(json{{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicStream::feed(std::string_view piece) {
  text_ += piece;
  return advance(false);
}

std::string AnthropicStream::advance(bool finished) {
  const ReplyBlocks b = reply_blocks(a_, text_, finished);
  std::string out;
  auto delta = [&](const json& d) {
    return named_event(json{{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  };
  // Only growth is sent: a view that changed what was sent (never expected) waits for the end.
  if (b.thinking.size() > thinking_sent_.size() && b.thinking.starts_with(thinking_sent_)) {
    if (open_ != "thinking") out += open(json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    out += delta(json{{"type", "thinking_delta"}, {"thinking", b.thinking.substr(thinking_sent_.size())}});
    thinking_sent_ = b.thinking;
  }
  // A reply that may still open a <think> block is held back until it cannot.
  const size_t lead = std::min(b.text.find_first_not_of(" \n\r\t"), b.text.size());
  const bool maybe_think = !finished && thinking_sent_.empty() && text_sent_.empty() &&
                           chat::k_think_open.starts_with(std::string_view(b.text).substr(lead));
  if (!maybe_think && b.text.size() > text_sent_.size() && b.text.starts_with(text_sent_)) {
    if (open_ != "text") out += open(json{{"type", "text"}, {"text", ""}});
    out += delta(json{{"type", "text_delta"}, {"text", b.text.substr(text_sent_.size())}});
    text_sent_ = b.text;
  }
  for (; calls_sent_ < b.calls.size(); ++calls_sent_) {
    const chat::ToolCall& c = b.calls[calls_sent_];
    out += open(json{{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}});
    out += delta(json{{"type", "input_json_delta"}, {"partial_json", tool_input(c).dump()}});
    out += close();
  }
  return out;
}

std::string AnthropicStream::finish(const engine::RequestResult& r, std::string_view generated) {
  std::string out = advance(true);
  out += close();  // (after advance: a + b may evaluate b first)
  auto [reason, sequence] = anthropic_stop(a_, r, generated, calls_sent_ > 0);
  out += named_event(json{{"type", "message_delta"},
                          {"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                          {"usage", anthropic_usage(r, a_.n_prompt)}});
  out += named_event(json{{"type", "message_stop"}});
  return out;
}

}  // namespace kvc::server

// Request bodies of /v1/chat/completions and /v1/completions: JSON checked field by field into
// typed requests, every bad field answered with a 400 that names it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/server/api_error.h"
#include "core/chat/chat_template.h"
#include "core/sampling/generate_options.h"
#include "core/sampling/sampler.h"

namespace kvc::server {

struct RequestLimits {
  int64_t max_messages = 1024;   // messages per chat request
  int64_t max_tokens = 4096;     // the most a request may ask for (max_tokens / max_completion_tokens)
  int max_stop = 4;              // stop strings, as OpenAI allows
  int64_t max_stop_bytes = 256;  // per stop string
  int max_json_depth = 64;       // nesting of the body (deeper: refused before it is parsed)
};

// What both endpoints share. Sampling defaults are SamplingParams' (the CLI's and the app's:
// README.md "Generation settings"); the seed is random unless one is given.
struct GenerationParams {
  int64_t max_tokens = -1;  // -1: not given (the server's cap and the context decide)
  sampling::SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool seeded = false;         // seed was given
  // Accepted (range-checked) but not applied: the sampler has no OpenAI-style penalties.
  double presence_penalty = 0;
  double frequency_penalty = 0;
  // response_format json_object / json_schema: the grammar sampling is held to (null: text).
  std::shared_ptr<const sampling::Grammar> grammar;
};

// tool_choice: auto (the model decides), none (no tools: rendered without them, the reply read as
// text), required (some call) or named (that function's call).
enum class ToolChoice { automatic, none, required, named };

struct ChatRequest {
  std::string model;
  // Roles normalised to system / user / assistant / tool; an assistant's tool_calls and a tool
  // message's tool_call_id kept.
  std::vector<chat::ChatMessage> messages;
  GenerationParams params;
  // reasoning_effort (or chat_template_kwargs.reasoning_effort): low, medium or high, passed to the
  // templates that read it (gpt-oss); others ignore it.
  std::optional<std::string> reasoning_effort;
  // The request's tools as a JSON array of {"type": "function", "function": {name, description?,
  // parameters?, strict?}} ("" for none), checked field by field.
  std::string tools_json;
  std::vector<std::string> tool_names;
  ToolChoice tool_choice = ToolChoice::automatic;
  std::string tool_choice_name;     // ToolChoice::named
  bool parallel_tool_calls = true;  // OpenAI's default
};

struct CompletionRequest {
  std::string model;
  std::string prompt;               // when the prompt was text
  std::vector<int32_t> prompt_ids;  // when it was token ids
  bool prompt_is_ids = false;
  GenerationParams params;
};

// Refuses a body that is not a JSON object, nested deeper than limits.max_json_depth, or whose
// fields have the wrong type or range; unknown fields are ignored, as other servers do.
Parsed<ChatRequest> parse_chat_request(std::string_view body, const RequestLimits& limits);
Parsed<CompletionRequest> parse_completion_request(std::string_view body, const RequestLimits& limits);

// The body as a JSON object, or the 400 to answer with (not JSON, not an object, nested deeper than
// limits.max_json_depth).
Parsed<nlohmann::json> parse_json_object(std::string_view body, const RequestLimits& limits);

// Nesting depth of arrays and objects in `text`, outside strings; stops counting past `limit`.
int json_depth(std::string_view text, int limit);

}  // namespace kvc::server

// An OpenAI-compatible chat client over libcurl: a server's models, its /metrics page, and a
// streamed chat completion (server-sent events), with errors a user can act on.
//
// Works against kvchat-cli serve, vLLM, SGLang, llama-server, Ollama (/v1) and OpenAI itself.
// The API key goes only into the Authorization header: no message, log or error carries it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/sampling/generate_options.h"
#include "core/util/result.h"

namespace kvc::remote {

struct Endpoint {
  std::string base_url;   // normalized: "http://host:8000/v1" (no trailing slash)
  std::string api_key;    // empty: no Authorization header
  double timeout_s = 60;  // no byte for this long while waiting or streaming: the request fails
  double connect_timeout_s = 5;
};

// "host:8000" -> "http://host:8000/v1"; "http://host:8000/" -> "http://host:8000/v1"; a URL
// with a path keeps it ("https://api.example.org/openai/v1"). Errors name what is wrong.
Result<std::string> normalize_base_url(std::string_view url);
// The page beside the API: "http://host:8000/v1" -> "http://host:8000/metrics".
std::string metrics_url(std::string_view base_url);

// GET /models: the model ids, in the server's order.
Result<std::vector<std::string>> list_models(const Endpoint& e);
// GET /metrics as text; an error when the server has none (404) or does not answer.
Result<std::string> fetch_metrics(const Endpoint& e);

// What a chat request sends of the conversation's settings: max_tokens (when > 0), temperature,
// top_p and seed (when >= 0); other servers may refuse kvchat's other sampling fields.
struct ChatOptions {
  std::string model;
  sampling::GenerateOptions generation;
};

// What came back of a streamed answer, filled as it streams (so a failed stream's partial
// answer is there too). Token counts are -1 where the server's usage did not give them.
struct StreamedAnswer {
  std::string text;  // content, with reasoning_content deltas as a leading <think>...</think>
  std::string finish_reason;
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens
  int64_t n_deltas = 0;        // chunks that carried text
  double ttft_ms = 0;          // request start to the first text, measured here
  double decode_ms = 0;        // first text to the last
  bool done = false;           // the stream ended with [DONE] (or a finish_reason)
  bool stopped = false;        // on_delta asked to stop
};

// Splits a server-sent event stream into its data payloads (the lines after "data:" of each
// event, joined by '\n'); bytes may arrive cut anywhere.
class SseParser {
 public:
  void feed(std::string_view bytes, const std::function<void(std::string_view data)>& on_event);

 private:
  std::string line_;
  std::string data_;
  bool has_data_ = false;
};

// POST /chat/completions with stream: true. on_delta gets each piece of text, and an empty one
// now and then while nothing arrives; returning false stops the answer (not an error: stopped).
// A failure (unreachable, 401, 429, a stream that dropped or stalled) is an error; `out` then
// holds what had arrived.
Status stream_chat(const Endpoint& e, const ChatOptions& o, const std::vector<chat::ChatMessage>& messages,
                   const std::function<bool(std::string_view)>& on_delta, StreamedAnswer& out);

}  // namespace kvc::remote

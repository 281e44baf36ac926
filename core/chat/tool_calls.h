// A model's reply read as OpenAI's assistant message: its text, its reasoning and the tool calls it wrote, per
// family (Hermes / Qwen, Llama 3.x, Mistral, gpt-oss harmony, DeepSeek, Gemma), whole or as it streams.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/chat/chat_template.h"

namespace kvc::chat {

// How a model writes its tool calls; none: its output is never read as calls.
enum class ToolFormat { none, hermes, llama3, mistral, harmony, deepseek, gemma };

// The format of a template family: chatml (Hermes 2 Pro, Qwen 2.5 / 3) hermes, llama-3 llama3,
// mistral, gemma, deepseek (R1, V3), harmony (gpt-oss); the others none.
ToolFormat tool_format_of(ChatTemplate::Family family);

// What each format's calls look like (the text after the generation prompt):
//
//   hermes    Let me look.<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (one block per call)
//   llama3    {"name": "f", "parameters": {...}}          the whole reply, one JSON object (or several, "; ")
//             <|python_tag|>{"name": ...} | <|python_tag|>brave_search.call(query="x")
//   mistral   [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "a1b2c3d4e"}, ...]
//             [TOOL_CALLS]f[ARGS]{...}                    (Mistral Small 3.2, Magistral; repeated per call)
//   harmony   <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|>
//             (analysis: reasoning; final, or commentary without a recipient: content)
//   deepseek
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```<｜tool▁call▁end｜>...
//             (R1; V3.1 writes f<｜tool▁sep｜>{...} inside the call)
//   gemma     ```tool_code\nf(city="Paris")\n```  or  ```json\n{"name": "f", "parameters": {...}}\n```
//
// Text before the first call is content; text the parser cannot read as a call (malformed JSON, a
// call cut off) stays content, verbatim, after what came before it. Never an error.
struct ParsedReply {
  std::string content;
  bool has_reasoning = false;  // harmony's analysis channel (other formats keep <think> in content)
  std::string reasoning;
  std::vector<ToolCall> tool_calls;  // ids from tool_call_id(id_seed, index)
};

// finished: the reply has ended (a call still open is text); otherwise content stops before
// anything that could still become a call, and only calls whose end was seen are listed, so that
// every prefix of a reply parses to prefixes of the whole reply's content and calls.
ParsedReply parse_reply(std::string_view reply, ToolFormat format, bool finished, std::string_view id_seed);

// "call_" + 24 hex digits, a hash of the seed (the response's id) and the call's index: the same
// call gets the same id whether the reply is parsed whole or as it streams.
std::string tool_call_id(std::string_view id_seed, size_t index);

// "hermes", "llama3", ... (for messages and the README).
std::string_view tool_format_name(ToolFormat format);

// A reply parsed as it streams: each piece gives what it adds to the content and reasoning, and
// the calls that completed with it (OpenAI streams each call as its index, id, name, then its
// arguments). Plain text flows through at once; only a possible call start is held back.
class ToolCallStream {
 public:
  ToolCallStream(ToolFormat format, std::string id_seed) : format_(format), id_seed_(std::move(id_seed)) {}
  struct Delta {
    std::string reasoning;
    std::string content;
    std::vector<std::pair<size_t, ToolCall>> calls;  // index in the reply's tool_calls, call
  };
  Delta feed(std::string_view piece);
  Delta finish();
  // The whole reply as parsed at the end (finish() called).
  const ParsedReply& parsed() const { return last_; }

 private:
  Delta advance(bool finished);

  ToolFormat format_;
  std::string id_seed_;
  std::string text_;
  ParsedReply last_;
  size_t content_sent_ = 0;
  size_t reasoning_sent_ = 0;
  size_t calls_sent_ = 0;
};

}  // namespace kvc::chat

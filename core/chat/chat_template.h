// A model's chat template: its own Jinja template run by kvchat's interpreter where it can be, else a family renderer
// (chatml, llama-3, ...) or the labelled fallback.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/util/result.h"

namespace kvc::chat {

namespace jinja {
class Template;
}

// A tool call an assistant made (OpenAI's tool_calls[i]): the function's name and its arguments as
// JSON text.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c, std::optional<std::string> reasoning = std::nullopt)
      : role(std::move(r)), content(std::move(c)), reasoning_content(std::move(reasoning)) {}
  std::string role;  // "system", "user" or "assistant"
  std::string content;
  std::optional<std::string> reasoning_content;  // an assistant's reasoning kept apart (OpenAI's field)
  std::vector<ToolCall> tool_calls;              // an assistant's calls
  std::string tool_call_id;                      // a "tool" message: the call it answers
};

// What the template sees of the vocabulary: the texts of its BOS and EOS tokens, and whether the
// tokenizer adds BOS itself (then a BOS text at the start of the render is dropped, as llama.cpp
// does, because the tokenizer puts the token there).
struct TemplateTokens {
  std::string bos;
  std::string eos;
  bool add_bos = false;
};

struct RenderOptions {
  bool add_generation_prompt = true;  // end with the header of the assistant's reply
  bool enable_thinking = true;        // the template variable reasoning models read (Qwen 3, SmolLM3, R1)
  // The time strftime_now() and date_string show (Llama 3.x print today's date); default: now, local time.
  std::optional<std::tm> now;
  // The tools the template describes: a JSON array of OpenAI tool definitions ("" for none).
  std::string tools_json;
  // "low", "medium" or "high" for templates that read reasoning_effort (gpt-oss); unset: the
  // template's own default. Other templates ignore it.
  std::optional<std::string> reasoning_effort;
};

// The reasoning efforts templates take (the variable reasoning_effort), and whether `s` is one.
inline constexpr std::string_view k_reasoning_efforts[] = {"low", "medium", "high"};
bool is_reasoning_effort(std::string_view s);

// Two ways to render a conversation:
//
// * The model's template (tokenizer.chat_template), run by the Jinja interpreter (jinja_template.h)
//   with the variables llama.cpp gives it (messages, add_generation_prompt, bos_token, eos_token,
//   enable_thinking, date_string), so the prompt is byte for byte the one llama-server --jinja
//   makes (tests/core/test_chat_render.cpp checks that against its renders). Used whenever the
//   template parses and renders a test conversation. A template that rejects a system message
//   (Gemma) gets it folded into the first user message ("system\nuser"), as llama.cpp does.
//
// * A family renderer, chosen by marker substrings, for templates the interpreter cannot run (and
//   for from_family()); an unrecognised or missing template gets the plain "User:/Assistant:"
//   fallback, labelled as such. Family renders are written segment by segment; a whole
//   conversation is exactly their concatenation:
//
//   render_user_turn(system, user1, true) + reply1 + assistant_suffix()
//   + render_user_turn("", user2, false)  + reply2 + assistant_suffix() + ...
//
//   chatml: <|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n
//           |<------------------- render_user_turn(S, U, true) -------------------------->|
//           R<|im_end|>\n
//           |reply|suffix|
//
// BOS at the very start is the tokenizer's job (encode with add_bos), never part of the text.
// Replies are written verbatim after the assistant header: the space that SentencePiece
// models put before their first word comes with the reply's own tokens (as in llama.cpp's
// renderings), so the header never ends in a space.
class ChatTemplate {
 public:
  enum class Family { chatml, llama2, llama3, mistral, zephyr, gemma, phi3, deepseek, harmony, fallback };

  // The family from the text of tokenizer.chat_template, by characteristic markers; an empty or
  // unrecognised template gives the fallback family. Never runs the template.
  static ChatTemplate detect(std::string_view template_text);
  static ChatTemplate from_family(Family family) { return ChatTemplate(family); }
  // The model's template, run by the interpreter if it parses and renders a test conversation;
  // otherwise detect()'s family, with load_error() saying why the template could not be used.
  static ChatTemplate load(std::string_view template_text, const TemplateTokens& tokens);

  Family family() const { return family_; }
  // "chatml", "llama-2", ...; the fallback says so: "fallback (plain 'User:/Assistant:')".
  std::string_view name() const;
  // Neither the model's template nor a family renderer: the plain "User:/Assistant:" format.
  bool is_fallback() const { return !jinja_ && family_ == Family::fallback; }
  // The model's own template renders the prompts (byte-exact with llama.cpp).
  bool runs_template() const { return jinja_ != nullptr; }
  // For the Model window, `inspect` and the chat banner: "llama-3, the model's template",
  // "chatml (built-in renderer; the model's template cannot run: ...)", "fallback (...)".
  std::string describe() const;
  // Why the model's template is not used ("chat template, line 3: ..."); empty when it is, or
  // when there is none.
  const std::string& load_error() const { return load_error_; }
  // The model's template reads reasoning_effort (gpt-oss's): the Chat settings show the control.
  bool uses_reasoning_effort() const { return uses_reasoning_effort_; }

  // The prompt for a conversation: the model's template where it runs, else the family render.
  // An error only from the model's template (raise_exception, a limit, a bad value).
  Result<std::string> render_prompt(std::span<const ChatMessage> messages, const RenderOptions& options) const;

  // The family renderer's segments (see above). A new user turn and the assistant header that
  // starts the reply. `system` is non-empty only on the first turn; families without a system
  // role (gemma, mistral, fallback) fold it into that user message as their templates do.
  // `first` says whether this turn opens the conversation (llama-2 starts every later turn
  // with a literal "<s>").
  std::string render_user_turn(std::string_view system, std::string_view user, bool first) const;
  // What closes a reply after its content ("<|im_end|>\n"); appended when the reply ends, if
  // the model did not produce it itself.
  std::string assistant_suffix() const;
  // Text that marks the end of a reply if the model writes it out as plain text.
  std::vector<std::string> stop_strings() const;
  // Pieces of the control tokens that end a turn ("<|im_end|>"), for Tokenizer::find_piece.
  std::vector<std::string> end_of_turn_tokens() const;

  // The family render of a whole conversation, for tests and for tokenizing a conversation
  // afresh. An optional first "system" message is the system prompt; later system messages,
  // and unknown roles, are treated as user messages. add_assistant_header: end with the header
  // of a new reply (when the last message is a user's).
  std::string render(std::span<const ChatMessage> messages, bool add_assistant_header) const;

 private:
  explicit ChatTemplate(Family family) : family_(family) {}
  std::string user_part(std::string_view system, std::string_view user, bool first) const;
  std::string assistant_header() const;
  Result<std::string> render_jinja(std::span<const ChatMessage> messages, const RenderOptions& options) const;

  Family family_;
  std::shared_ptr<const jinja::Template> jinja_;  // null: the family renderer
  TemplateTokens tokens_;
  bool system_role_ = true;  // false: the template rejects system messages; fold them into the first user message
  std::string load_error_;
  bool uses_reasoning_effort_ = false;
};

}  // namespace kvc::chat

// Chat template families (chatml, llama-2, ...) detected from a GGUF's Jinja template and rendered segment by segment.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvc::chat {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A conversation's token stream is append-only (DESIGN.md section 2), so a template renders
// segments, and a whole conversation is exactly their concatenation:
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
// We do not run Jinja; the template text only selects a family.
class ChatTemplate {
 public:
  enum class Family { chatml, llama2, llama3, mistral, zephyr, gemma, phi3, fallback };

  // From the text of tokenizer.chat_template, by characteristic markers; an empty or
  // unrecognised template gives the fallback family.
  static ChatTemplate detect(std::string_view template_text);
  static ChatTemplate from_family(Family family) { return ChatTemplate(family); }

  Family family() const { return family_; }
  // "chatml", "llama-2", ...; the fallback says so: "fallback (plain 'User:/Assistant:')".
  std::string_view name() const;
  bool is_fallback() const { return family_ == Family::fallback; }

  // A new user turn and the assistant header that starts the reply. `system` is non-empty only
  // on the first turn; families without a system role (gemma, mistral, fallback) fold it into
  // that user message as their templates do. `first` says whether this turn opens the
  // conversation (llama-2 starts every later turn with a literal "<s>").
  std::string render_user_turn(std::string_view system, std::string_view user, bool first) const;
  // What closes a reply after its content ("<|im_end|>\n"); appended when the reply ends, if
  // the model did not produce it itself.
  std::string assistant_suffix() const;
  // Text that marks the end of a reply if the model writes it out as plain text.
  std::vector<std::string> stop_strings() const;
  // Pieces of the control tokens that end a turn ("<|im_end|>"), for Tokenizer::find_piece.
  std::vector<std::string> end_of_turn_tokens() const;

  // The whole conversation, for tests and for tokenizing a conversation afresh. An optional
  // first "system" message is the system prompt; later system messages, and unknown roles,
  // are treated as user messages. add_assistant_header: end with the header of a new reply
  // (when the last message is a user's).
  std::string render(std::span<const ChatMessage> messages, bool add_assistant_header) const;

 private:
  explicit ChatTemplate(Family family) : family_(family) {}
  std::string user_part(std::string_view system, std::string_view user, bool first) const;
  std::string assistant_header() const;
  Family family_;
};

}  // namespace kvc::chat

// ConversationMapper: a resent chat history (text) back to the token stream the engine produced.
//
// The prompt is built segment by segment, exactly as the app extends a conversation
// (app/common/chat_turn.h), so that it equals the engine's own stream and the KV cache matches:
//
//   [BOS] user_turn(system, u1, first) | a1 ids | suffix user_turn(u2) | a2 ids | suffix user_turn(u3)
//
// An assistant message's ids are those the engine sampled when it wrote that text after that
// very prompt (AnswerStore, keyed by the prompt ids and the text), else the text tokenized
// afresh (a client-written or edited answer: the cache then misses from there on).
//
// Engine conversation id: XXH3-128 of the system prompt and the first user message (63 bits,
// never 0). Chats that begin alike share one engine sequence; their KV is shared anyway through
// the prefix index, and the sequence only keeps the partial last block of the latest turn.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "app/common/chat_turn.h"
#include "core/chat/chat_template.h"
#include "core/model/model.h"
#include "core/util/result.h"
#include "storage/answer_store.h"

namespace kvc::server {

// The one place the server calls the chat template: a user turn's segment (text and tokens),
// as the app renders it turn by turn.
Result<app::TurnSegment> render_user_segment(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                             std::string_view system, std::span<const chat::ChatMessage> history,
                                             std::span<const chat::ChatMessage> turn,
                                             const std::optional<std::string>& reasoning_effort = std::nullopt,
                                             const std::string& tools_json = "");

// One rendered message of the history: its tokens are MappedPrompt::tokens[begin, end).
struct MappedMessage {
  std::string role;  // "user" or "assistant"
  std::string text;
  size_t begin = 0, end = 0;
};

struct MappedPrompt {
  std::vector<int32_t> tokens;          // the whole conversation's stream
  std::vector<MappedMessage> messages;  // its user and assistant messages, in order
  int64_t conversation = 0;
  int64_t n_answers = 0;           // assistant messages in the history
  int64_t n_answers_recalled = 0;  // of them, mapped to the engine's own ids
};

class ConversationMapper {
 public:
  ConversationMapper(const model::Model& m, storage::AnswerStore& answers) : m_(m), answers_(answers) {}

  // messages: roles system / user / assistant / tool. invalid_argument when there is no user
  // message or the last message is an assistant's (there would be nothing to answer).
  // reasoning_effort: the template's (gpt-oss), for the templates that read it. tools_json: the
  // request's tools, rendered by the template on every turn.
  //
  // Tool calls: an assistant message with tool_calls is rendered as the template writes calls
  // (its content tokenized afresh, never recalled: the calls' text follows in the next segment),
  // and the tool messages after it (with a user message that follows them) are one turn:
  //
  //   ... user_turn(u1) | "Let me look." | <tool_call>{..}</tool_call><|im_end|> tool results, gen prompt
  //                      content afresh   |<------------- segment: the template's render ------------->|
  //
  // The engine's sampled call text is not reused: the cache hits up to the reply and again on
  // the next turn, which extends this same render.
  Result<MappedPrompt> map(std::span<const chat::ChatMessage> messages,
                           const std::optional<std::string>& reasoning_effort = std::nullopt,
                           const std::string& tools_json = "") const;
  // After a reply: `ids` (the engine's) are what `text` maps back to after `prompt`.
  void remember(std::span<const int32_t> prompt, std::string_view text, std::span<const int32_t> ids) const;

  static int64_t conversation_id(std::span<const chat::ChatMessage> messages);

 private:
  const model::Model& m_;
  storage::AnswerStore& answers_;
};

}  // namespace kvc::server

// A turn's prompt under the context overflow policy (core/chat/context_window.h), shared by the CLI chat, the app and
// the server.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/chat/context_window.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/result.h"

namespace kvc::app {

// One stored message of the conversation: its role ("user", "assistant"), text and the
// tokens it added to the stream (a user message: its turn segment; a reply: the sampled ids).
struct StreamMessage {
  std::string_view role;
  std::string_view text;
  std::span<const int32_t> tokens;
};

struct ChatWindow {
  std::vector<int32_t> prompt;  // the window's tokens: what the engine runs
  size_t first = 0;             // messages before it are outside the model's context
  bool moved = false;           // this turn moved the cut
};

// The prompt whose window begins at message `first`: the stored tokens when first is 0, else
// the system prompt and message `first` rendered as a first turn, then the stored tokens of
// the messages after it. `first` must be a user message.
Result<std::vector<int32_t>> window_tokens(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                           std::string_view system, std::span<const StreamMessage> messages,
                                           size_t first);

// Whether a new user message can ever be answered in a context of n_ctx positions: the least
// a turn answering it takes is the system prompt and the message rendered as a first turn (the
// window beginning at it), and that must leave room for at least one answer token. An
// invalid_argument error saying how many tokens it takes and the limit when it cannot; the
// template's error when it cannot be rendered. Checked before the message is stored.
Status check_message_fits(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                          std::string_view text, int64_t n_ctx);

// The window for the turn that answers messages.back() (a user message). `cut`: where the
// previous turn left the cut (a message index); nullopt: none kept, replay the policy over the
// history (chat::replay_window). An error when the last message does not fit on its own.
Result<ChatWindow> plan_chat_window(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                    std::string_view system, std::span<const StreamMessage> messages,
                                    const chat::WindowPolicy& policy, std::optional<size_t> cut);

}  // namespace kvc::app

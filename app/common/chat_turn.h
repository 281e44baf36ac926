// How one user turn extends a conversation's append-only token stream (the GUI, the CLI chat, the server).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat/chat_template.h"
#include "core/tokenizer/tokenizer.h"
#include "core/util/result.h"

namespace kvc::app {

// The text and tokens a user turn appends to the stream. Only this segment is tokenized; the
// history's tokens are reused as they are, so the stream stays identical to the model's own
// sampled ids (docs/ARCHITECTURE.md §2).
//
// With the model's own template (ChatTemplate::runs_template()) the segment is cut from full
// renders of the conversation:
//
//   before  = render(system, u1, a1, ..., u_k,       generation prompt)   what the stream held before a_k
//   after   = render(system, u1, a1, ..., u_k, a_k, u_k+1, generation prompt)
//   segment = after minus (before + a_k)          when `after` starts with before + a_k: exact
//
//   turn 0:  [BOS] render(system, u1, generation prompt)   (a BOS text dropped when the tokenizer adds BOS)
//
// A template that drops the reasoning of earlier replies (Qwen 3) shows the last reply as its
// visible answer from the next turn on. The prompt follows the template: the reply's tokens in the
// stream are replaced by the answer's (reply_tokens), so the stream is again the template's render
// and the cache serves everything up to the reply's generation prompt:
//
//   stream before:  ...<|im_start|>assistant\n | <think>\n...\n</think>\n\n4.          (as generated)
//   stream after:   ...<|im_start|>assistant\n | 4. | <|im_end|>\n<|im_start|>user\n...  (exact)
//                   |<---- cached ------------>| reply_tokens | segment
//
// gpt-oss's template (harmony) drops a reply's analysis and shows its answer after a header of its own:
//
//   before:  ...assistant | <|channel|>analysis<|message|>..<|end|><|start|>assistant<|channel|>final<|message|>4.
//   after:   ...assistant | <|channel|>final<|message|>4. | <|end|><|start|>user<|message|>...  (exact)
//
// DeepSeek-R1's generation prompt ends in "<think>\n", which its render of the reply drops: that
// opening is the reply's (opening_tokens), so the same rewrite applies, opening included:
//
//   stream before:  ...<｜Assistant｜> | <think>\n | ...\n</think>\n\n4.             (opening + as generated)
//   stream after:   ...<｜Assistant｜> | 4. | <｜end▁of▁sentence｜><｜User｜>...         (exact)
//
// Any other rewrite of the last reply (a template that trims replies) cannot be extended exactly: the stream keeps the
// reply as generated, and the segment is the template's closing text of a reply followed by what it adds for the new
// turn (exact false). Without the model's template, the family segments:
//
//   turn 0:  [BOS] render_user_turn(system, user, first=true)
//   turn k:  assistant_suffix() render_user_turn("", user, first=false)
//            ^ closes the previous reply: its end-of-turn token is never in the stream
struct TurnSegment {
  std::string text;
  std::vector<int32_t> tokens;
  bool exact = false;  // the stream plus this segment is the template's render of the conversation
  // Set when the template shows the last reply without its reasoning: its tokens in the stream
  // from now on (the visible answer as the template writes it, in reply_text). The caller
  // replaces the reply's tokens with them; the stored text keeps the reasoning.
  std::optional<std::vector<int32_t>> reply_tokens;
  std::string reply_text;
  // The end of the generation prompt that the template drops when it shows the reply
  // (DeepSeek-R1's "<think>\n"; empty for every other committed template). It belongs to the
  // reply, not to the segment: the engine's prompt is stream + tokens + opening_tokens, and the
  // stored reply's tokens start with opening_tokens, so that the visible rewrite (reply_tokens)
  // replaces the whole reply, opening included. The segment's tokens end at "<｜Assistant｜>":
  // a regenerate from the same user message appends the same opening (reply_opening()).
  std::string opening_text;
  std::vector<int32_t> opening_tokens;
};

// The opening (TurnSegment::opening_*) of a reply to `history`, which ends with a user message:
// what a regenerate appends to the stored stream. Empty when there is none or the template fails.
struct ReplyOpening {
  std::string text;
  std::vector<int32_t> tokens;
};
ReplyOpening reply_opening(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                           std::span<const chat::ChatMessage> history,
                           const std::optional<std::string>& reasoning_effort = std::nullopt);

// `history`: the user and assistant messages so far, replies as generated (the stream's text);
// it ends with a reply, or is empty on the first turn. `system`: the system prompt ("" for none).
// An error when the model's template rejects the conversation (raise_exception).
// `reasoning_effort`: the template's reasoning_effort (gpt-oss: low, medium, high); unset, its default.
Result<TurnSegment> build_user_turn(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                    std::string_view system, std::span<const chat::ChatMessage> history,
                                    std::string_view user,
                                    const std::optional<std::string>& reasoning_effort = std::nullopt);

// The same for a turn of several messages: the results of an assistant's tool calls ("tool"
// messages, one per call; a user message may follow them), rendered together after the reply
// that made the calls. `tools_json`: the tools the template describes (RenderOptions::tools_json),
// the same on every turn of a conversation for its renders to extend each other.
Result<TurnSegment> build_turn(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                               std::span<const chat::ChatMessage> history, std::span<const chat::ChatMessage> turn,
                               const std::optional<std::string>& reasoning_effort, const std::string& tools_json);

}  // namespace kvc::app

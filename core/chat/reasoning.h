// A reply's reasoning (<think>…</think>, as Qwen 3, DeepSeek-R1 and SmolLM3 write it; gpt-oss's analysis channel)
// told apart from its answer.
#pragma once

#include <string>
#include <string_view>

namespace kvc::chat {

// A reply as generated, cut into its reasoning and its visible answer. The stored message keeps
// the whole text; the views show `answer` and fold `reasoning` away.
//
//   "<think>\nadd them\n</think>\n\n4."   reasoning "add them", answer "4."
//   "add them\n</think>\n\n4."            the same: DeepSeek-R1's generation prompt opens <think>
//   "<think>\nstill going"                 reasoning "still going", open (no answer yet)
//   "4."                                   no reasoning, answer "4."
//
// gpt-oss writes harmony messages after its generation prompt "<|start|>assistant", each a channel
// and a body; the analysis channel is its reasoning, the others (final, commentary) its answer:
//
//   "<|channel|>analysis<|message|>add them<|end|><|start|>assistant<|channel|>final<|message|>4."
//                                          reasoning "add them", answer "4."
//   "<|channel|>analysis<|message|>add th"  reasoning "add th", open
//   "<|channel|>final<|message|>4."         no reasoning, answer "4."
//
// Every prefix of a harmony reply splits into prefixes of the whole reply's reasoning and answer
// (a marker cut short is held back), so a stream can be split as it grows (ReasoningStream). A
// finished reply holds nothing back: its text ending in "<" or "<|" (cut off there, or simply
// written so) is kept as text.
struct ReasoningSplit {
  bool has_reasoning = false;  // the reply holds a <think> block (or a closing </think>), or an analysis message
  bool open = false;           // the reasoning has not been closed yet (still streaming, or cut off)
  std::string reasoning;       // without the tags and the newlines around it
  std::string answer;          // what follows </think>, leading newlines dropped
};

ReasoningSplit split_reasoning(std::string_view reply, bool finished = false);

// The reply is written in harmony's channels (it starts with <|channel|> or <|start|>, or a
// beginning of one of them).
bool is_harmony_reply(std::string_view reply);

// A harmony reply split as it streams: fed the text piece by piece, gives what each piece adds to
// the reasoning and to the answer (the server's reasoning_content and content deltas). A reply
// that does not start with a channel is all answer.
class ReasoningStream {
 public:
  struct Delta {
    std::string reasoning;
    std::string answer;
  };
  Delta feed(std::string_view piece);
  // The reply has ended: what was held back as the possible start of a marker.
  Delta finish();
  const std::string& text() const { return text_; }

 private:
  Delta advance(bool finished);

  std::string text_;
  size_t reasoning_sent_ = 0;
  size_t answer_sent_ = 0;
};

inline constexpr std::string_view k_think_open = "<think>";
inline constexpr std::string_view k_think_close = "</think>";

}  // namespace kvc::chat

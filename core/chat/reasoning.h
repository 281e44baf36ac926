// A reply's reasoning (<think>…</think>, as Qwen 3, DeepSeek-R1 and SmolLM3 write it) told apart from its answer.
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
struct ReasoningSplit {
  bool has_reasoning = false;  // the reply holds a <think> block (or a closing </think>)
  bool open = false;           // the reasoning has not been closed yet (still streaming, or cut off)
  std::string reasoning;       // without the tags and the newlines around it
  std::string answer;          // what follows </think>, leading newlines dropped
};

ReasoningSplit split_reasoning(std::string_view reply);

inline constexpr std::string_view k_think_open = "<think>";
inline constexpr std::string_view k_think_close = "</think>";

}  // namespace kvc::chat

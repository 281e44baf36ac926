// Marks a streamed reply's <think> reasoning for a terminal (dimmed) or a pipe ("[reasoning] " lines).
#pragma once

#include <string>
#include <string_view>

namespace kvc::app {

// Fed the reply piece by piece as it streams; returns what to print for each piece. The reply's
// text is printed whole (tags included); only marks are added:
//
//   terminal: "\x1b[2m<think>\n...\n</think>\x1b[0m\n\nanswer"      the reasoning dimmed
//   pipe:     "[reasoning] <think>\n[reasoning] ...\n[reasoning] </think>\n\nanswer"
//
// A tag split across pieces is held back until it is whole. `starts_open`: the prompt opened the
// reasoning itself (DeepSeek-R1's generation prompt ends in "<think>\n").
class ReasoningMarker {
 public:
  ReasoningMarker(bool terminal, bool starts_open = false);
  std::string feed(std::string_view piece);
  // What is still held back, and the closing mark if the reply ended inside its reasoning.
  std::string finish();

 private:
  std::string emit(std::string_view text);
  void open(std::string& out);
  void close(std::string& out);

  bool terminal_;
  bool inside_ = false;
  bool at_line_start_ = true;
  bool seen_text_ = false;    // only a <think> that starts the reply opens reasoning
  bool dim_pending_ = false;  // a terminal's dim mark for reasoning the prompt opened, not printed yet
  std::string held_;          // a possible start of a tag
};

}  // namespace kvc::app

// Markdown-ish splitting of a message into prose and fenced code blocks, for rendering.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvc::ui {

// A run of prose, or the body of one ``` fenced code block (fence lines removed).
// Invariant: prose blocks are never empty; `closed` is false only for a code block whose
// closing fence has not arrived (an answer still streaming).
struct TextBlock {
  enum class Kind { prose, code };
  Kind kind = Kind::prose;
  std::string text;
  std::string language;  // after the opening fence ("cpp"); code only
  bool closed = true;
};

// A fence is a line whose first non-space characters (at most 3 spaces) are ```; the rest
// of an opening fence line names the language.
std::vector<TextBlock> split_code_blocks(std::string_view text);

}  // namespace kvc::ui

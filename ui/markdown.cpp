// Splitting text at ``` fences.
#include "ui/markdown.h"

namespace kvc::ui {

namespace {

// The text after ``` if `line` is a fence line, else nullopt-like: returns false.
bool is_fence(std::string_view line, std::string_view& rest) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (line.substr(i, 3) != "```") return false;
  rest = line.substr(i + 3);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) rest.remove_suffix(1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return true;
}

}  // namespace

std::vector<TextBlock> split_code_blocks(std::string_view text) {
  std::vector<TextBlock> out;
  TextBlock cur;
  bool in_code = false;
  auto flush_prose = [&] {
    // Drop the newline that separates prose from the fence that follows.
    if (!cur.text.empty() && cur.text.back() == '\n') cur.text.pop_back();
    if (!cur.text.empty()) out.push_back(std::move(cur));
    cur = TextBlock{};
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t nl = text.find('\n', pos);
    const bool last = nl == std::string_view::npos;
    const std::string_view line = text.substr(pos, last ? std::string_view::npos : nl - pos);
    std::string_view rest;
    if (is_fence(line, rest)) {
      if (!in_code) {
        flush_prose();
        cur.kind = TextBlock::Kind::code;
        cur.language = std::string(rest);
        in_code = true;
      } else {
        if (!cur.text.empty() && cur.text.back() == '\n') cur.text.pop_back();
        out.push_back(std::move(cur));
        cur = TextBlock{};
        in_code = false;
      }
    } else {
      cur.text += line;
      if (!last) cur.text += '\n';
    }
    if (last) break;
    pos = nl + 1;
  }
  if (in_code) {
    if (!cur.text.empty() && cur.text.back() == '\n') cur.text.pop_back();
    cur.closed = false;
    out.push_back(std::move(cur));
  } else {
    if (!cur.text.empty() && cur.text.back() == '\n') cur.text.pop_back();
    if (!cur.text.empty()) out.push_back(std::move(cur));
  }
  return out;
}

}  // namespace kvc::ui

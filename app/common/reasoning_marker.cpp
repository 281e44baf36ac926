// Adding the reasoning marks to a streamed reply.
#include "app/common/reasoning_marker.h"

#include <algorithm>

#include "core/chat/reasoning.h"

namespace kvc::app {
namespace {

constexpr std::string_view k_dim = "\x1b[2m";
constexpr std::string_view k_reset = "\x1b[0m";
constexpr std::string_view k_prefix = "[reasoning] ";

// Whether `s` could be the beginning of `tag` (and is shorter than it).
bool partial_tag(std::string_view s, std::string_view tag) {
  return s.size() < tag.size() && tag.substr(0, s.size()) == s;
}

}  // namespace

ReasoningMarker::ReasoningMarker(bool terminal, bool starts_open) : terminal_(terminal) {
  if (starts_open) {
    inside_ = true;
    seen_text_ = true;
    dim_pending_ = terminal;
  }
}

void ReasoningMarker::open(std::string& out) {
  inside_ = true;
  if (terminal_) out += k_dim;
}

void ReasoningMarker::close(std::string& out) {
  inside_ = false;
  if (terminal_) out += k_reset;
}

// Text with no tag in it: prefixes each reasoning line on a pipe.
std::string ReasoningMarker::emit(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (inside_ && !terminal_ && at_line_start_) out += k_prefix;
    out += c;
    at_line_start_ = c == '\n';
  }
  return out;
}

std::string ReasoningMarker::feed(std::string_view piece) {
  std::string text = held_ + std::string(piece);
  held_.clear();
  std::string out;
  if (dim_pending_) {
    out += k_dim;
    dim_pending_ = false;
  }
  if (!inside_ && !seen_text_) {
    // Before the reply's first visible character: a <think> here opens the reasoning.
    const size_t first = text.find_first_not_of(" \n\r\t");
    if (first == std::string::npos) {
      held_ = text;  // only whitespace so far
      return out;
    }
    const std::string_view rest = std::string_view(text).substr(first);
    if (partial_tag(rest, chat::k_think_open)) {
      held_ = text;
      return out;
    }
    seen_text_ = true;
    if (rest.substr(0, chat::k_think_open.size()) == chat::k_think_open) {
      out += emit(std::string_view(text).substr(0, first));
      open(out);
      out += emit(chat::k_think_open);
      text = text.substr(first + chat::k_think_open.size());
    }
  }
  if (!inside_) return out + emit(text);
  const size_t close_at = text.find(chat::k_think_close);
  if (close_at != std::string::npos) {
    out += emit(std::string_view(text).substr(0, close_at + chat::k_think_close.size()));
    close(out);
    return out + emit(std::string_view(text).substr(close_at + chat::k_think_close.size()));
  }
  // Hold back a tail that may be the start of "</think>".
  size_t keep = 0;
  for (size_t n = std::min(text.size(), chat::k_think_close.size() - 1); n > 0; --n) {
    if (partial_tag(std::string_view(text).substr(text.size() - n), chat::k_think_close)) {
      keep = n;
      break;
    }
  }
  held_ = text.substr(text.size() - keep);
  return out + emit(std::string_view(text).substr(0, text.size() - keep));
}

std::string ReasoningMarker::finish() {
  std::string out = emit(held_);
  held_.clear();
  if (inside_) close(out);
  return out;
}

}  // namespace kvc::app

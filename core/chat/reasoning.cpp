// Cutting a reply into its <think> reasoning and its answer.
#include "core/chat/reasoning.h"

namespace kvc::chat {
namespace {

std::string_view trim_newlines(std::string_view s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

ReasoningSplit split_reasoning(std::string_view reply) {
  ReasoningSplit out;
  // Leading whitespace before the tag (a SentencePiece space, a newline) does not count as answer.
  const size_t first = reply.find_first_not_of(" \n\r\t");
  const std::string_view body = first == std::string_view::npos ? std::string_view() : reply.substr(first);
  const bool opens = body.substr(0, k_think_open.size()) == k_think_open;
  const size_t close = reply.find(k_think_close);
  if (!opens && close == std::string_view::npos) {
    out.answer = std::string(reply);
    return out;
  }
  out.has_reasoning = true;
  const size_t begin = opens ? first + k_think_open.size() : 0;
  if (close == std::string_view::npos || close < begin) {
    out.open = true;
    out.reasoning = std::string(trim_newlines(reply.substr(begin)));
    return out;
  }
  out.reasoning = std::string(trim_newlines(reply.substr(begin, close - begin)));
  std::string_view answer = reply.substr(close + k_think_close.size());
  while (!answer.empty() && (answer.front() == '\n' || answer.front() == '\r')) answer.remove_prefix(1);
  out.answer = std::string(answer);
  return out;
}

}  // namespace kvc::chat

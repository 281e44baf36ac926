// Cutting a reply into its <think> reasoning and its answer.
#include "core/chat/reasoning.h"

namespace kvc::chat {
namespace {

std::string_view trim_newlines(std::string_view s) {
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

constexpr std::string_view k_channel = "<|channel|>";
constexpr std::string_view k_message = "<|message|>";
constexpr std::string_view k_start = "<|start|>";
constexpr std::string_view k_body_ends[] = {"<|end|>", "<|return|>", "<|call|>"};

// The length of the longest end of `s` that is a proper beginning of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// Harmony messages: [<|start|>ROLE]<|channel|>CHANNEL[ to=...][ TYPE]<|message|>BODY<|end|>, one after
// another. A header not finished yet adds nothing; an unfinished body is kept less a marker cut short
// unless the reply has finished.
ReasoningSplit split_harmony(std::string_view reply, bool finished) {
  ReasoningSplit out;
  size_t p = 0;
  while (p < reply.size()) {
    const size_t channel = reply.find(k_channel, p);
    if (channel == std::string_view::npos) break;
    const size_t header = channel + k_channel.size();
    const size_t message = reply.find(k_message, header);
    if (message == std::string_view::npos) break;
    const std::string_view name = reply.substr(header, message - header);
    const bool analysis = name.substr(0, name.find(' ')) == "analysis";
    const size_t body = message + k_message.size();
    size_t end = std::string_view::npos;
    size_t end_size = 0;
    for (const std::string_view e : k_body_ends) {
      const size_t at = reply.find(e, body);
      if (at < end) {
        end = at;
        end_size = e.size();
      }
    }
    std::string_view text = reply.substr(body, end == std::string_view::npos ? std::string_view::npos : end - body);
    if (end == std::string_view::npos && !finished) {
      size_t held = 0;
      for (const std::string_view e : k_body_ends) held = std::max(held, partial_suffix(text, e));
      text.remove_suffix(held);
    }
    std::string& to = analysis ? out.reasoning : out.answer;
    if (analysis) {
      if (out.has_reasoning && !text.empty()) to += "\n\n";
      out.has_reasoning = true;
    }
    to.append(text);
    out.open = analysis && end == std::string_view::npos;
    if (end == std::string_view::npos) break;
    p = end + end_size;
  }
  return out;
}

bool starts_with_part_of(std::string_view s, std::string_view marker) {
  if (s.size() >= marker.size()) return s.substr(0, marker.size()) == marker;
  return s.size() >= 2 && marker.substr(0, s.size()) == s;
}

// A reply still growing may be harmony while it starts with part of a marker; a finished one only
// with a whole marker.
bool harmony_reply(std::string_view reply, bool finished) {
  const size_t first = reply.find_first_not_of(" \n\r\t");
  if (first == std::string_view::npos) return false;
  const std::string_view body = reply.substr(first);
  if (finished) return body.starts_with(k_channel) || body.starts_with(k_start);
  return starts_with_part_of(body, k_channel) || starts_with_part_of(body, k_start);
}

}  // namespace

bool is_harmony_reply(std::string_view reply) { return harmony_reply(reply, false); }

ReasoningStream::Delta ReasoningStream::feed(std::string_view piece) {
  text_.append(piece);
  return advance(false);
}

ReasoningStream::Delta ReasoningStream::finish() { return advance(true); }

ReasoningStream::Delta ReasoningStream::advance(bool finished) {
  // Until the reply's start says whether it is written in channels ("<" alone could begin one),
  // nothing; a reply that is not (a model that ignores the format) is all answer, as it is.
  const size_t first = text_.find_first_not_of(" \n\r\t");
  if (!finished && (first == std::string::npos || text_.substr(first) == "<")) return {};
  ReasoningSplit s;
  if (harmony_reply(text_, finished)) {
    s = split_harmony(text_, finished);
  } else {
    s.answer = text_;
  }
  Delta d;
  if (s.reasoning.size() > reasoning_sent_) {
    d.reasoning = s.reasoning.substr(reasoning_sent_);
    reasoning_sent_ = s.reasoning.size();
  }
  if (s.answer.size() > answer_sent_) {
    d.answer = s.answer.substr(answer_sent_);
    answer_sent_ = s.answer.size();
  }
  return d;
}

ReasoningSplit split_reasoning(std::string_view reply, bool finished) {
  if (harmony_reply(reply, finished)) return split_harmony(reply, finished);
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

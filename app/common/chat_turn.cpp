// Building the token segment of a user turn, from the model's template where it runs, else from the family's segments.
#include "app/common/chat_turn.h"

#include <ctime>
#include <optional>
#include <utility>

#include "core/chat/reasoning.h"

namespace kvc::app {
namespace {

TurnSegment family_segment(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                           std::span<const chat::ChatMessage> turn, bool first_turn) {
  std::string user;  // a family renderer has no tool role: the turn's texts as one user message
  for (const chat::ChatMessage& m : turn) user += (user.empty() ? "" : "\n") + m.content;
  TurnSegment s;
  if (!first_turn) s.text = tmpl.assistant_suffix();
  s.text += tmpl.render_user_turn(first_turn ? system : "", user, first_turn);
  s.tokens = first_turn ? tok.encode(s.text, tok.wants_bos(), true) : tok.encode_continuation(s.text, true);
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// What the template writes after a reply's content when it closes the reply ("<|im_end|>\n"):
// the history rendered with the last reply replaced by a marker, cut after the marker.
std::string closing_text(const chat::ChatTemplate& tmpl, std::vector<chat::ChatMessage> messages,
                         const chat::RenderOptions& opt) {
  static const std::string marker = "\x01kvchat-reply\x01";
  messages.back().content = marker;
  messages.back().reasoning_content.reset();
  chat::RenderOptions closed = opt;
  closed.add_generation_prompt = false;
  auto r = tmpl.render_prompt(messages, closed);
  if (!r.ok()) return tmpl.assistant_suffix();
  const size_t at = r->rfind(marker);
  return at == std::string::npos ? tmpl.assistant_suffix() : r->substr(at + marker.size());
}

// The end of `prompt` (the generation prompt after `messages`, which end with a user message) that
// the template drops when it shows a reply there as an earlier one: found by rendering the
// conversation with a marker reply and a further user turn. "" when the template keeps it all.
std::string opening_of(const chat::ChatTemplate& tmpl, std::vector<chat::ChatMessage> messages,
                       const std::string& prompt, const chat::RenderOptions& opt) {
  static const std::string marker = "\x01kvchat-reply\x01";
  messages.emplace_back("assistant", marker);
  messages.emplace_back("user", "\x01kvchat-next\x01");
  auto marked = tmpl.render_prompt(messages, opt);
  if (!marked.ok()) return "";
  const size_t at = marked->find(marker);
  if (at == std::string::npos || at >= prompt.size() || marked->compare(0, at, prompt, 0, at) != 0) return "";
  return prompt.substr(at);
}

// When the template shows the last reply as its visible answer, right after the generation prompt
// it was generated from less that prompt's `opening` (the reply's: its tokens start the reply's in
// the stream): {the reply as shown, what follows it}, cut from `after` with the reply replaced by
// a marker. Nothing for a reply without reasoning and no opening, or any other rewrite.
std::optional<std::pair<std::string, std::string>> visible_reply(
    const chat::ChatTemplate& tmpl, std::vector<chat::ChatMessage> messages, std::span<const chat::ChatMessage> turn,
    const std::string& before, const std::string& opening, const std::string& after, const chat::RenderOptions& opt) {
  static const std::string marker = "\x01kvchat-reply\x01";
  const bool reasoning = chat::split_reasoning(messages.back().content).has_reasoning;
  const size_t n_shown = before.size() - opening.size();  // the prompt as the template keeps it
  if (after.compare(0, n_shown, before, 0, n_shown) != 0) return std::nullopt;
  messages.back().content = marker;
  messages.back().reasoning_content.reset();
  messages.insert(messages.end(), turn.begin(), turn.end());
  auto marked = tmpl.render_prompt(messages, opt);
  if (!marked.ok()) return std::nullopt;
  const size_t at = marked->find(marker);
  if (at == std::string::npos || at < n_shown || marked->compare(0, n_shown, before, 0, n_shown) != 0) {
    return std::nullopt;
  }
  // gpt-oss's template writes a header of its own before the reply's answer
  // ("<|channel|>final<|message|>"): the reply as shown starts with it.
  const bool header = at > n_shown;
  if (!reasoning && opening.empty() && !header) return std::nullopt;
  if (header && after.compare(n_shown, at - n_shown, *marked, n_shown, at - n_shown) != 0) return std::nullopt;
  const std::string tail = marked->substr(at + marker.size());
  if (after.size() < n_shown + tail.size() || after.compare(after.size() - tail.size(), tail.size(), tail) != 0) {
    return std::nullopt;
  }
  return std::pair{after.substr(n_shown, after.size() - n_shown - tail.size()), tail};
}

chat::RenderOptions render_options(const std::optional<std::string>& reasoning_effort,
                                   const std::string& tools_json = "") {
  chat::RenderOptions opt;
  opt.tools_json = tools_json;
  opt.reasoning_effort = reasoning_effort;
  const std::time_t t = std::time(nullptr);
  std::tm now{};
  localtime_r(&t, &now);
  opt.now = now;  // one date for every render of this turn
  return opt;
}

}  // namespace

Result<TurnSegment> build_user_turn(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                    std::string_view system, std::span<const chat::ChatMessage> history,
                                    std::string_view user, const std::optional<std::string>& reasoning_effort) {
  const chat::ChatMessage turn[] = {{"user", std::string(user)}};
  return build_turn(tok, tmpl, system, history, turn, reasoning_effort, "");
}

Result<TurnSegment> build_turn(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                               std::span<const chat::ChatMessage> history, std::span<const chat::ChatMessage> turn,
                               const std::optional<std::string>& reasoning_effort, const std::string& tools_json) {
  const bool first_turn = history.empty();
  if (!tmpl.runs_template()) return family_segment(tok, tmpl, system, turn, first_turn);

  const chat::RenderOptions opt = render_options(reasoning_effort, tools_json);
  std::vector<chat::ChatMessage> messages;
  if (!system.empty()) messages.emplace_back("system", std::string(system));
  messages.insert(messages.end(), history.begin(), history.end());
  std::vector<chat::ChatMessage> next = messages;
  next.insert(next.end(), turn.begin(), turn.end());
  auto after = tmpl.render_prompt(next, opt);
  if (!after.ok()) return after.error();

  TurnSegment s;
  const std::string opening_next = opening_of(tmpl, next, *after, opt);  // the new reply's
  // The reply's opening is cut off the segment (both are tokenized apart, as the engine sees them).
  auto cut_opening = [&] {
    if (opening_next.empty() || !s.text.ends_with(opening_next)) return;
    s.text.resize(s.text.size() - opening_next.size());
    s.opening_text = opening_next;
    s.opening_tokens = tok.encode_continuation(s.opening_text, true);
  };
  if (first_turn) {
    s.text = std::move(*after);
    s.exact = true;
    cut_opening();
    s.tokens = tok.encode(s.text, tok.wants_bos(), true);
    return s;
  }
  std::vector<chat::ChatMessage> before_reply(messages.begin(), messages.end() - 1);
  auto before = tmpl.render_prompt(before_reply, opt);
  if (!before.ok()) return before.error();
  const std::string opening = opening_of(tmpl, before_reply, *before, opt);  // the last reply's
  const std::string stream_text = *before + messages.back().content;
  if (starts_with(*after, stream_text)) {
    s.text = after->substr(stream_text.size());
    s.exact = true;
  } else if (auto visible = visible_reply(tmpl, messages, turn, *before, opening, *after, opt)) {
    // The template shows the reply as its answer, right after the generation prompt the reply
    // was generated from (less its opening): the reply's tokens, opening included, are replaced,
    // and the stream is the template's render.
    s.reply_text = std::move(visible->first);
    s.reply_tokens = tok.encode_continuation(s.reply_text, true);
    s.text = std::move(visible->second);
    s.exact = true;
  } else {
    // The template rewrites the last reply (drops its reasoning, trims it): keep it as generated,
    // close it as the template closes replies, then what the template adds for the new turn.
    chat::RenderOptions closed = opt;
    closed.add_generation_prompt = false;
    auto history_closed = tmpl.render_prompt(messages, closed);
    if (!history_closed.ok()) return history_closed.error();
    if (!starts_with(*after, *history_closed)) return family_segment(tok, tmpl, system, turn, false);
    s.text = closing_text(tmpl, messages, opt) + after->substr(history_closed->size());
  }
  cut_opening();
  s.tokens = tok.encode_continuation(s.text, true);
  return s;
}

ReplyOpening reply_opening(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                           std::span<const chat::ChatMessage> history,
                           const std::optional<std::string>& reasoning_effort) {
  ReplyOpening o;
  if (!tmpl.runs_template() || history.empty() || history.back().role != "user") return o;
  const chat::RenderOptions opt = render_options(reasoning_effort);
  std::vector<chat::ChatMessage> messages;
  if (!system.empty()) messages.emplace_back("system", std::string(system));
  messages.insert(messages.end(), history.begin(), history.end());
  auto prompt = tmpl.render_prompt(messages, opt);
  if (!prompt.ok()) return o;
  o.text = opening_of(tmpl, messages, *prompt, opt);
  if (!o.text.empty()) o.tokens = tok.encode_continuation(o.text, true);
  return o;
}

}  // namespace kvc::app

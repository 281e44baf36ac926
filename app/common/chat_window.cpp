// Assembling a turn's prompt from the window the overflow policy chose.
#include "app/common/chat_window.h"

#include <memory>

#include "app/common/chat_turn.h"
#include "core/util/assert.h"

namespace kvc::app {

namespace {

Result<std::vector<int32_t>> head_tokens(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                         std::string_view system, const StreamMessage& m) {
  auto seg = build_user_turn(tok, tmpl, system, {}, m.text);
  if (!seg.ok()) return seg.error();
  return std::move(seg->tokens);
}

}  // namespace

Result<std::vector<int32_t>> window_tokens(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                           std::string_view system, std::span<const StreamMessage> messages,
                                           size_t first) {
  std::vector<int32_t> out;
  if (messages.empty()) return out;
  KVC_ASSERT(first < messages.size());
  if (first > 0) {
    auto head = head_tokens(tok, tmpl, system, messages[first]);
    if (!head.ok()) return head.error();
    out = std::move(*head);
  } else {
    out.assign(messages[0].tokens.begin(), messages[0].tokens.end());
  }
  for (size_t i = first + 1; i < messages.size(); ++i)
    out.insert(out.end(), messages[i].tokens.begin(), messages[i].tokens.end());
  return out;
}

Status check_message_fits(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl, std::string_view system,
                          std::string_view text, int64_t n_ctx) {
  // Known too long from its length alone (Tokenizer::max_bytes_per_token): refused without
  // rendering and tokenizing megabytes.
  if (const size_t per_token = tok.max_bytes_per_token(); per_token > 0) {
    const size_t n_bytes = system.size() + text.size();
    const size_t at_least = (n_bytes + per_token - 1) / per_token;
    if (at_least >= static_cast<size_t>(n_ctx)) {
      return make_error(ErrorCode::invalid_argument, "this message takes at least " + std::to_string(at_least) +
                                                         " tokens with the system prompt, more than the context of " +
                                                         std::to_string(n_ctx) + " tokens (it is " +
                                                         std::to_string(text.size()) +
                                                         " bytes): shorten it, or raise the context size");
    }
  }
  auto head = head_tokens(tok, tmpl, system, StreamMessage{"user", text, {}});
  if (!head.ok()) return head.error();
  const auto n = static_cast<int64_t>(head->size());
  if (n < n_ctx) return {};
  // The overflow policy's own words (core/chat/context_window.cpp), whichever refuses it.
  return make_error(ErrorCode::invalid_argument, "this message takes " + std::to_string(n) +
                                                     " tokens with the system prompt, more than the context of " +
                                                     std::to_string(n_ctx) +
                                                     " tokens: shorten it, or raise the context size");
}

Result<ChatWindow> plan_chat_window(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                    std::string_view system, std::span<const StreamMessage> messages,
                                    const chat::WindowPolicy& policy, std::optional<size_t> cut) {
  std::vector<int64_t> n_tokens;
  std::unique_ptr<bool[]> can_begin(new bool[messages.size()]);
  for (size_t i = 0; i < messages.size(); ++i) {
    n_tokens.push_back(static_cast<int64_t>(messages[i].tokens.size()));
    can_begin[i] = messages[i].role == "user";
  }
  chat::WindowInput in;
  in.n_tokens = n_tokens;
  in.can_begin = std::span<const bool>(can_begin.get(), messages.size());
  in.n_head_tokens = [&](size_t i) -> Result<int64_t> {
    auto h = head_tokens(tok, tmpl, system, messages[i]);
    if (!h.ok()) return h.error();
    return static_cast<int64_t>(h->size());
  };
  auto plan = cut ? chat::plan_window(policy, in, *cut) : chat::replay_window(policy, in);
  if (!plan.ok()) return plan.error();
  auto prompt = window_tokens(tok, tmpl, system, messages, plan->first);
  if (!prompt.ok()) return prompt.error();
  ChatWindow w;
  w.prompt = std::move(*prompt);
  w.first = plan->first;
  w.moved = plan->moved || (cut && *cut != plan->first);
  return w;
}

}  // namespace kvc::app

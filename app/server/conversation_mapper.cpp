// ConversationMapper: chat messages to prompt tokens, earlier answers mapped to their sampled ids.
#include "app/server/conversation_mapper.h"

#include "core/kv/block_key.h"

namespace kvc::server {

Result<app::TurnSegment> render_user_segment(const tokenizer::Tokenizer& tok, const chat::ChatTemplate& tmpl,
                                             std::string_view system, std::span<const chat::ChatMessage> history,
                                             std::span<const chat::ChatMessage> turn,
                                             const std::optional<std::string>& reasoning_effort,
                                             const std::string& tools_json) {
  return app::build_turn(tok, tmpl, system, history, turn, reasoning_effort, tools_json);
}

int64_t ConversationMapper::conversation_id(std::span<const chat::ChatMessage> messages) {
  std::string_view system, first_user;
  size_t i = 0;
  if (!messages.empty() && messages[0].role == "system") system = messages[i++].content;
  for (; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") {
      first_user = messages[i].content;
      break;
    }
  }
  // Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
  std::string bytes = std::to_string(system.size()) + ":" + std::string(system) + std::to_string(first_user.size()) +
                      ":" + std::string(first_user);
  const kv::BlockKey h = kv::hash_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  const auto id = static_cast<int64_t>(h.hi >> 1);
  return id == 0 ? 1 : id;
}

Result<MappedPrompt> ConversationMapper::map(std::span<const chat::ChatMessage> messages,
                                             const std::optional<std::string>& reasoning_effort,
                                             const std::string& tools_json) const {
  if (messages.empty() || messages.back().role == "assistant" ||
      (messages.size() == 1 && messages[0].role == "system")) {
    return make_error(ErrorCode::invalid_argument,
                      "the last message must be a user (or tool) message: it is what the reply answers");
  }
  const tokenizer::Tokenizer& tok = m_.tokenizer();
  const chat::ChatTemplate& tmpl = m_.chat_template();
  MappedPrompt out;
  out.conversation = conversation_id(messages);
  std::string_view system;
  size_t i = 0;
  if (messages[0].role == "system") system = messages[i++].content;
  std::vector<chat::ChatMessage> history;  // the user and assistant messages rendered so far
  bool user_open = false;                  // a user turn was rendered and its reply has not come yet
  std::vector<int32_t> opening;            // that reply's opening (DeepSeek-R1's "<think>\n"): its tokens start it
  auto user_turn = [&](std::span<const chat::ChatMessage> turn) -> Status {
    auto seg = render_user_segment(tok, tmpl, system, history, turn, reasoning_effort, tools_json);
    if (!seg.ok()) return seg.error();
    if (seg->reply_tokens && !out.messages.empty() && out.messages.back().role == "assistant") {
      // The template shows the previous answer without its reasoning: so does the prompt.
      MappedMessage& answer = out.messages.back();
      out.tokens.resize(answer.begin);
      out.tokens.insert(out.tokens.end(), seg->reply_tokens->begin(), seg->reply_tokens->end());
      answer.end = out.tokens.size();
    }
    std::string text;  // the turn's texts (a tool turn's results, one a line), for the context window
    for (const chat::ChatMessage& m : turn) text += (text.empty() ? "" : "\n") + m.content;
    out.messages.push_back({"user", std::move(text), out.tokens.size(), out.tokens.size() + seg->tokens.size()});
    out.tokens.insert(out.tokens.end(), seg->tokens.begin(), seg->tokens.end());
    opening = std::move(seg->opening_tokens);
    history.insert(history.end(), turn.begin(), turn.end());
    user_open = true;
    return {};
  };
  for (; i < messages.size(); ++i) {
    const chat::ChatMessage& msg = messages[i];
    if (msg.role != "assistant") {
      // Two user messages in a row: the first one's reply is empty, as ChatTemplate::render
      // writes it (the next segment starts with the suffix that closes it). Tool messages, and a
      // user message after them, join the turn they follow.
      size_t end = i + 1;
      while (end < messages.size() && messages[end].role != "assistant" &&
             (messages[end].role == "tool" || messages[end - 1].role == "tool")) {
        ++end;
      }
      if (user_open) history.emplace_back("assistant", "");
      KVC_TRY(user_turn(messages.subspan(i, end - i)));
      i = end - 1;
      continue;
    }
    if (!user_open) {  // an answer with no question before it
      const chat::ChatMessage empty[] = {{"user", ""}};
      KVC_TRY(user_turn(empty));
    }
    history.push_back(msg);
    ++out.n_answers;
    const size_t begin = out.tokens.size();
    out.tokens.insert(out.tokens.end(), opening.begin(), opening.end());
    std::optional<std::vector<int32_t>> recalled;
    if (msg.tool_calls.empty()) recalled = answers_.recall(storage::AnswerStore::key_of(out.tokens, msg.content));
    if (auto& ids = recalled) {
      ++out.n_answers_recalled;
      out.tokens.insert(out.tokens.end(), ids->begin(), ids->end());
    } else {
      const std::vector<int32_t> ids_afresh = tok.encode_continuation(msg.content, false);
      out.tokens.insert(out.tokens.end(), ids_afresh.begin(), ids_afresh.end());
    }
    out.messages.push_back({"assistant", msg.content, begin, out.tokens.size()});
    user_open = false;
  }
  // The prompt ends with the reply's opening (kept with the last user message for the window).
  out.tokens.insert(out.tokens.end(), opening.begin(), opening.end());
  out.messages.back().end = out.tokens.size();
  return out;
}

void ConversationMapper::remember(std::span<const int32_t> prompt, std::string_view text,
                                  std::span<const int32_t> ids) const {
  answers_.remember(storage::AnswerStore::key_of(prompt, text), ids);
}

}  // namespace kvc::server

// The chat controller's context window: each turn's prompt under the overflow policy, its cut kept in the store.
#include <algorithm>

#include "app/gui/chat_controller.h"

namespace kvc::app {

namespace {

std::vector<StreamMessage> stream_messages(const std::vector<storage::Message>& path) {
  std::vector<StreamMessage> out;
  out.reserve(path.size());
  for (const auto& m : path) out.push_back({storage::to_string(m.role), m.text, m.tokens});
  return out;
}

// The stored cut's index on the path; nullopt when it is set but on another branch.
std::optional<size_t> cut_index(const std::vector<storage::Message>& path, int64_t cut_id) {
  if (cut_id == 0) return size_t{0};
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i].id == cut_id) return i;
  }
  return std::nullopt;
}

}  // namespace

Result<ChatWindow> ChatController::plan_turn(int64_t conversation_id, int64_t user_id, int64_t max_tokens,
                                             int64_t& first_id) {
  auto path = store_->path_to(user_id);
  if (!path.ok()) return history_error(path.error());
  auto c = store_->conversation(conversation_id);
  if (!c.ok()) return c.error();
  const std::vector<StreamMessage> messages = stream_messages(*path);
  chat::WindowPolicy policy;
  policy.n_ctx = state_.model.n_ctx;
  policy.n_reserve = chat::answer_reserve(policy.n_ctx, max_tokens);
  // A cut on another branch (after an edit before it, or a branch switch): the policy is
  // replayed over this branch's history, which puts the cut where its turns would have.
  auto w = plan_chat_window(model_->tokenizer(), model_->chat_template(), state_.chat.system_prompt, messages, policy,
                            cut_index(*path, c->context_cut));
  if (!w.ok()) return w.error();
  first_id = w->first == 0 ? 0 : (*path)[w->first].id;
  return w;
}

void ChatController::keep_cut(int64_t conversation_id, int64_t first_id) {
  auto c = store_->conversation(conversation_id);
  if (!c.ok()) return (void)fail(c.error());
  if (c->context_cut == first_id) return;
  if (auto st = store_->set_context_cut(conversation_id, first_id); !st.ok()) fail(st.error());
}

Result<std::vector<int32_t>> ChatController::window_until(int64_t message_id) {
  auto stream = stream_until(message_id);
  if (!stream.ok() || !store_ || message_id == 0 || !model_) return stream;
  auto c = store_->conversation(state_.chat.conversation_id);
  auto path = store_->path_to(message_id);
  if (!c.ok() || !path.ok()) return stream;
  const std::optional<size_t> at = cut_index(*path, c->context_cut);
  if (!at || *at == 0 || (*path)[*at].role != storage::Role::user) return stream;
  const std::vector<StreamMessage> messages = stream_messages(*path);
  auto w = window_tokens(model_->tokenizer(), model_->chat_template(), state_.chat.system_prompt, messages, *at);
  return w.ok() ? std::move(*w) : std::move(*stream);
}

void ChatController::show_cut(const storage::Conversation& c) {
  ui::ChatState& chat = state_.chat;
  chat.context_first_id = 0;
  chat.n_outside_context = 0;
  if (c.context_cut == 0) return;
  const auto it = std::find_if(chat.messages.begin(), chat.messages.end(),
                               [&](const ui::MessageView& m) { return m.id == c.context_cut; });
  if (it == chat.messages.end()) return;
  chat.context_first_id = c.context_cut;
  chat.n_outside_context = it - chat.messages.begin();
}

}  // namespace kvc::app

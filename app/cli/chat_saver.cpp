// ChatSaver: kvchat-cli chat's conversation written to the conversations store as the app writes its own.
#include "app/cli/chat_saver.h"

#include <system_error>

#include "core/util/clock.h"
#include "core/util/utf8.h"
#include "storage/data_dir.h"

namespace kvc::cli {

namespace {

constexpr int64_t k_flush_interval_us = 250'000;

std::string title_from(const std::string& text) {
  std::string t(utf8_prefix(text, 48));
  for (char& c : t) c = (c == '\n' || c == '\t') ? ' ' : c;
  if (t.size() < text.size()) t += "...";
  return t.empty() ? "New chat" : t;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec1, ec2;
  const auto ca = std::filesystem::weakly_canonical(a, ec1), cb = std::filesystem::weakly_canonical(b, ec2);
  return ec1 || ec2 ? a == b : ca == cb;
}

}  // namespace

Result<std::unique_ptr<ChatSaver>> ChatSaver::open(const std::filesystem::path& dir) {
  KVC_TRY(storage::ensure_dir(dir));
  auto lock = storage::DataDirLock::acquire(dir, "kvchat-cli chat");
  if (!lock) return lock.error();
  auto store = storage::ConversationStore::open_in(dir);
  if (!store) return store.error();
  if ((*store)->read_only()) {
    return make_error(ErrorCode::io, "conversations cannot be saved: " + (*store)->read_only_reason());
  }
  if (auto n = (*store)->mark_interrupted(); !n) return n.error();
  return std::unique_ptr<ChatSaver>(new ChatSaver(std::move(*lock), std::move(*store)));
}

Result<ChatSaver::Resumed> ChatSaver::resume(int64_t id, const std::string& model_path,
                                             const tokenizer::Tokenizer& tok) {
  auto c = store_->conversation(id);
  if (!c) return c.error();
  if (!c->settings.model_path.empty() && !same_file(c->settings.model_path, model_path)) {
    return make_error(ErrorCode::invalid_argument,
                      "conversation " + std::to_string(id) + " was answered by " + c->settings.model_path +
                          ", and its stored token ids are that model's: resume it with -m " + c->settings.model_path);
  }
  Resumed r;
  r.conversation = *c;
  if (c->context_cut == 0) r.cut = 0;
  if (c->active_leaf != 0) {
    auto path = store_->path_to(c->active_leaf);
    if (!path) return path.error();
    for (storage::Message& m : *path) {
      if (m.role == storage::Role::system) continue;  // the system prompt is the conversation's setting
      if (m.role == storage::Role::user && m.tokens.empty() && !m.text.empty()) {
        return make_error(ErrorCode::unsupported, "conversation " + std::to_string(id) +
                                                      " was answered by a remote server: its messages have no token "
                                                      "ids for a local model to go on from");
      }
      // An answer cut off by a kill has text but no ids: the model sees what the text says.
      if (m.state == storage::MessageState::interrupted && m.tokens.empty() && !m.text.empty()) {
        m.tokens = tok.encode_continuation(m.text, false);
        KVC_TRY(store_->set_message_tokens(m.id, m.tokens));
      }
      if (m.id == c->context_cut) r.cut = r.lines.size();
      r.lines.push_back({storage::to_string(m.role), std::move(m.text), std::move(m.tokens), m.id});
    }
  }
  conversation_ = id;
  leaf_ = c->active_leaf;
  return r;
}

Result<int64_t> ChatSaver::add_user(const std::string& text, std::span<const int32_t> tokens,
                                    const storage::ConversationSettings& settings) {
  if (conversation_ == 0) {
    auto c = store_->create_conversation(title_from(text), settings);
    if (!c) return c.error();
    conversation_ = *c;
    leaf_ = 0;
  }
  auto id = store_->append_message(conversation_, leaf_, storage::Role::user, text, tokens);
  if (!id) return id.error();
  leaf_ = *id;
  return id;
}

Status ChatSaver::begin_answer() {
  auto id = store_->begin_assistant_message(conversation_, leaf_);
  if (!id) return id.error();
  answer_ = *id;
  pending_.clear();
  last_flush_us_ = now_us();
  return {};
}

Status ChatSaver::stream(std::string_view piece) {
  pending_ += piece;
  if (pending_.empty() || now_us() - last_flush_us_ < k_flush_interval_us) return {};
  last_flush_us_ = now_us();
  KVC_TRY(store_->append_streamed(answer_, pending_, {}));
  pending_.clear();
  return {};
}

Result<int64_t> ChatSaver::end_answer(std::span<const int32_t> tokens) {
  KVC_TRY(store_->append_streamed(answer_, pending_, tokens));
  pending_.clear();
  KVC_TRY(store_->finish_message(answer_));
  leaf_ = answer_;
  return answer_;
}

Status ChatSaver::set_tokens(int64_t message_id, std::span<const int32_t> tokens) {
  return store_->set_message_tokens(message_id, tokens);
}

Status ChatSaver::set_cut(int64_t first_message_id) { return store_->set_context_cut(conversation_, first_message_id); }

void ChatSaver::new_conversation() {
  conversation_ = 0;
  leaf_ = 0;
}

}  // namespace kvc::cli

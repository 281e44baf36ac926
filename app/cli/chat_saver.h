// kvchat-cli chat's conversation kept in DATA_DIR/kvchat.db as the app keeps its own, so that `export` and the app
// see it and `chat --resume ID` goes on with it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/model.h"
#include "core/util/result.h"
#include "storage/conversation_store.h"
#include "storage/data_dir_lock.h"

namespace kvc::cli {

// One message of the chat as it keeps them: its role, text and the ids it added to the stream
// (a user message: its turn segment; a reply: its opening and the sampled ids), and its row.
struct ChatLine {
  std::string role;
  std::string text;
  std::vector<int32_t> tokens;
  int64_t id = 0;  // its message id in kvchat.db; 0: not saved
};

// Writes as the app's controller does: the user message durable before its answer is generated,
// the answer appended as it streams (at most every 250 ms, without a sync) and finished with its
// ids. One writer: it holds the data directory's lock (storage/data_dir_lock.h) for its life.
class ChatSaver {
 public:
  // Locks DIR and opens DIR/kvchat.db (creating both); answers a killed run left streaming are
  // marked interrupted, as the app does at start. Errors: another kvchat holds DIR
  // (invalid_argument, naming it), the store cannot be opened for writing (read-only: io).
  static Result<std::unique_ptr<ChatSaver>> open(const std::filesystem::path& dir);

  // What opening found that the user should know (a damaged kvchat.db moved aside); "" if nothing.
  const std::string& notice() const { return store_->notice(); }

  // Conversation `id`'s active branch, to go on with: the next messages extend it. Errors: no
  // such conversation; it was answered by another model file than `model_path` (its ids are
  // that model's tokenizer's); a question without ids (answered by a remote server).
  struct Resumed {
    storage::Conversation conversation;
    std::vector<ChatLine> lines;  // user and assistant messages, root first
    // Where the model's view begins (a ChatLine index); nullopt: the stored cut is on another
    // branch, and the overflow policy is replayed over this one's history.
    std::optional<size_t> cut;
  };
  Result<Resumed> resume(int64_t id, const std::string& model_path, const tokenizer::Tokenizer& tok);

  // The next user message, under the last one; the first after open() or new_conversation()
  // starts a conversation titled after it with `settings`. Returns its id.
  Result<int64_t> add_user(const std::string& text, std::span<const int32_t> tokens,
                           const storage::ConversationSettings& settings);
  Status begin_answer();
  // Streamed text of the answer: written every 250 ms (the rest by end_answer).
  Status stream(std::string_view piece);
  // The answer's last text and its ids; returns its id.
  Result<int64_t> end_answer(std::span<const int32_t> tokens);
  Status set_tokens(int64_t message_id, std::span<const int32_t> tokens);
  Status set_cut(int64_t first_message_id);  // the window's first message (0: the whole path)
  void new_conversation();                   // /reset: the next message starts another
  int64_t conversation() const { return conversation_; }

 private:
  ChatSaver(storage::DataDirLock lock, std::unique_ptr<storage::ConversationStore> store)
      : lock_(std::move(lock)), store_(std::move(store)) {}

  storage::DataDirLock lock_;
  std::unique_ptr<storage::ConversationStore> store_;
  int64_t conversation_ = 0;  // 0: none yet
  int64_t leaf_ = 0;          // the last message saved
  int64_t answer_ = 0;        // the answer streaming
  std::string pending_;       // its text not yet written
  int64_t last_flush_us_ = 0;
};

}  // namespace kvc::cli

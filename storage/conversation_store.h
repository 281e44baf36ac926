// ConversationStore: conversations, their message trees and exact token ids, in SQLite.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/conversation.h"
#include "storage/database.h"

namespace kvc::storage {

struct SearchHit {
  Conversation conversation;
  int64_t message_id = 0;  // 0: the title matched
  std::string snippet;     // matched text with [brackets] around the hits
};

// What a read around damaged pages reached (conversation_salvage.cpp): the rows read, and
// whether anything could not be.
template <class T>
struct Salvaged {
  std::vector<T> rows;
  bool complete = true;  // false: part of what was asked for could not be read
  std::string problem;   // the first read error, when !complete
};

// Durability: DIR/kvchat.db in WAL mode. Every call that returns success has committed.
// Commits that create or change what the user wrote (conversations, user messages, edits,
// finish) sync to disk (synchronous=FULL); streamed assistant deltas commit without a sync
// (synchronous=NORMAL), which survives a crash of kvchat and costs a fraction of a sync: a
// power loss may lose the last deltas of an answer, never a user message. Thread-safe.
class ConversationStore {
 public:
  struct Options {
    std::function<int64_t()> now_ms;  // clock; wall clock when empty
  };

  static Result<std::unique_ptr<ConversationStore>> open(const std::filesystem::path& db_path, Options options = {});
  // The file as it is, for reading only: never created, migrated, moved or written. In a folder
  // where SQLite cannot make the -shm file a WAL database needs, it is read without it
  // (immutable; notice() says when a -wal's newest commits are left unseen). A file cut short
  // opens with SQLite's size check off, to read the pages that remain (notice() says so). A file
  // that is not a database at all is an invalid_file error; a damaged one opens (see verify()).
  static Result<std::unique_ptr<ConversationStore>> open_read_only(const std::filesystem::path& db_path,
                                                                   Options options = {});
  // DIR/kvchat.db, creating DIR. A file that is damaged or not a database (it fails to open or
  // PRAGMA quick_check) is renamed aside to kvchat.db.damaged-YYYYMMDD-HHMMSS (with its -wal and
  // -shm) and a new database starts; notice() then says so. Any other failure (no permission, a
  // full disk, a newer schema) is an error and leaves the file alone. Where DIR or kvchat.db
  // cannot be written (a read-only mount, no permission), the existing file opens read-only
  // (open_read_only) and read_only_reason() says why; a damaged one is then left where it is and
  // notice() says so; with no file there it is an error.
  static Result<std::unique_ptr<ConversationStore>> open_in(const std::filesystem::path& data_dir,
                                                            Options options = {});
  // What opening had to do or found that the user should know (a damaged file moved aside); "" if nothing.
  const std::string& notice() const { return notice_; }
  // Why open_in opened the store read-only ("the data directory /d cannot be written (it is on
  // a read-only file system)"); "" when it may write. Every write then fails.
  const std::string& read_only_reason() const { return read_only_reason_; }
  bool read_only() const { return db_.read_only(); }
  // PRAGMA quick_check: ok, or an invalid_file error quoting SQLite's first finding.
  Status verify();

  Result<int64_t> create_conversation(std::string_view title, const ConversationSettings& settings);
  Result<Conversation> conversation(int64_t id);
  // Most recently updated first; [offset, offset + limit).
  Result<std::vector<Conversation>> list_conversations(int64_t offset, int64_t limit);
  // Titles (substring) and message text (full-text, every word must occur); recent first.
  Result<std::vector<SearchHit>> search(std::string_view query, int64_t limit);
  Status rename_conversation(int64_t id, std::string_view title);
  Status update_settings(int64_t id, const ConversationSettings& settings);
  // Deletes the conversation and all its messages.
  Status delete_conversation(int64_t id);

  // Appends a complete user (or system) message under `parent_id` (0: a root) and makes it the
  // active leaf. Durable when this returns.
  Result<int64_t> append_message(int64_t conversation_id, int64_t parent_id, Role role, std::string_view text,
                                 std::span<const int32_t> tokens);
  // Starts an empty assistant message in state streaming; it becomes the active leaf.
  Result<int64_t> begin_assistant_message(int64_t conversation_id, int64_t parent_id);
  // Appends streamed text and token ids to a streaming message (committed before returning).
  Status append_streamed(int64_t message_id, std::string_view text, std::span<const int32_t> tokens);
  Status finish_message(int64_t message_id);
  // Marks every message still streaming as interrupted (MessageState::interrupted): answers cut
  // off when the process that streamed them was killed or crashed. Only the data directory's
  // writer (the one holding its DataDirLock) may call it, when it starts. Returns how many.
  Result<int64_t> mark_interrupted();
  // The ids the model sees of a finished message from now on, its text unchanged: a reply whose
  // reasoning the chat template leaves out of later prompts (app/common/chat_turn.h).
  Status set_message_tokens(int64_t message_id, std::span<const int32_t> tokens);
  // An edit of an earlier message: a new sibling (same parent, same role) holding the new text;
  // it becomes the active leaf. The original and its replies stay.
  Result<int64_t> edit_message(int64_t message_id, std::string_view text, std::span<const int32_t> tokens);
  Status set_active_leaf(int64_t conversation_id, int64_t message_id);
  // Where the model's view of the conversation begins (Conversation::context_cut); 0 clears it.
  Status set_context_cut(int64_t conversation_id, int64_t message_id);

  Result<Message> message(int64_t id);
  // Root first, `leaf_id` last.
  Result<std::vector<Message>> path_to(int64_t leaf_id);
  // All children of the message's parent (the message included), oldest first.
  Result<std::vector<Message>> siblings(int64_t message_id);
  // Follows the newest child down from `message_id` to a leaf (what to show after switching branch).
  Result<int64_t> newest_leaf_under(int64_t message_id);

  // The token stream of every branch: one per leaf, its messages' ids concatenated root to leaf
  // (what the KV cache saw). Of one conversation, or of every conversation but `except_id`.
  Result<std::vector<std::vector<int32_t>>> token_streams(int64_t conversation_id);
  Result<std::vector<std::vector<int32_t>>> token_streams_except(int64_t except_id);

  Result<std::string> export_json(int64_t conversation_id, int64_t leaf_id);
  Result<std::string> export_markdown(int64_t conversation_id, int64_t leaf_id);

  // Reads around damage, for an export of a damaged database (conversation_salvage.cpp).
  // Every conversation whose row can be read, most recently updated first: a scan that meets a
  // damaged page goes on from the table's other end, and the ids between are looked up one by
  // one. A path (root first, `leaf_id` last) read message by message from its leaf up to the
  // first one that cannot be read: rows holds the readable part nearest the leaf.
  Salvaged<Conversation> readable_conversations();
  Salvaged<Message> readable_path(int64_t leaf_id);

  const std::filesystem::path& path() const { return db_.path(); }

 private:
  ConversationStore(Database db, Options options) : db_(std::move(db)), options_(std::move(options)) {}
  int64_t now() const;
  Status set_sync_locked(SyncMode mode);
  Result<Message> message_locked(int64_t id);
  Result<Conversation> conversation_locked(int64_t id);
  Status touch_conversation_locked(int64_t id, int64_t now_ms);
  Result<int64_t> insert_message_locked(int64_t conversation_id, int64_t parent_id, Role role, std::string_view text,
                                        std::span<const int32_t> tokens, MessageState state);
  Result<std::vector<Message>> path_locked(int64_t leaf_id);
  Result<std::vector<std::vector<int32_t>>> streams_locked(std::string_view where, int64_t id);
  Result<std::pair<Conversation, std::vector<Message>>> export_path_locked(int64_t conversation_id, int64_t leaf_id);

  std::mutex mu_;
  Database db_;
  Options options_;
  SyncMode sync_ = SyncMode::full;
  std::string notice_;
  std::string read_only_reason_;
};

}  // namespace kvc::storage

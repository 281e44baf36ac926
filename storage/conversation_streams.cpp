// ConversationStore's token streams: every root-to-leaf path of the message trees, as token ids, and a message's ids
// replaced.
#include <map>

#include "storage/conversation_store.h"

namespace kvc::storage {

Result<std::vector<std::vector<int32_t>>> ConversationStore::token_streams(int64_t conversation_id) {
  std::lock_guard lock(mu_);
  return streams_locked("conversation_id = ?", conversation_id);
}

Result<std::vector<std::vector<int32_t>>> ConversationStore::token_streams_except(int64_t except_id) {
  std::lock_guard lock(mu_);
  return streams_locked("conversation_id <> ?", except_id);
}

Status ConversationStore::set_message_tokens(int64_t message_id, std::span<const int32_t> tokens) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto st = db_.prepare("UPDATE messages SET tokens = ? WHERE id = ? AND state = 'complete'");
  if (!st) return st.error();
  const std::vector<uint8_t> blob = tokens_to_blob(tokens);
  KVC_TRY(st->bind_blob(1, blob).bind(2, message_id).run());
  if (db_.changes() == 0) {
    return make_error(ErrorCode::invalid_argument,
                      "message " + std::to_string(message_id) + " does not exist or is still streaming");
  }
  return {};
}

Result<std::vector<std::vector<int32_t>>> ConversationStore::streams_locked(std::string_view where, int64_t id) {
  auto st = db_.prepare("SELECT id, parent_id, tokens FROM messages WHERE " + std::string(where) + " ORDER BY id");
  if (!st) return st.error();
  st->bind(1, id);
  std::map<int64_t, std::vector<int64_t>> children;  // parent id (0: roots) -> child ids, oldest first
  std::map<int64_t, std::vector<int32_t>> tokens;    // message id -> its ids
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    const int64_t m = st->column_int64(0);
    children[st->column_int64(1)].push_back(m);  // NULL parent reads as 0
    tokens[m] = tokens_from_blob(st->column_blob(2));
  }
  // Depth first from every root; a leaf closes a stream. Parents precede children in id order,
  // and a child's parent is in the same conversation, so every message is reached once.
  std::vector<std::vector<int32_t>> streams;
  std::vector<int32_t> path;
  struct Frame {
    int64_t id;
    size_t path_size;  // path length before this message's ids
  };
  std::vector<Frame> stack;
  if (auto roots = children.find(0); roots != children.end()) {
    for (auto it = roots->second.rbegin(); it != roots->second.rend(); ++it) stack.push_back({*it, 0});
  }
  while (!stack.empty()) {
    const Frame f = stack.back();
    stack.pop_back();
    path.resize(f.path_size);
    const auto& t = tokens[f.id];
    path.insert(path.end(), t.begin(), t.end());
    auto kids = children.find(f.id);
    if (kids == children.end()) {
      streams.push_back(path);
      continue;
    }
    for (auto it = kids->second.rbegin(); it != kids->second.rend(); ++it) stack.push_back({*it, path.size()});
  }
  return streams;
}

}  // namespace kvc::storage

// ConversationStore's reads around damaged pages: what an export of a damaged kvchat.db can still reach.
#include <algorithm>
#include <set>

#include "storage/conversation_rows.h"
#include "storage/conversation_store.h"

namespace kvc::storage {

namespace {

// Ids between a forward and a backward scan are looked up one by one, at most this many; with
// no backward scan, lookups stop after this many ids in a row that hold no conversation.
constexpr int64_t k_max_lookups = 1'000'000;
constexpr int64_t k_max_misses = 10'000;

// Reads rows of `sql` (k_conversation_cols first) into `out` until done (true) or an error
// (false, problem set). `after` binds the statement's one parameter.
bool scan(Database& db, const std::string& sql, int64_t after, std::vector<Conversation>& out, std::string& problem) {
  auto st = db.prepare(sql);
  if (!st) {
    problem = st.error().message;
    return false;
  }
  st->bind(1, after);
  for (;;) {
    auto row = st->step();
    if (!row) {
      problem = row.error().message;
      return false;
    }
    if (!*row) return true;
    out.push_back(read_conversation(*st));
  }
}

}  // namespace

Salvaged<Conversation> ConversationStore::readable_conversations() {
  std::lock_guard lock(mu_);
  Salvaged<Conversation> out;
  const std::string cols = std::string("SELECT ") + k_conversation_cols + " FROM conversations c";
  // Forward by id (the table's own order: no index is needed to read it).
  std::vector<Conversation> forward;
  if (scan(db_, cols + " WHERE c.id > ? ORDER BY c.id", 0, forward, out.problem)) {
    out.rows = std::move(forward);
  } else {
    out.complete = false;
    const int64_t low = forward.empty() ? 0 : forward.back().id;
    // Backward from the end, down to where the forward scan stopped.
    std::vector<Conversation> backward;
    std::string back_problem;
    const bool back_done = scan(db_, cols + " WHERE c.id > ? ORDER BY c.id DESC", low, backward, back_problem);
    const int64_t high = back_done ? low : (backward.empty() ? -1 : backward.back().id);
    // The ids between, each looked up on its own: a lookup reads only the pages on its way.
    auto one = db_.prepare(cols + " WHERE c.id = ?");
    if (one) {
      int64_t n_misses = 0;
      for (int64_t id = low + 1, n = 0; n < k_max_lookups && (high < 0 ? n_misses < k_max_misses : id < high);
           ++id, ++n) {
        one->reset();
        one->bind(1, id);
        auto row = one->step();
        if (row.ok() && *row) {
          forward.push_back(read_conversation(*one));
          n_misses = 0;
        } else {
          ++n_misses;
        }
      }
    }
    out.rows = std::move(forward);
    out.rows.insert(out.rows.end(), backward.begin(), backward.end());
  }
  std::set<int64_t> seen;
  std::erase_if(out.rows, [&](const Conversation& c) { return !seen.insert(c.id).second; });
  std::sort(out.rows.begin(), out.rows.end(), [](const Conversation& a, const Conversation& b) {
    return a.updated_ms != b.updated_ms ? a.updated_ms > b.updated_ms : a.id > b.id;
  });
  return out;
}

Salvaged<Message> ConversationStore::readable_path(int64_t leaf_id) {
  std::lock_guard lock(mu_);
  Salvaged<Message> out;
  if (auto whole = path_locked(leaf_id); whole.ok()) {
    out.rows = std::move(whole.value());
    return out;
  }
  // Message by message up from the leaf: each a lookup by id.
  std::set<int64_t> seen;  // a damaged parent pointing back down must not loop
  for (int64_t id = leaf_id; id != 0;) {
    auto m = seen.insert(id).second ? message_locked(id)
                                    : Result<Message>(make_error(ErrorCode::invalid_file, "its messages form a loop"));
    if (!m) {
      out.complete = false;
      out.problem = m.error().message;
      break;
    }
    id = m->parent_id;
    out.rows.push_back(std::move(m.value()));
  }
  std::reverse(out.rows.begin(), out.rows.end());
  return out;
}

}  // namespace kvc::storage

// Conversations store on SQLite: schema, message tree operations, search and export.
#include "storage/conversation_store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "storage/conversation_rows.h"
#include "storage/data_dir.h"
#include "storage/migrations.h"

namespace kvc::storage {

namespace {

const Migration k_schema[] = {
    {1,
     "CREATE TABLE conversations("
     "  id INTEGER PRIMARY KEY,"
     "  title TEXT NOT NULL,"
     "  created_ms INTEGER NOT NULL,"
     "  updated_ms INTEGER NOT NULL,"
     "  system_prompt TEXT NOT NULL,"
     "  model_path TEXT NOT NULL,"
     "  model_name TEXT NOT NULL,"
     "  temperature REAL NOT NULL,"
     "  top_k INTEGER NOT NULL,"
     "  top_p REAL NOT NULL,"
     "  min_p REAL NOT NULL,"
     "  repeat_penalty REAL NOT NULL,"
     "  seed INTEGER NOT NULL,"
     "  max_tokens INTEGER NOT NULL,"
     "  active_leaf INTEGER REFERENCES messages(id) ON DELETE SET NULL"
     ");"
     "CREATE INDEX conversations_by_update ON conversations(updated_ms);"
     "CREATE TABLE messages("
     "  id INTEGER PRIMARY KEY,"
     "  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
     "  parent_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,"  // NULL: a root
     "  role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),"
     "  text TEXT NOT NULL,"
     "  tokens BLOB NOT NULL,"  // int32 little-endian
     "  created_ms INTEGER NOT NULL,"
     "  state TEXT NOT NULL CHECK (state IN ('complete', 'streaming'))"
     ");"
     "CREATE INDEX messages_by_parent ON messages(conversation_id, parent_id);"
     "CREATE INDEX messages_by_child ON messages(parent_id);"
     "CREATE VIRTUAL TABLE messages_fts USING fts5(text, content='messages', content_rowid='id');"
     "CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN"
     "  INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);"
     "END;"
     "CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN"
     "  INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);"
     "END;"
     "CREATE TRIGGER messages_au AFTER UPDATE OF text ON messages BEGIN"
     "  INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);"
     "  INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);"
     "END;"},
    // Where the model's view of the conversation begins (the context overflow policy's cut):
    // kept so that a restart serves the same window from the KV cache. NULL: the whole path.
    {2, "ALTER TABLE conversations ADD COLUMN context_cut INTEGER REFERENCES messages(id) ON DELETE SET NULL;"},
    // 1: an answer cut off by a kill or crash while it streamed (MessageState::interrupted); its
    // state is 'complete' then, so that it takes no more chunks. Set by mark_interrupted().
    {3, "ALTER TABLE messages ADD COLUMN interrupted INTEGER NOT NULL DEFAULT 0;"},
    // ConversationSettings::reasoning_effort; '' in conversations made before it.
    {4, "ALTER TABLE conversations ADD COLUMN reasoning_effort TEXT NOT NULL DEFAULT '';"},
};

void bind_settings(Statement& st, int first, const ConversationSettings& s) {
  st.bind(first, std::string_view(s.system_prompt))
      .bind(first + 1, std::string_view(s.model_path))
      .bind(first + 2, std::string_view(s.model_name))
      .bind(first + 3, static_cast<double>(s.generation.sampling.temperature))
      .bind(first + 4, int64_t{s.generation.sampling.top_k})
      .bind(first + 5, static_cast<double>(s.generation.sampling.top_p))
      .bind(first + 6, static_cast<double>(s.generation.sampling.min_p))
      .bind(first + 7, static_cast<double>(s.generation.sampling.repeat_penalty))
      .bind(first + 8, s.generation.sampling.seed)
      .bind(first + 9, s.generation.max_tokens)
      .bind(first + 10, std::string_view(s.reasoning_effort));
}

Error no_conversation(int64_t id) {
  return make_error(ErrorCode::invalid_argument, "no conversation with id " + std::to_string(id));
}
Error no_message(int64_t id) {
  return make_error(ErrorCode::invalid_argument, "no message with id " + std::to_string(id));
}

// Each word of the query as an FTS5 string, so that no input is a syntax error.
std::string fts_query(std::string_view q) {
  std::string out;
  size_t i = 0;
  while (i < q.size()) {
    while (i < q.size() && std::isspace(static_cast<unsigned char>(q[i]))) ++i;
    const size_t begin = i;
    while (i < q.size() && !std::isspace(static_cast<unsigned char>(q[i]))) ++i;
    if (begin == i) break;
    if (!out.empty()) out += ' ';
    out += '"';
    for (char c : q.substr(begin, i - begin)) {
      if (c == '"') out += '"';
      out += c;
    }
    out += '"';
  }
  return out;
}

std::string like_pattern(std::string_view q) {
  std::string out = "%";
  for (char c : q) {
    if (c == '%' || c == '_' || c == '\\') out += '\\';
    out += c;
  }
  return out + "%";
}

}  // namespace

Result<std::unique_ptr<ConversationStore>> ConversationStore::open(const std::filesystem::path& db_path,
                                                                   Options options) {
  DatabaseOptions opt;
  opt.what = "conversations database";
  opt.sync = SyncMode::full;
  auto db = open_versioned(db_path, opt, k_schema);
  if (!db) return db.error();
  return std::unique_ptr<ConversationStore>(new ConversationStore(std::move(db.value()), std::move(options)));
}

Result<std::unique_ptr<ConversationStore>> ConversationStore::open_read_only(const std::filesystem::path& db_path,
                                                                             Options options) {
  DatabaseOptions opt;
  opt.what = "conversations database";
  opt.mode = OpenMode::read_only;
  auto db = open_versioned(db_path, opt, k_schema);
  std::string notice;
  if (!db && db.error().code == ErrorCode::io && std::filesystem::exists(db_path)) {
    // A WAL database needs its -shm (and -wal) beside it, which a read-only folder cannot get:
    // read the file as it is, without them.
    opt.immutable = true;
    db = open_versioned(db_path, opt, k_schema);
    std::error_code ec;
    if (db && std::filesystem::file_size(db_path.string() + "-wal", ec) > 0 && !ec) {
      notice = db_path.string() +
               "-wal holds changes that cannot be read in a read-only folder without its -shm "
               "file: the newest messages may be missing";
    }
  }
  if (!db && db.error().code == ErrorCode::invalid_file) {
    // A file cut short fails SQLite's check of its size against its header: the pages that
    // remain can still be read past that check.
    const Error first = db.error();
    opt.read_damaged = true;
    db = open_versioned(db_path, opt, k_schema);
    if (!db) return first;
    notice = "kvchat.db is damaged (" + first.message + "); reading what remains of it";
  }
  if (!db) return db.error();
  auto store = std::unique_ptr<ConversationStore>(new ConversationStore(std::move(db.value()), std::move(options)));
  store->notice_ = std::move(notice);
  return store;
}

namespace {

// Why `path` cannot be written ("a read-only file system", "permission denied"); "" when it can.
std::string unwritable(const std::filesystem::path& path) {
  if (::access(path.c_str(), W_OK) == 0 || errno == ENOENT) return "";
  return errno == EROFS ? std::string("it is on a read-only file system") : std::string(std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<ConversationStore>> ConversationStore::open_in(const std::filesystem::path& data_dir,
                                                                      Options options) {
  KVC_TRY(ensure_dir(data_dir));
  const std::filesystem::path path = data_dir / "kvchat.db";
  // A folder or file kvchat may not write: the conversations are opened read-only, to be read.
  std::string why = unwritable(data_dir);
  std::string what = "the data directory " + data_dir.string();
  if (why.empty()) {
    why = unwritable(path);
    what = path.string();
  }
  if (!why.empty()) {
    if (!std::filesystem::exists(path)) {
      return make_error(ErrorCode::io, "cannot create conversations database " + path.string() + ": " + what +
                                           " cannot be written (" + why +
                                           "); make it writable or choose another --data-dir");
    }
    auto store = open_read_only(path, options);
    if (!store) return store.error();
    (*store)->read_only_reason_ = what + " cannot be written (" + why + ")";
    // Damage cannot be moved aside here: what can be read is shown, and the user is told.
    if (Status checked = (*store)->db_.verify(); !checked.ok()) {
      std::string& n = (*store)->notice_;
      n = checked.error().message + (n.empty() ? "" : "; " + n);
    }
    return store;
  }
  auto store = open(path, options);
  Error damage;
  if (store.ok()) {
    Status checked = (*store)->db_.verify();
    if (checked.ok()) return store;
    if (checked.error().code != ErrorCode::invalid_file) return checked.error();
    damage = checked.error();
  } else if (store.error().code == ErrorCode::invalid_file) {
    damage = store.error();
  } else {
    return store.error();
  }
  store = Error{};  // closes the damaged file before it moves

  const int64_t now_ms =
      options.now_ms
          ? options.now_ms()
          : std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  const std::time_t t = static_cast<std::time_t>(now_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::filesystem::path aside = path;
  aside += std::string(".damaged-") + stamp;
  for (int n = 2; std::filesystem::exists(aside); ++n) {
    aside = path;
    aside += std::string(".damaged-") + stamp + "-" + std::to_string(n);
  }
  std::error_code ec;
  std::filesystem::rename(path, aside, ec);
  if (ec) {
    return make_error(ErrorCode::io, damage.message + "; moving it aside to " + aside.string() + " failed (" +
                                         ec.message() + "): move or delete it yourself, or choose another --data-dir");
  }
  for (const char* suffix : {"-wal", "-shm"}) {
    std::filesystem::path from = path, to = aside;
    from += suffix;
    to += suffix;
    if (std::filesystem::exists(from, ec)) std::filesystem::rename(from, to, ec);
  }
  auto fresh = open(path, std::move(options));
  if (!fresh) return fresh.error();
  (*fresh)->notice_ = damage.message + ". It was moved to " + aside.string() +
                      " (kept as it was, for recovery) and a new, empty conversations database was started.";
  return fresh;
}

Status ConversationStore::verify() {
  std::lock_guard lock(mu_);
  return db_.verify();
}

int64_t ConversationStore::now() const {
  if (options_.now_ms) return options_.now_ms();
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Status ConversationStore::set_sync_locked(SyncMode mode) {
  if (mode == sync_) return {};
  KVC_TRY(db_.exec(mode == SyncMode::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  sync_ = mode;
  return {};
}

Result<int64_t> ConversationStore::create_conversation(std::string_view title, const ConversationSettings& settings) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto st = db_.prepare(
      "INSERT INTO conversations(title, created_ms, updated_ms, system_prompt, model_path, model_name, temperature,"
      " top_k, top_p, min_p, repeat_penalty, seed, max_tokens, reasoning_effort)"
      " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st) return st.error();
  const int64_t t = now();
  st->bind(1, title).bind(2, t).bind(3, t);
  bind_settings(*st, 4, settings);
  KVC_TRY(st->run());
  return db_.last_insert_rowid();
}

Result<Conversation> ConversationStore::conversation_locked(int64_t id) {
  auto st = db_.prepare(std::string("SELECT ") + k_conversation_cols + " FROM conversations c WHERE c.id = ?");
  if (!st) return st.error();
  st->bind(1, id);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return no_conversation(id);
  return read_conversation(*st);
}

Result<Conversation> ConversationStore::conversation(int64_t id) {
  std::lock_guard lock(mu_);
  return conversation_locked(id);
}

Result<std::vector<Conversation>> ConversationStore::list_conversations(int64_t offset, int64_t limit) {
  std::lock_guard lock(mu_);
  auto st = db_.prepare(std::string("SELECT ") + k_conversation_cols +
                        " FROM conversations c ORDER BY c.updated_ms DESC, c.id DESC LIMIT ? OFFSET ?");
  if (!st) return st.error();
  st->bind(1, limit).bind(2, offset);
  std::vector<Conversation> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(read_conversation(*st));
  }
}

Result<std::vector<SearchHit>> ConversationStore::search(std::string_view query, int64_t limit) {
  std::lock_guard lock(mu_);
  std::vector<SearchHit> hits;
  const std::string fts = fts_query(query);
  if (fts.empty()) return hits;
  auto titles = db_.prepare(std::string("SELECT ") + k_conversation_cols +
                            " FROM conversations c WHERE c.title LIKE ? ESCAPE '\\'");
  if (!titles) return titles.error();
  titles->bind(1, std::string_view(like_pattern(query)));
  for (;;) {
    auto row = titles->step();
    if (!row) return row.error();
    if (!*row) break;
    hits.push_back({read_conversation(*titles), 0, ""});
  }
  auto texts = db_.prepare(std::string("SELECT ") + k_conversation_cols +
                           ", m.id, snippet(messages_fts, 0, '[', ']', '...', 12) FROM messages_fts"
                           " JOIN messages m ON m.id = messages_fts.rowid"
                           " JOIN conversations c ON c.id = m.conversation_id"
                           " WHERE messages_fts MATCH ? ORDER BY m.id");
  if (!texts) return texts.error();
  texts->bind(1, std::string_view(fts));
  for (;;) {
    auto row = texts->step();
    if (!row) return row.error();
    if (!*row) break;
    hits.push_back({read_conversation(*texts), texts->column_int64(k_n_conversation_cols),
                    texts->column_text(k_n_conversation_cols + 1)});
  }
  std::stable_sort(hits.begin(), hits.end(), [](const SearchHit& a, const SearchHit& b) {
    if (a.conversation.updated_ms != b.conversation.updated_ms)
      return a.conversation.updated_ms > b.conversation.updated_ms;
    return a.conversation.id > b.conversation.id;
  });
  if (static_cast<int64_t>(hits.size()) > limit) hits.resize(static_cast<size_t>(std::max<int64_t>(0, limit)));
  return hits;
}

Status ConversationStore::rename_conversation(int64_t id, std::string_view title) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto st = db_.prepare("UPDATE conversations SET title = ?, updated_ms = ? WHERE id = ?");
  if (!st) return st.error();
  KVC_TRY(st->bind(1, title).bind(2, now()).bind(3, id).run());
  if (db_.changes() == 0) return no_conversation(id);
  return {};
}

Status ConversationStore::update_settings(int64_t id, const ConversationSettings& settings) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto st = db_.prepare(
      "UPDATE conversations SET system_prompt = ?, model_path = ?, model_name = ?, temperature = ?, top_k = ?,"
      " top_p = ?, min_p = ?, repeat_penalty = ?, seed = ?, max_tokens = ?, reasoning_effort = ?, updated_ms = ?"
      " WHERE id = ?");
  if (!st) return st.error();
  bind_settings(*st, 1, settings);
  KVC_TRY(st->bind(12, now()).bind(13, id).run());
  if (db_.changes() == 0) return no_conversation(id);
  return {};
}

Status ConversationStore::delete_conversation(int64_t id) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  // The leaf pointer first, so that the cascade through messages has nothing to update.
  auto clear = db_.prepare("UPDATE conversations SET active_leaf = NULL WHERE id = ?");
  if (!clear) return clear.error();
  KVC_TRY(clear->bind(1, id).run());
  auto st = db_.prepare("DELETE FROM conversations WHERE id = ?");
  if (!st) return st.error();
  KVC_TRY(st->bind(1, id).run());
  if (db_.changes() == 0) return no_conversation(id);
  return tx->commit();
}

Status ConversationStore::touch_conversation_locked(int64_t id, int64_t now_ms) {
  auto st = db_.prepare("UPDATE conversations SET updated_ms = ? WHERE id = ?");
  if (!st) return st.error();
  return st->bind(1, now_ms).bind(2, id).run();
}

Result<int64_t> ConversationStore::insert_message_locked(int64_t conversation_id, int64_t parent_id, Role role,
                                                         std::string_view text, std::span<const int32_t> tokens,
                                                         MessageState state) {
  auto conv = conversation_locked(conversation_id);
  if (!conv) return conv.error();
  if (parent_id != 0) {
    auto parent = message_locked(parent_id);
    if (!parent) return parent.error();
    if (parent->conversation_id != conversation_id) {
      return make_error(ErrorCode::invalid_argument,
                        "message " + std::to_string(parent_id) + " belongs to another conversation");
    }
  }
  auto st = db_.prepare(
      "INSERT INTO messages(conversation_id, parent_id, role, text, tokens, created_ms, state)"
      " VALUES(?, ?, ?, ?, ?, ?, ?)");
  if (!st) return st.error();
  const int64_t t = now();
  st->bind(1, conversation_id);
  if (parent_id != 0)
    st->bind(2, parent_id);
  else
    st->bind_null(2);
  const auto blob = tokens_to_blob(tokens);
  st->bind(3, std::string_view(to_string(role))).bind(4, text).bind_blob(5, blob).bind(6, t);
  st->bind(7, std::string_view(to_string(state)));
  KVC_TRY(st->run());
  const int64_t id = db_.last_insert_rowid();
  auto leaf = db_.prepare("UPDATE conversations SET active_leaf = ?, updated_ms = ? WHERE id = ?");
  if (!leaf) return leaf.error();
  KVC_TRY(leaf->bind(1, id).bind(2, t).bind(3, conversation_id).run());
  return id;
}

Result<int64_t> ConversationStore::append_message(int64_t conversation_id, int64_t parent_id, Role role,
                                                  std::string_view text, std::span<const int32_t> tokens) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto id = insert_message_locked(conversation_id, parent_id, role, text, tokens, MessageState::complete);
  if (!id) return id.error();
  KVC_TRY(tx->commit());
  return id;
}

Result<int64_t> ConversationStore::begin_assistant_message(int64_t conversation_id, int64_t parent_id) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto id = insert_message_locked(conversation_id, parent_id, Role::assistant, "", {}, MessageState::streaming);
  if (!id) return id.error();
  KVC_TRY(tx->commit());
  return id;
}

Status ConversationStore::append_streamed(int64_t message_id, std::string_view text, std::span<const int32_t> tokens) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::normal));
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto sel = db_.prepare("SELECT tokens, state, conversation_id FROM messages WHERE id = ?");
  if (!sel) return sel.error();
  sel->bind(1, message_id);
  auto row = sel->step();
  if (!row) return row.error();
  if (!*row) return no_message(message_id);
  if (sel->column_text(1) != "streaming") {
    return make_error(ErrorCode::invalid_argument, "message " + std::to_string(message_id) +
                                                       " is finished; streamed text goes to a streaming message");
  }
  std::vector<uint8_t> blob(sel->column_blob(0).begin(), sel->column_blob(0).end());
  const int64_t conversation_id = sel->column_int64(2);
  sel->reset();
  const auto more = tokens_to_blob(tokens);
  blob.insert(blob.end(), more.begin(), more.end());
  auto upd = db_.prepare("UPDATE messages SET text = text || ?, tokens = ? WHERE id = ?");
  if (!upd) return upd.error();
  KVC_TRY(upd->bind(1, text).bind_blob(2, blob).bind(3, message_id).run());
  KVC_TRY(touch_conversation_locked(conversation_id, now()));
  return tx->commit();
}

Result<int64_t> ConversationStore::mark_interrupted() {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  KVC_TRY(db_.exec("UPDATE messages SET state = 'complete', interrupted = 1 WHERE state = 'streaming'"));
  return db_.changes();
}

Status ConversationStore::finish_message(int64_t message_id) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));  // this sync also makes every earlier streamed delta durable
  auto st = db_.prepare("UPDATE messages SET state = 'complete' WHERE id = ?");
  if (!st) return st.error();
  KVC_TRY(st->bind(1, message_id).run());
  if (db_.changes() == 0) return no_message(message_id);
  return {};
}

Result<int64_t> ConversationStore::edit_message(int64_t message_id, std::string_view text,
                                                std::span<const int32_t> tokens) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto original = message_locked(message_id);
  if (!original) return original.error();
  auto id = insert_message_locked(original->conversation_id, original->parent_id, original->role, text, tokens,
                                  MessageState::complete);
  if (!id) return id.error();
  KVC_TRY(tx->commit());
  return id;
}

Status ConversationStore::set_active_leaf(int64_t conversation_id, int64_t message_id) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::full));
  auto m = message_locked(message_id);
  if (!m) return m.error();
  if (m->conversation_id != conversation_id) {
    return make_error(ErrorCode::invalid_argument,
                      "message " + std::to_string(message_id) + " belongs to another conversation");
  }
  auto st = db_.prepare("UPDATE conversations SET active_leaf = ? WHERE id = ?");
  if (!st) return st.error();
  return st->bind(1, message_id).bind(2, conversation_id).run();
}

Status ConversationStore::set_context_cut(int64_t conversation_id, int64_t message_id) {
  std::lock_guard lock(mu_);
  KVC_TRY(set_sync_locked(SyncMode::normal));  // a lost cut is recomputed: no sync needed
  if (message_id != 0) {
    auto m = message_locked(message_id);
    if (!m) return m.error();
    if (m->conversation_id != conversation_id) {
      return make_error(ErrorCode::invalid_argument,
                        "message " + std::to_string(message_id) + " belongs to another conversation");
    }
  }
  auto st = db_.prepare("UPDATE conversations SET context_cut = ? WHERE id = ?");
  if (!st) return st.error();
  if (message_id != 0)
    st->bind(1, message_id);
  else
    st->bind_null(1);
  st->bind(2, conversation_id);
  KVC_TRY(st->run());
  if (db_.changes() == 0) return no_conversation(conversation_id);
  return {};
}

Result<Message> ConversationStore::message_locked(int64_t id) {
  auto st = db_.prepare(std::string("SELECT ") + k_message_cols + " FROM messages m WHERE m.id = ?");
  if (!st) return st.error();
  st->bind(1, id);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return no_message(id);
  return read_message(*st);
}

Result<Message> ConversationStore::message(int64_t id) {
  std::lock_guard lock(mu_);
  return message_locked(id);
}

Result<std::vector<Message>> ConversationStore::path_locked(int64_t leaf_id) {
  auto st = db_.prepare(std::string("WITH RECURSIVE chain(id, depth) AS (SELECT ?, 0 UNION ALL"
                                    " SELECT p.parent_id, chain.depth + 1 FROM messages p JOIN chain ON p.id = chain.id"
                                    " WHERE p.parent_id IS NOT NULL)"
                                    " SELECT ") +
                        k_message_cols + " FROM chain JOIN messages m ON m.id = chain.id ORDER BY chain.depth DESC");
  if (!st) return st.error();
  st->bind(1, leaf_id);
  std::vector<Message> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(read_message(*st));
  }
  if (out.empty()) return no_message(leaf_id);
  return out;
}

Result<std::vector<Message>> ConversationStore::path_to(int64_t leaf_id) {
  std::lock_guard lock(mu_);
  return path_locked(leaf_id);
}

Result<std::vector<Message>> ConversationStore::siblings(int64_t message_id) {
  std::lock_guard lock(mu_);
  auto m = message_locked(message_id);
  if (!m) return m.error();
  auto st = db_.prepare(std::string("SELECT ") + k_message_cols +
                        " FROM messages m WHERE m.conversation_id = ? AND m.parent_id IS ? ORDER BY m.id");
  if (!st) return st.error();
  st->bind(1, m->conversation_id);
  if (m->parent_id != 0)
    st->bind(2, m->parent_id);
  else
    st->bind_null(2);
  std::vector<Message> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(read_message(*st));
  }
}

Result<int64_t> ConversationStore::newest_leaf_under(int64_t message_id) {
  std::lock_guard lock(mu_);
  auto m = message_locked(message_id);
  if (!m) return m.error();
  auto st = db_.prepare("SELECT id FROM messages WHERE parent_id = ? ORDER BY id DESC LIMIT 1");
  if (!st) return st.error();
  int64_t id = message_id;
  for (;;) {
    st->bind(1, id);
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) return id;
    id = st->column_int64(0);
    st->reset();
  }
}

// The conversation and the path from its root to `leaf_id` (empty when leaf_id is 0).
Result<std::pair<Conversation, std::vector<Message>>> ConversationStore::export_path_locked(int64_t conversation_id,
                                                                                            int64_t leaf_id) {
  auto c = conversation_locked(conversation_id);
  if (!c) return c.error();
  std::vector<Message> path;
  if (leaf_id != 0) {
    auto p = path_locked(leaf_id);
    if (!p) return p.error();
    path = std::move(p.value());
    if (path.back().conversation_id != conversation_id) {
      return make_error(ErrorCode::invalid_argument,
                        "message " + std::to_string(leaf_id) + " belongs to another conversation");
    }
  }
  return std::pair{std::move(c.value()), std::move(path)};
}

Result<std::string> ConversationStore::export_json(int64_t conversation_id, int64_t leaf_id) {
  std::lock_guard lock(mu_);
  auto cp = export_path_locked(conversation_id, leaf_id);
  if (!cp) return cp.error();
  return storage::export_json(cp->first, cp->second);
}

Result<std::string> ConversationStore::export_markdown(int64_t conversation_id, int64_t leaf_id) {
  std::lock_guard lock(mu_);
  auto cp = export_path_locked(conversation_id, leaf_id);
  if (!cp) return cp.error();
  return storage::export_markdown(cp->first, cp->second);
}

}  // namespace kvc::storage

// AnswerStore: an LRU of answers' token ids in memory, written through to SQLite.
#include "storage/answer_store.h"

#include "storage/migrations.h"

namespace kvc::storage {

namespace {

constexpr Migration k_steps[] = {
    {1,
     "CREATE TABLE answers(key TEXT PRIMARY KEY NOT NULL, ids BLOB NOT NULL, last_use INTEGER NOT NULL) WITHOUT ROWID;"
     "CREATE INDEX answers_by_use ON answers(last_use);"},
};

}  // namespace

Result<std::unique_ptr<AnswerStore>> AnswerStore::open(const std::filesystem::path& file, const AnswerStoreOptions& o) {
  std::unique_ptr<AnswerStore> s(new AnswerStore(o));
  if (file.empty()) return s;
  DatabaseOptions dbo;
  dbo.sync = SyncMode::normal;  // WAL: a crash keeps every committed answer
  dbo.what = "answer token database";
  auto db = open_versioned(file, dbo, k_steps);
  if (!db.ok()) return db.error();
  s->db_.emplace(std::move(*db));
  KVC_TRY(s->load());
  return s;
}

AnswerStore::~AnswerStore() = default;

kv::BlockKey AnswerStore::key_of(std::span<const int32_t> context, std::string_view text) {
  const kv::BlockKey seed = kv::chain_key({}, context);
  return kv::hash_bytes(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), seed);
}

// The most recently used rows that fit the bounds; the rest are deleted from the file.
Status AnswerStore::load() {
  auto st = db_->prepare("SELECT key, ids, last_use FROM answers ORDER BY last_use DESC");
  if (!st.ok()) return st.error();
  int64_t oldest_kept = -1;
  for (;;) {
    auto row = st->step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    const kv::BlockKey key = kv::BlockKey::from_hex(st->column_text(0));
    std::vector<int32_t> ids = tokens_from_blob(st->column_blob(1));
    const auto last_use = static_cast<uint64_t>(st->column_int64(2));
    if (key.is_null() || map_.count(key)) continue;
    if (static_cast<int64_t>(lru_.size()) >= options_.max_answers ||
        n_tokens_ + static_cast<int64_t>(ids.size()) > options_.max_tokens) {
      break;
    }
    n_tokens_ += static_cast<int64_t>(ids.size());
    clock_ = std::max(clock_, last_use);
    oldest_kept = static_cast<int64_t>(last_use);
    lru_.push_back(Entry{key, std::move(ids)});
    map_[key] = std::prev(lru_.end());
  }
  st->reset();
  auto del = db_->prepare("DELETE FROM answers WHERE last_use < ?");
  if (!del.ok()) return del.error();
  return del->bind(1, oldest_kept).run();
}

void AnswerStore::note_write_error(const Error& e) { warning_ = e.message; }

void AnswerStore::write_locked(const Entry& e) {
  if (!db_) return;
  auto st = db_->prepare("INSERT OR REPLACE INTO answers(key, ids, last_use) VALUES(?, ?, ?)");
  if (!st.ok()) return note_write_error(st.error());
  const std::vector<uint8_t> blob = tokens_to_blob(e.ids);
  if (Status r = st->bind(1, e.key.hex()).bind_blob(2, blob).bind(3, static_cast<int64_t>(clock_)).run(); !r.ok()) {
    note_write_error(r.error());
  }
}

void AnswerStore::evict_locked() {
  while (!lru_.empty() &&
         (static_cast<int64_t>(lru_.size()) > options_.max_answers || n_tokens_ > options_.max_tokens)) {
    const Entry& e = lru_.back();
    if (db_) {
      auto st = db_->prepare("DELETE FROM answers WHERE key = ?");
      if (!st.ok()) {
        note_write_error(st.error());
      } else if (Status r = st->bind(1, e.key.hex()).run(); !r.ok()) {
        note_write_error(r.error());
      }
    }
    n_tokens_ -= static_cast<int64_t>(e.ids.size());
    map_.erase(e.key);
    lru_.pop_back();
  }
}

void AnswerStore::remember(const kv::BlockKey& key, std::span<const int32_t> ids) {
  if (static_cast<int64_t>(ids.size()) > options_.max_tokens) return;
  std::lock_guard lock(mu_);
  if (auto it = map_.find(key); it != map_.end()) {
    n_tokens_ -= static_cast<int64_t>(it->second->ids.size());
    lru_.erase(it->second);
    map_.erase(it);
  }
  lru_.push_front(Entry{key, std::vector<int32_t>(ids.begin(), ids.end())});
  map_[key] = lru_.begin();
  n_tokens_ += static_cast<int64_t>(ids.size());
  ++clock_;
  write_locked(lru_.front());
  evict_locked();
}

std::optional<std::vector<int32_t>> AnswerStore::recall(const kv::BlockKey& key) {
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  ++clock_;
  if (db_) {
    auto st = db_->prepare("UPDATE answers SET last_use = ? WHERE key = ?");
    if (!st.ok()) {
      note_write_error(st.error());
    } else if (Status r = st->bind(1, static_cast<int64_t>(clock_)).bind(2, key.hex()).run(); !r.ok()) {
      note_write_error(r.error());
    }
  }
  return lru_.front().ids;
}

int64_t AnswerStore::size() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(lru_.size());
}

std::string AnswerStore::warning() const {
  std::lock_guard lock(mu_);
  return warning_;
}

Status AnswerStore::check_invariants() const {
  std::lock_guard lock(mu_);
  if (lru_.size() != map_.size()) return make_error(ErrorCode::internal, "answer store: LRU and map sizes differ");
  int64_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    auto m = map_.find(it->key);
    if (m == map_.end() || m->second != it)
      return make_error(ErrorCode::internal, "answer store: an LRU entry is not mapped");
    n += static_cast<int64_t>(it->ids.size());
  }
  if (n != n_tokens_) return make_error(ErrorCode::internal, "answer store: token count is off");
  if (static_cast<int64_t>(lru_.size()) > options_.max_answers || n_tokens_ > options_.max_tokens) {
    return make_error(ErrorCode::internal, "answer store: over its bounds");
  }
  return {};
}

}  // namespace kvc::storage

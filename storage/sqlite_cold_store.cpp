// The cold KV tier: an in-memory index mirrored in SQLite, payloads in files or BLOBs, and a
// storage thread that writes queued blocks in batched transactions.
#include "storage/sqlite_cold_store.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_set>

#include "core/kv/kv_cache.h"
#include "core/util/assert.h"
#include "core/util/thread_name.h"
#include "storage/data_dir.h"
#include "storage/migrations.h"

namespace kvc::storage {

namespace {

constexpr int64_t k_format_raw = 1;  // payload bytes exactly as put() received them

const Migration k_schema[] = {
    {1,
     "CREATE TABLE blocks("
     "  key BLOB PRIMARY KEY NOT NULL,"  // 16 bytes: hi then lo, big-endian
     "  parent BLOB NOT NULL,"
     "  fingerprint BLOB NOT NULL,"
     "  format INTEGER NOT NULL,"
     "  n_bytes INTEGER NOT NULL,"
     "  checksum BLOB NOT NULL,"         // XXH3-128 of the payload, same encoding as key
     "  last_use INTEGER NOT NULL,"      // logical clock; 0 (written by older releases) goes first
     "  payload_rowid INTEGER NOT NULL"  // > 0: payloads.id; 0: a file in kv_blocks/
     ") WITHOUT ROWID;"
     "CREATE TABLE payloads(id INTEGER PRIMARY KEY, data BLOB NOT NULL);"},
    // Which model file each fingerprint came from: blocks of a model deleted from disk go first.
    {2,
     "CREATE TABLE models("
     "  fingerprint BLOB PRIMARY KEY NOT NULL,"
     "  path TEXT NOT NULL,"
     "  file_bytes INTEGER NOT NULL"
     ") WITHOUT ROWID;"},
};

}  // namespace

SqliteColdStore::SqliteColdStore(std::filesystem::path dir, const ColdStoreOptions& options)
    : dir_(std::move(dir)), options_(options), files_(dir_ / "kv_blocks") {
  stats_.capacity_bytes = options.capacity_bytes;
}

Result<std::unique_ptr<SqliteColdStore>> SqliteColdStore::open(const std::filesystem::path& dir,
                                                               const ColdStoreOptions& options) {
  std::unique_ptr<SqliteColdStore> store(new SqliteColdStore(dir, options));
  DatabaseOptions db_opt;
  db_opt.what = "KV cache database";
  db_opt.sync = SyncMode::normal;  // a cache: a power loss may lose the last blocks, never consistency
  db_opt.max_bytes = options.max_db_bytes;
  db_opt.page_size = options.placement == PayloadPlacement::blob ? 65536 : 0;

  std::string why_read_only;
  if (!options.read_only) {
    Status made = ensure_dir(dir);
    if (made.ok()) {
      auto w = open_versioned(store->db_path(), db_opt, k_schema);
      if (w) {
        store->writer_db_ = std::move(w.value());
      } else {
        if (w.error().code == ErrorCode::unsupported) return w.error();  // newer schema: leave it alone
        why_read_only = w.error().message;
      }
    } else {
      why_read_only = made.error().message;
    }
  }
  DatabaseOptions ro = db_opt;
  ro.mode = store->writer_db_ ? OpenMode::read_write : OpenMode::read_only;
  auto r = open_versioned(store->db_path(), ro, k_schema);
  if (!r) return why_read_only.empty() ? r.error() : make_error(ErrorCode::io, why_read_only);
  store->reader_db_ = std::move(r.value());

  KVC_TRY(store->load_index());
  if (!store->writer_db_) {
    store->stats_.healthy = false;
    store->stats_.warning = "cold KV cache " + dir.string() + " is read-only" +
                            (why_read_only.empty() ? "" : " (" + why_read_only + ")") +
                            "; blocks already on disk are still used, new ones stay in RAM";
  } else {
    if (options.placement == PayloadPlacement::files || !store->index_.empty()) {
      std::unordered_set<kv::BlockKey, kv::BlockKeyHash> in_files;
      for (const auto& [k, m] : store->index_) {
        if (m.payload_rowid == 0) in_files.insert(k);
      }
      store->extra_.n_orphans_removed = store->files_.remove_orphans(in_files);
    }
    store->writer_ = std::thread([s = store.get()] {
      set_thread_name("kvc-coldwrite");
      s->writer_loop();
    });
  }
  return store;
}

SqliteColdStore::~SqliteColdStore() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

Status SqliteColdStore::load_index() {
  // Fingerprints of model files that are gone (or were replaced by a file of another size).
  std::set<kv::BlockKey> gone;
  {
    auto models = reader_db_->prepare("SELECT fingerprint, path, file_bytes FROM models");
    if (!models) return models.error();
    for (;;) {
      auto row = models->step();
      if (!row) return row.error();
      if (!*row) break;
      const std::string path = models->column_text(1);
      const int64_t n_bytes = models->column_int64(2);
      const bool present = options_.model_present ? options_.model_present(path, n_bytes) : [&] {
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        return !ec && static_cast<int64_t>(size) == n_bytes;
      }();
      if (!present) gone.insert(key_from_blob(models->column_blob(0)));
    }
  }
  auto st = reader_db_->prepare("SELECT key, n_bytes, checksum, last_use, payload_rowid, fingerprint FROM blocks");
  if (!st) return st.error();
  std::lock_guard lock(mu_);
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    Meta m;
    const kv::BlockKey key = key_from_blob(st->column_blob(0));
    m.n_bytes = st->column_int64(1);
    m.checksum = key_from_blob(st->column_blob(2));
    m.last_use = static_cast<uint64_t>(st->column_int64(3));
    m.payload_rowid = st->column_int64(4);
    clock_ = std::max(clock_, m.last_use);
    // A block of a model no longer on disk counts as the oldest: collected before any other.
    if (!gone.empty() && gone.count(key_from_blob(st->column_blob(5)))) {
      m.last_use = 0;
      ++extra_.n_blocks_of_missing_models;
    }
    index_[key] = m;
    lru_.insert({m.last_use, key});
    stats_.used_bytes += m.n_bytes;
  }
  return {};
}

void SqliteColdStore::register_model(const kv::BlockKey& fingerprint, const std::string& model_path) {
  if (!writer_db_ || model_path.empty()) return;
  std::error_code ec;
  const auto n_bytes = std::filesystem::file_size(model_path, ec);
  if (ec) return;
  const std::array<uint8_t, 16> fp = key_blob(fingerprint);
  // The read connection may write (the database is writable): a row, outside the writer's batches.
  std::lock_guard lock(read_mu_);
  auto st = reader_db_->prepare("INSERT OR REPLACE INTO models(fingerprint, path, file_bytes) VALUES(?, ?, ?)");
  if (!st) return;
  st->bind_blob(1, fp).bind(2, std::string_view(model_path)).bind(3, static_cast<int64_t>(n_bytes));
  (void)st->step();  // bookkeeping: a busy database only means these blocks are not collected first
}

void SqliteColdStore::register_model(const kv::KvCache& cache, const std::string& model_path) {
  for (kv::KvGroup g = 0; g < cache.n_groups(); ++g) register_model(cache.group(g).fingerprint(), model_path);
}

bool SqliteColdStore::put(const kv::BlockKey& key, const kv::BlockKey& parent, const kv::BlockKey& fingerprint,
                          std::span<const uint8_t> payload) {
  const auto size = static_cast<int64_t>(payload.size());
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      touch_locked(key, ++clock_);
      return true;
    }
    if (pending_.count(key)) return true;
    if (!stats_.healthy) retry_if_due_locked();
    if (!stats_.healthy || size > options_.capacity_bytes || queued_bytes_ + size > options_.max_queue_bytes) {
      ++extra_.n_dropped;
      return false;
    }
  }
  // Copy and hash outside the lock; the engine thread pays for this, not for the disk.
  auto p = std::make_shared<Pending>();
  p->key = key;
  p->parent = parent;
  p->fingerprint = fingerprint;
  p->payload.assign(payload.begin(), payload.end());
  p->checksum = kv::hash_bytes(payload);
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (index_.count(key) || pending_.count(key)) return true;  // raced with another put of the same block
    if (!stats_.healthy || queued_bytes_ + size > options_.max_queue_bytes) {
      ++extra_.n_dropped;
      return false;
    }
    pending_[key] = p;
    queue_.push_back(std::move(p));
    queued_bytes_ += size;
    // Inside its batch window the writer wakes at the window's end or when the queue passes
    // half its bound; while it writes it finds the queue when it loops.
    wake = writer_idle_ || queued_bytes_ * 2 >= options_.max_queue_bytes;
  }
  if (wake) work_cv_.notify_one();
  return true;
}

bool SqliteColdStore::contains(const kv::BlockKey& key) const {
  std::lock_guard lock(mu_);
  return index_.count(key) != 0 || pending_.count(key) != 0;
}

int64_t SqliteColdStore::size_of(const kv::BlockKey& key) const {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second.n_bytes;
  if (auto it = pending_.find(key); it != pending_.end()) return static_cast<int64_t>(it->second->payload.size());
  return -1;
}

kv::ColdRead SqliteColdStore::read(const kv::BlockKey& key, std::span<uint8_t> out) {
  return read_many(std::span(&key, 1), std::span(&out, 1)).front();
}

std::vector<kv::ColdRead> SqliteColdStore::read_many(std::span<const kv::BlockKey> keys,
                                                     std::span<const std::span<uint8_t>> outs) {
  KVC_ASSERT(keys.size() == outs.size());
  const size_t n = keys.size();
  std::vector<kv::ColdRead> results(n, kv::ColdRead::missing);
  std::vector<Meta> metas(n);
  std::vector<size_t> to_read;  // indexes into keys, of blocks indexed on disk
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < n; ++i) {
      if (auto it = pending_.find(keys[i]); it != pending_.end()) {
        const auto& payload = it->second->payload;
        if (payload.size() != outs[i].size()) continue;
        std::memcpy(outs[i].data(), payload.data(), payload.size());
        stats_.bytes_read += static_cast<int64_t>(payload.size());
        results[i] = kv::ColdRead::ok;
        continue;
      }
      auto it = index_.find(keys[i]);
      if (it == index_.end()) continue;
      if (it->second.n_bytes != static_cast<int64_t>(outs[i].size())) {
        erase_locked(keys[i]);
        ++stats_.n_corrupt;
        results[i] = kv::ColdRead::corrupt;
        continue;
      }
      metas[i] = it->second;
      to_read.push_back(i);
    }
  }
  if (to_read.empty()) return results;

  // Payloads, outside the index lock: files one by one, BLOBs in one read transaction.
  std::vector<uint8_t> read_ok(n, 0);
  std::vector<int64_t> rowids;
  std::vector<std::span<uint8_t>> blob_outs;
  std::vector<size_t> blob_of;
  for (size_t i : to_read) {
    if (metas[i].payload_rowid == 0) {
      read_ok[i] = files_.read(keys[i], outs[i]) ? 1 : 0;
    } else {
      rowids.push_back(metas[i].payload_rowid);
      blob_outs.push_back(outs[i]);
      blob_of.push_back(i);
    }
  }
  std::vector<uint8_t> unread(n, 0);  // the read transaction did not start: not known to be bad
  if (!rowids.empty()) {
    std::vector<uint8_t> ok;
    std::lock_guard lock(read_mu_);
    const bool started = reader_db_->read_blobs("payloads", "data", rowids, blob_outs, ok).ok();
    for (size_t b = 0; b < blob_of.size(); ++b) {
      if (started)
        read_ok[blob_of[b]] = ok[b];
      else
        unread[blob_of[b]] = 1;
    }
  }

  std::lock_guard lock(mu_);
  for (size_t i : to_read) {
    if (unread[i]) continue;  // missing this time, kept for the next
    const bool valid = read_ok[i] && kv::hash_bytes(outs[i]) == metas[i].checksum;
    auto it = index_.find(keys[i]);
    const bool same = it != index_.end() && it->second.checksum == metas[i].checksum &&
                      it->second.payload_rowid == metas[i].payload_rowid;
    if (!valid) {
      if (!same) continue;  // collected or replaced while we read: missing
      erase_locked(keys[i]);
      ++stats_.n_corrupt;
      results[i] = kv::ColdRead::corrupt;
      continue;
    }
    if (same) touch_locked(keys[i], ++clock_);
    stats_.bytes_read += static_cast<int64_t>(outs[i].size());
    results[i] = kv::ColdRead::ok;
  }
  return results;
}

void SqliteColdStore::release(std::span<const kv::BlockKey> keys) {
  std::lock_guard lock(mu_);
  for (const auto& k : keys) {
    if (index_.count(k)) {
      erase_locked(k);
      ++stats_.n_released;
    } else if (auto p = pending_.find(k); p != pending_.end()) {
      auto q = std::find(queue_.begin(), queue_.end(), p->second);
      if (q != queue_.end()) {
        queued_bytes_ -= static_cast<int64_t>((*q)->payload.size());
        queue_.erase(q);
        pending_.erase(p);
      } else {
        released_in_flight_.insert(k);  // the writer has it: deleted when its batch lands
      }
      ++stats_.n_released;
    }
  }
}

kv::ColdStoreStats SqliteColdStore::stats() const {
  std::lock_guard lock(mu_);
  kv::ColdStoreStats s = stats_;
  s.n_blocks = static_cast<int64_t>(index_.size());
  s.n_pending = static_cast<int64_t>(pending_.size());
  return s;
}

ColdStoreExtraStats SqliteColdStore::extra_stats() const {
  std::lock_guard lock(mu_);
  return extra_;
}

void SqliteColdStore::flush() {
  std::unique_lock lock(mu_);
  if (!writer_.joinable()) return;
  ++n_flushing_;
  work_cv_.notify_one();
  idle_cv_.wait(lock, [&] { return queue_.empty() && touches_.empty() && removals_.empty() && !writer_busy_; });
  --n_flushing_;
}

void SqliteColdStore::check_invariants() const {
  std::lock_guard lock(mu_);
  int64_t used = 0;
  KVC_ASSERT(lru_.size() == index_.size());
  for (const auto& [k, m] : index_) {
    KVC_ASSERT(pending_.count(k) == 0);
    KVC_ASSERT(lru_.count({m.last_use, k}) == 1);
    used += m.n_bytes;
  }
  KVC_ASSERT(used == stats_.used_bytes);
  int64_t queued = 0;
  for (const auto& p : queue_) queued += static_cast<int64_t>(p->payload.size());
  KVC_ASSERT(queued <= queued_bytes_);  // in-flight batches are counted until they commit
  if (!writer_busy_) { KVC_ASSERT(released_in_flight_.empty()); }
}

void SqliteColdStore::touch_locked(const kv::BlockKey& key, uint64_t last_use) {
  Meta& m = index_.at(key);
  lru_.erase({m.last_use, key});
  m.last_use = last_use;
  lru_.insert({last_use, key});
  if (writer_db_) touches_[key] = last_use;
}

void SqliteColdStore::erase_locked(kv::BlockKey key) {
  auto it = index_.find(key);
  KVC_ASSERT(it != index_.end());
  lru_.erase({it->second.last_use, key});
  stats_.used_bytes -= it->second.n_bytes;
  if (writer_db_) {
    removals_.emplace_back(key, it->second.payload_rowid);
    touches_.erase(key);
    work_cv_.notify_one();
  }
  index_.erase(it);
}

void SqliteColdStore::collect_locked() {
  while (stats_.used_bytes > options_.capacity_bytes && !lru_.empty()) {
    erase_locked(lru_.begin()->second);
    ++stats_.n_collected;
  }
}

void SqliteColdStore::retry_if_due_locked() {
  if (!write_failed_ || std::chrono::steady_clock::now() < retry_at_) return;
  write_failed_ = false;
  stats_.healthy = true;
  stats_.warning.clear();
  ++extra_.n_recoveries;
}

void SqliteColdStore::mark_unhealthy_locked(const std::string& why) {
  stats_.healthy = false;
  write_failed_ = true;
  ++extra_.n_write_failures;
  retry_at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.retry_after_ms);
  stats_.warning = "cold KV cache disabled: " + why +
                   "; kvchat keeps working with the KV cache in RAM and tries "
                   "the disk again every " +
                   std::to_string(std::max<int64_t>(1, options_.retry_after_ms / 1000)) + " s";
  extra_.n_dropped += static_cast<int64_t>(queue_.size());
  for (const auto& p : queue_) {
    pending_.erase(p->key);
    queued_bytes_ -= static_cast<int64_t>(p->payload.size());
  }
  queue_.clear();
}

void SqliteColdStore::writer_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    writer_idle_ = true;
    while (!stop_ && queue_.empty() && touches_.empty() && removals_.empty()) {
      work_cv_.wait(lock);
      ++extra_.n_writer_wakeups;
    }
    writer_idle_ = false;
    if (queue_.empty() && touches_.empty() && removals_.empty()) break;  // stop_ and drained
    if (options_.batch_window_ms > 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.batch_window_ms);
      while (!stop_ && n_flushing_ == 0 && queued_bytes_ * 2 < options_.max_queue_bytes) {
        if (work_cv_.wait_until(lock, until) == std::cv_status::timeout) break;
        ++extra_.n_writer_wakeups;
      }
    }
    std::vector<std::shared_ptr<const Pending>> puts = std::move(queue_);
    queue_.clear();
    std::vector<std::pair<kv::BlockKey, uint64_t>> touches(touches_.begin(), touches_.end());
    touches_.clear();
    std::vector<std::pair<kv::BlockKey, int64_t>> removals = std::move(removals_);
    removals_.clear();
    std::vector<uint64_t> uses(puts.size());
    for (auto& u : uses) u = ++clock_;
    writer_busy_ = true;
    lock.unlock();

    std::vector<int64_t> rowids;
    const Status st = write_batch(puts, uses, touches, removals, rowids);

    lock.lock();
    writer_busy_ = false;
    for (const auto& p : puts) {
      pending_.erase(p->key);
      queued_bytes_ -= static_cast<int64_t>(p->payload.size());
    }
    if (st.ok()) {
      ++extra_.n_batches;
      for (size_t i = 0; i < puts.size(); ++i) {
        const Pending& p = *puts[i];
        Meta m;
        m.n_bytes = static_cast<int64_t>(p.payload.size());
        m.checksum = p.checksum;
        m.last_use = uses[i];
        m.payload_rowid = rowids[i];
        index_[p.key] = m;
        lru_.insert({m.last_use, p.key});
        stats_.used_bytes += m.n_bytes;
        stats_.bytes_written += m.n_bytes;
        if (released_in_flight_.count(p.key)) erase_locked(p.key);
      }
      collect_locked();
    } else {
      extra_.n_dropped += static_cast<int64_t>(puts.size());
      mark_unhealthy_locked(st.error().message);
    }
    released_in_flight_.clear();
    idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

Status SqliteColdStore::write_batch(const std::vector<std::shared_ptr<const Pending>>& puts,
                                    const std::vector<uint64_t>& uses,
                                    const std::vector<std::pair<kv::BlockKey, uint64_t>>& touches,
                                    const std::vector<std::pair<kv::BlockKey, int64_t>>& removals,
                                    std::vector<int64_t>& rowids) {
  Database& db = *writer_db_;
  const bool to_files = options_.placement == PayloadPlacement::files;
  // Files of removed blocks go first: a removed block may be re-put in this very batch.
  for (const auto& [key, rowid] : removals) {
    if (rowid == 0) files_.remove(key);
  }
  size_t n_files = 0;
  Status st;
  if (to_files) {
    for (; n_files < puts.size() && st.ok(); ++n_files) st = files_.write(puts[n_files]->key, puts[n_files]->payload);
  }
  auto undo_files = [&] {
    for (size_t i = 0; i < n_files; ++i) files_.remove(puts[i]->key);
  };
  if (!st.ok()) {
    undo_files();
    return st;
  }

  auto body = [&]() -> Status {
    auto tx = Transaction::begin(db);
    if (!tx) return tx.error();
    auto del_block = db.prepare("DELETE FROM blocks WHERE key = ?");
    auto del_payload = db.prepare("DELETE FROM payloads WHERE id = ?");
    auto ins_block = db.prepare(
        "INSERT OR REPLACE INTO blocks(key, parent, fingerprint, format, n_bytes, checksum, last_use, payload_rowid)"
        " VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    auto ins_payload = db.prepare("INSERT INTO payloads(data) VALUES(?)");
    auto upd_use = db.prepare("UPDATE blocks SET last_use = ? WHERE key = ?");
    for (auto* s : {&del_block, &del_payload, &ins_block, &ins_payload, &upd_use}) {
      if (!*s) return s->error();
    }
    for (const auto& [key, rowid] : removals) {
      const std::array<uint8_t, 16> k = key_blob(key);
      KVC_TRY(del_block->bind_blob(1, k).run());
      del_block->reset();
      if (rowid > 0) {
        KVC_TRY(del_payload->bind(1, rowid).run());
        del_payload->reset();
      }
    }
    rowids.assign(puts.size(), 0);
    for (size_t i = 0; i < puts.size(); ++i) {
      const Pending& p = *puts[i];
      if (!to_files) {
        KVC_TRY(ins_payload->bind_blob_nocopy(1, p.payload).run());
        ins_payload->reset();
        rowids[i] = db.last_insert_rowid();
      }
      const std::array<uint8_t, 16> k = key_blob(p.key), parent = key_blob(p.parent), fp = key_blob(p.fingerprint),
                                    sum = key_blob(p.checksum);
      ins_block->bind_blob(1, k).bind_blob(2, parent).bind_blob(3, fp).bind(4, k_format_raw);
      ins_block->bind(5, static_cast<int64_t>(p.payload.size())).bind_blob(6, sum);
      ins_block->bind(7, static_cast<int64_t>(uses[i])).bind(8, rowids[i]);
      KVC_TRY(ins_block->run());
      ins_block->reset();
    }
    for (const auto& [key, last_use] : touches) {
      const std::array<uint8_t, 16> k = key_blob(key);
      KVC_TRY(upd_use->bind(1, static_cast<int64_t>(last_use)).bind_blob(2, k).run());
      upd_use->reset();
    }
    return tx->commit();
  };
  st = body();
  if (!st.ok()) undo_files();
  return st;
}

std::array<uint8_t, 16> key_blob(const kv::BlockKey& k) {
  std::array<uint8_t, 16> b{};
  for (size_t i = 0; i < 8; ++i) {
    b[i] = static_cast<uint8_t>(k.hi >> (56 - 8 * i));
    b[8 + i] = static_cast<uint8_t>(k.lo >> (56 - 8 * i));
  }
  return b;
}

kv::BlockKey key_from_blob(std::span<const uint8_t> b) {
  kv::BlockKey k;
  if (b.size() != 16) return k;
  for (size_t i = 0; i < 8; ++i) {
    k.hi = (k.hi << 8) | b[i];
    k.lo = (k.lo << 8) | b[8 + i];
  }
  return k;
}

}  // namespace kvc::storage

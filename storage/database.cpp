// SQLite connection, statement and transaction wrappers, and SQLite errors in a user's words.
#include "storage/database.h"

#include <sqlite3.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <utility>

#include "core/util/assert.h"
#include "storage/file_write.h"

namespace kvc::storage {

namespace {

// What a person can do about each kind of failure.
const char* advice(int rc) {
  switch (rc & 0xff) {
    case SQLITE_FULL: return "the disk is full; free space or choose another --data-dir";
    case SQLITE_READONLY: return "the file or its folder is read-only; make it writable or choose another --data-dir";
    case SQLITE_PERM: return "permission denied; fix the permissions or choose another --data-dir";
    case SQLITE_CANTOPEN:
      return "the file cannot be opened (missing folder, no permission, or not a file); check the path or choose "
             "another --data-dir";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return "the file is damaged or is not a kvchat database; move it aside (kvchat starts a new one) or "
             "restore a backup";
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "another process (another kvchat?) holds it locked; close that process and retry";
    case SQLITE_IOERR: return "a disk input/output error occurred; check the disk";
    case SQLITE_NOMEM: return "out of memory";
    default: return nullptr;
  }
}

ErrorCode code_for(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return ErrorCode::invalid_file;
    case SQLITE_NOMEM: return ErrorCode::out_of_memory;
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR: return ErrorCode::io;
    default: return ErrorCode::internal;
  }
}

// `path` as an SQLite URI with immutable=1 (percent-encoding what a URI path may not hold).
std::string immutable_uri(const std::filesystem::path& path) {
  std::string uri = "file:";
  for (const unsigned char c : path.string()) {
    if (std::isalnum(c) || std::strchr("/-._~", c) != nullptr) {
      uri += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      uri += hex;
    }
  }
  return uri + "?immutable=1";
}

Error make_sqlite_error(sqlite3* db, int rc, std::string_view doing, const std::string& what,
                        const std::filesystem::path& path) {
  std::string msg = "cannot " + std::string(doing) + " " + what + " " + path.string() + ": ";
  // A write the kernel refused: say why in its words (SQLite reports EFBIG as an I/O error).
  int sys = 0;
  if ((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_FULL) {
    sys = db ? sqlite3_system_errno(db) : 0;
    if (write_errno_advice(sys) == nullptr) sys = likely_write_errno(path);
  }
  if (const char* a = write_errno_advice(sys)) {
    msg += a;
    return make_error(ErrorCode::io, std::move(msg));
  }
  if (const char* a = advice(rc)) {
    msg += a;
  } else {
    msg += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  }
  return make_error(code_for(rc), std::move(msg));
}

}  // namespace

Database::Database(sqlite3* db, std::filesystem::path path, std::string what, bool read_only)
    : db_(db), path_(std::move(path)), what_(std::move(what)), read_only_(read_only) {}

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      path_(std::move(other.path_)),
      what_(std::move(other.what_)),
      read_only_(other.read_only_) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
    what_ = std::move(other.what_);
    read_only_ = other.read_only_;
  }
  return *this;
}

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

Result<Database> Database::open(const std::filesystem::path& path, const DatabaseOptions& options) {
  int flags = SQLITE_OPEN_NOMUTEX;  // each connection is used by one thread at a time (callers lock)
  switch (options.mode) {
    case OpenMode::create: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
    case OpenMode::read_write: flags |= SQLITE_OPEN_READWRITE; break;
    case OpenMode::read_only: flags |= SQLITE_OPEN_READONLY; break;
  }
  KVC_ASSERT((!options.immutable && !options.read_damaged) || options.mode == OpenMode::read_only);
  std::string name = path.string();
  if (options.immutable) {
    flags |= SQLITE_OPEN_URI;
    name = immutable_uri(path);
  }
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(name.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    Error e = make_sqlite_error(raw, rc, "open", options.what, path);
    sqlite3_close_v2(raw);
    return e;
  }
  sqlite3_extended_result_codes(raw, 1);
  Database db(raw, path, options.what, options.mode == OpenMode::read_only);
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  if (options.read_damaged) KVC_TRY(db.exec("PRAGMA writable_schema=ON"));  // first: nothing read before it
  const char* sync = options.sync == SyncMode::full     ? "PRAGMA synchronous=FULL"
                     : options.sync == SyncMode::normal ? "PRAGMA synchronous=NORMAL"
                                                        : "PRAGMA synchronous=OFF";
  KVC_TRY(db.exec(sync));
  if (options.page_size > 0) KVC_TRY(db.exec("PRAGMA page_size=" + std::to_string(options.page_size)));
  KVC_TRY(db.exec("PRAGMA foreign_keys=ON"));
  // Reading the schema here turns "not a database" into an error at open, not at first use.
  {
    auto r = db.query_int("PRAGMA schema_version");
    if (!r) return r.error();
  }
  if (options.max_bytes > 0) {
    auto page = db.query_int("PRAGMA page_size");
    if (!page) return page.error();
    const int64_t n_pages = std::max<int64_t>(1, options.max_bytes / *page);
    KVC_TRY(db.exec("PRAGMA max_page_count=" + std::to_string(n_pages)));
  }
  return db;
}

Status Database::enable_wal() {
  auto st = prepare("PRAGMA journal_mode=WAL");
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->column_text(0) != "wal") {
    return make_error(ErrorCode::io, "cannot use write-ahead logging for " + what_ + " " + path_.string() +
                                         " (is it on a network file system?); choose another --data-dir");
  }
  return {};
}

Status Database::exec(std::string_view sql) {
  const std::string s(sql);
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return error(rc, read_only_ ? "read" : "write to");
  return {};
}

Result<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) return error(rc, "read");
  KVC_ASSERT(stmt != nullptr);  // empty SQL is a bug
  return Statement(*this, stmt);
}

Result<int64_t> Database::query_int(std::string_view sql) {
  auto st = prepare(sql);
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return int64_t{0};
  return st->column_int64(0);
}

Status Database::read_blob(const char* table, const char* column, int64_t rowid, std::span<uint8_t> out) {
  sqlite3_blob* blob = nullptr;
  int rc = sqlite3_blob_open(db_, "main", table, column, rowid, 0, &blob);
  if (rc != SQLITE_OK) {
    sqlite3_blob_close(blob);
    return error(rc, "read");
  }
  if (static_cast<size_t>(sqlite3_blob_bytes(blob)) != out.size()) {
    sqlite3_blob_close(blob);
    return make_error(ErrorCode::invalid_file,
                      "a stored value in " + what_ + " " + path_.string() + " has the wrong size");
  }
  rc = out.empty() ? SQLITE_OK : sqlite3_blob_read(blob, out.data(), static_cast<int>(out.size()), 0);
  sqlite3_blob_close(blob);
  if (rc != SQLITE_OK) return error(rc, "read");
  return {};
}

Status Database::read_blobs(const char* table, const char* column, std::span<const int64_t> rowids,
                            std::span<const std::span<uint8_t>> outs, std::vector<uint8_t>& ok) {
  KVC_ASSERT(rowids.size() == outs.size());
  ok.assign(rowids.size(), 0);
  KVC_TRY(exec("BEGIN"));  // deferred: a read snapshot, no write lock
  sqlite3_blob* blob = nullptr;
  for (size_t i = 0; i < rowids.size(); ++i) {
    // The first row opens the handle; the next ones move it (a failed move closes it).
    const int rc = blob ? sqlite3_blob_reopen(blob, rowids[i])
                        : sqlite3_blob_open(db_, "main", table, column, rowids[i], 0, &blob);
    if (rc != SQLITE_OK) {
      if (!blob) continue;
      sqlite3_blob_close(blob);
      blob = nullptr;
      continue;
    }
    const std::span<uint8_t> out = outs[i];
    if (static_cast<size_t>(sqlite3_blob_bytes(blob)) != out.size()) continue;
    if (out.empty() || sqlite3_blob_read(blob, out.data(), static_cast<int>(out.size()), 0) == SQLITE_OK) ok[i] = 1;
  }
  sqlite3_blob_close(blob);
  if (!exec("COMMIT").ok()) (void)exec("ROLLBACK");  // a read transaction: nothing to lose
  return {};
}

Status Database::verify() {
  auto st = prepare("PRAGMA quick_check(1)");
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  std::string finding = *row ? st->column_text(0) : std::string("no answer");
  if (finding == "ok") return {};
  // One line: "Page 16: btreeInitPage() returns error code 11", without the schema's banner.
  for (const std::string banner : {"*** in database main ***\n", "*** in database main *** "}) {
    if (finding.starts_with(banner)) finding.erase(0, banner.size());
  }
  for (char& c : finding) c = c == '\n' ? ' ' : c;
  return make_error(ErrorCode::invalid_file, what_ + " " + path_.string() + " is damaged: " + finding);
}

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int64_t Database::changes() const { return sqlite3_changes64(db_); }

Error Database::error(int rc, std::string_view doing) const { return make_sqlite_error(db_, rc, doing, what_, path_); }

Statement::Statement(const Database& db, sqlite3_stmt* stmt) : stmt_(stmt), what_(db.what()), path_(db.path()) {}

Statement::Statement(Statement&& other) noexcept
    : stmt_(std::exchange(other.stmt_, nullptr)), what_(std::move(other.what_)), path_(std::move(other.path_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    stmt_ = std::exchange(other.stmt_, nullptr);
    what_ = std::move(other.what_);
    path_ = std::move(other.path_);
  }
  return *this;
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

// A failed bind is a bug (wrong index or type), never a user error.
Statement& Statement::bind(int index, int64_t value) {
  KVC_ASSERT(sqlite3_bind_int64(stmt_, index, value) == SQLITE_OK);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  KVC_ASSERT(sqlite3_bind_double(stmt_, index, value) == SQLITE_OK);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  KVC_ASSERT(sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8) == SQLITE_OK);
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const uint8_t> bytes) {
  static const uint8_t k_empty = 0;  // a zero-length blob, not NULL
  const void* p = bytes.empty() ? &k_empty : bytes.data();
  KVC_ASSERT(sqlite3_bind_blob64(stmt_, index, p, bytes.size(), SQLITE_TRANSIENT) == SQLITE_OK);
  return *this;
}

Statement& Statement::bind_blob_nocopy(int index, std::span<const uint8_t> bytes) {
  static const uint8_t k_empty = 0;
  const void* p = bytes.empty() ? &k_empty : bytes.data();
  KVC_ASSERT(sqlite3_bind_blob64(stmt_, index, p, bytes.size(), SQLITE_STATIC) == SQLITE_OK);
  return *this;
}

Statement& Statement::bind_null(int index) {
  KVC_ASSERT(sqlite3_bind_null(stmt_, index) == SQLITE_OK);
  return *this;
}

Result<bool> Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Error e =
      make_sqlite_error(sqlite3_db_handle(stmt_), rc, sqlite3_stmt_readonly(stmt_) ? "read" : "write to", what_, path_);
  sqlite3_reset(stmt_);
  return e;
}

Status Statement::run() {
  for (;;) {
    auto r = step();
    if (!r) return r.error();
    if (!*r) return {};
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::column_int64(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::column_double(int col) const { return sqlite3_column_double(stmt_, col); }

std::string Statement::column_text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

std::span<const uint8_t> Statement::column_blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::span<const uint8_t>(p, static_cast<size_t>(n)) : std::span<const uint8_t>();
}

bool Statement::column_is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

Result<Transaction> Transaction::begin(Database& db) {
  KVC_TRY(db.exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Transaction::~Transaction() {
  // A failed COMMIT may leave the transaction open; ROLLBACK is then the only way out.
  if (db_ && !sqlite3_get_autocommit(db_->handle())) sqlite3_exec(db_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

Status Transaction::commit() {
  KVC_ASSERT(db_ != nullptr);  // committing twice is a bug
  Status st = db_->exec("COMMIT");
  if (st.ok()) db_ = nullptr;
  return st;
}

std::vector<uint8_t> tokens_to_blob(std::span<const int32_t> tokens) {
  std::vector<uint8_t> out(tokens.size() * 4);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto u = static_cast<uint32_t>(tokens[i]);
    for (size_t b = 0; b < 4; ++b) out[4 * i + b] = static_cast<uint8_t>(u >> (8 * b));
  }
  return out;
}

std::vector<int32_t> tokens_from_blob(std::span<const uint8_t> bytes) {
  std::vector<int32_t> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t u = 0;
    for (size_t b = 0; b < 4; ++b) u |= static_cast<uint32_t>(bytes[4 * i + b]) << (8 * b);
    out[i] = static_cast<int32_t>(u);
  }
  return out;
}

}  // namespace kvc::storage

// RAII wrappers over SQLite: Database (one connection), Statement, Transaction.
//
// sqlite3.h stays out of this header; callers see kvc::Result errors whose messages name the
// file and say what to do ("cannot open conversations database /x/kvchat.db: the disk is
// full; free space or choose another --data-dir").
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kvc::storage {

enum class OpenMode { create, read_write, read_only };

// PRAGMA synchronous. In WAL mode `normal` survives a process crash (SIGKILL) but a power
// loss may drop the last commits; `full` syncs the WAL on every commit.
enum class SyncMode { off, normal, full };

struct DatabaseOptions {
  OpenMode mode = OpenMode::create;
  SyncMode sync = SyncMode::full;
  int busy_timeout_ms = 5000;
  std::string what = "database";  // how messages name the file: "conversations database"
  int64_t max_bytes = 0;          // > 0: cap the file size (PRAGMA max_page_count); writes past it fail as "full"
  int page_size = 0;              // > 0: page size of a database created by this open (no effect on an existing one)
  // read_only only: the file is taken as one nobody changes (SQLite's immutable=1): no locks and
  // no -shm or -wal file are needed, so it opens in a folder where they cannot be created (a
  // read-only mount); commits still in a -wal beside it are not seen.
  bool immutable = false;
  // read_only only: PRAGMA writable_schema=ON before the schema is read, which lets SQLite open
  // a file shorter than its header says (cut short) and read the pages that remain.
  bool read_damaged = false;
};

class Statement;

// One connection. Foreign keys are on; journal mode is left alone until enable_wal(), so that
// a database can be inspected (its version read) without being altered.
class Database {
 public:
  static Result<Database> open(const std::filesystem::path& path, const DatabaseOptions& options);

  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  Status enable_wal();
  // Runs one or more statements that return no rows.
  Status exec(std::string_view sql);
  Result<Statement> prepare(std::string_view sql);
  Result<int64_t> query_int(std::string_view sql);  // first column of the first row
  // Reads BLOB `column` of row `rowid` of `table` straight into `out`; an error when the row is
  // missing or the blob's size is not out.size().
  Status read_blob(const char* table, const char* column, int64_t rowid, std::span<uint8_t> out);
  // Reads BLOB `column` of each row rowids[i] into outs[i], in one read transaction through one
  // blob handle; ok[i] is 1 when row i was there with exactly outs[i].size() bytes and read.
  // An error only when the read transaction cannot start.
  Status read_blobs(const char* table, const char* column, std::span<const int64_t> rowids,
                    std::span<const std::span<uint8_t>> outs, std::vector<uint8_t>& ok);

  // PRAGMA quick_check: ok, or an invalid_file error quoting SQLite's first finding. Reads
  // every page (about a second per GB).
  Status verify();

  int64_t last_insert_rowid() const;
  int64_t changes() const;
  bool read_only() const { return read_only_; }
  const std::filesystem::path& path() const { return path_; }
  const std::string& what() const { return what_; }

  // An Error for SQLite result code `rc` while `doing` ("write to"), with advice for the user.
  Error error(int rc, std::string_view doing) const;

  sqlite3* handle() const { return db_; }

 private:
  Database(sqlite3* db, std::filesystem::path path, std::string what, bool read_only);

  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
  std::string what_;
  bool read_only_ = false;
};

// A prepared statement; binding indexes start at 1, column indexes at 0.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view text);                       // copied
  Statement& bind_blob(int index, std::span<const uint8_t> bytes);         // copied
  Statement& bind_blob_nocopy(int index, std::span<const uint8_t> bytes);  // keep alive until reset()
  Statement& bind_null(int index);

  // true: a row is ready to read; false: done.
  Result<bool> step();
  // Steps to completion, ignoring rows.
  Status run();
  // Ready to step again; bindings cleared.
  void reset();

  int64_t column_int64(int col) const;
  double column_double(int col) const;
  std::string column_text(int col) const;
  std::span<const uint8_t> column_blob(int col) const;  // valid until the next step/reset
  bool column_is_null(int col) const;

 private:
  friend class Database;
  Statement(const Database& db, sqlite3_stmt* stmt);

  sqlite3_stmt* stmt_ = nullptr;
  std::string what_;  // for error messages, copied so that the Database may move
  std::filesystem::path path_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() succeeded.
class Transaction {
 public:
  static Result<Transaction> begin(Database& db);

  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Status commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_ = nullptr;  // null once committed or rolled back
};

// Little-endian int32 token ids <-> BLOB bytes.
std::vector<uint8_t> tokens_to_blob(std::span<const int32_t> tokens);
std::vector<int32_t> tokens_from_blob(std::span<const uint8_t> bytes);

}  // namespace kvc::storage

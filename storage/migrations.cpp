// Schema version check and forward migrations.
#include "storage/migrations.h"

#include "core/util/assert.h"

namespace kvc::storage {

Result<Database> open_versioned(const std::filesystem::path& path, const DatabaseOptions& options,
                                std::span<const Migration> steps) {
  for (size_t i = 0; i < steps.size(); ++i) KVC_ASSERT(steps[i].version == static_cast<int>(i) + 1);
  const int latest = static_cast<int>(steps.size());

  auto opened = Database::open(path, options);
  if (!opened) return opened.error();
  Database db = std::move(opened.value());

  auto version = db.query_int("PRAGMA user_version");
  if (!version) return version.error();
  if (*version > latest) {
    return make_error(ErrorCode::unsupported,
                      options.what + " " + path.string() + " was written by a newer kvchat (schema version " +
                          std::to_string(*version) + "; this kvchat knows up to " + std::to_string(latest) +
                          "); it was left untouched: upgrade kvchat or choose another --data-dir");
  }
  if (db.read_only()) {
    if (*version < latest) {
      return make_error(ErrorCode::io, options.what + " " + path.string() + " needs an upgrade (schema version " +
                                           std::to_string(*version) + " to " + std::to_string(latest) +
                                           ") but is open read-only; make it writable or choose another --data-dir");
    }
    return db;
  }
  KVC_TRY(db.enable_wal());
  for (int v = static_cast<int>(*version) + 1; v <= latest; ++v) {
    auto tx = Transaction::begin(db);
    if (!tx) return tx.error();
    Status st = db.exec(steps[static_cast<size_t>(v - 1)].sql);
    if (!st) {
      return make_error(st.error().code,
                        "upgrading to schema version " + std::to_string(v) + ": " + st.error().message);
    }
    KVC_TRY(db.exec("PRAGMA user_version=" + std::to_string(v)));
    KVC_TRY(tx->commit());
  }
  return db;
}

}  // namespace kvc::storage

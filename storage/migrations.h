// Versioned schemas: PRAGMA user_version plus a table of forward migration steps.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

#include "storage/database.h"

namespace kvc::storage {

// Takes a database from schema version `version - 1` to `version`.
struct Migration {
  int version;
  std::string_view sql;
};

// Opens a database and brings its schema to the last step of `steps` (versions 1, 2, ... N,
// each applied in its own transaction together with its user_version). A database whose
// version is above N was written by a newer kvchat: it is refused and its file left exactly
// as it was (the version is read before anything, even the journal mode, is changed).
// Read-write databases are switched to WAL.
Result<Database> open_versioned(const std::filesystem::path& path, const DatabaseOptions& options,
                                std::span<const Migration> steps);

}  // namespace kvc::storage

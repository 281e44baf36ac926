// Files written whole: a temporary beside the target, synced, renamed over it; on a failed
// write (a full disk, a file size limit) the old file stays and the temporary is removed.
#pragma once

#include <filesystem>
#include <string_view>

#include "core/util/result.h"

namespace kvc::storage {

// What a person can do about a write the kernel refused with `err` (errno): ENOSPC, EFBIG,
// EDQUOT, EROFS, EACCES; nullptr for other values (0 included).
const char* write_errno_advice(int err);

// Why a write to `file` (or its -wal / -journal beside it) most likely failed when the errno was
// not kept (SQLite reports a short write as "full" and a failed one as an I/O error, and its
// errno may be overwritten by then): EFBIG when the process's file size limit (RLIMIT_FSIZE)
// is within 64 KiB of one of them, ENOSPC when its file system has under 1 MiB free; else 0.
int likely_write_errno(const std::filesystem::path& file);

// Writes `bytes` to `path` atomically (PATH.tmp, fsync, rename). `what` names the file in
// errors ("settings file"): "cannot write settings file /d/settings.json: the disk is full; ...".
Status write_file_replacing(const std::filesystem::path& path, std::string_view bytes, std::string_view what);

}  // namespace kvc::storage

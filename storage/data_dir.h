// Where kvchat keeps its data: --data-dir, else $KVCHAT_DATA_DIR, else $XDG_DATA_HOME/kvchat.
#pragma once

#include <filesystem>
#include <string>

#include "core/util/result.h"

namespace kvc::storage {

// Resolves the data directory; `override_dir` (from --data-dir) wins when non-empty.
// Order: override, $KVCHAT_DATA_DIR, $XDG_DATA_HOME/kvchat, $HOME/.local/share/kvchat.
std::filesystem::path resolve_data_dir(const std::string& override_dir);

// Creates `dir` (and parents) if needed; an error says which path could not be made and why.
Status ensure_dir(const std::filesystem::path& dir);

}  // namespace kvc::storage

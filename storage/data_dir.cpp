// Data directory resolution following the XDG base directory convention.
#include "storage/data_dir.h"

#include <cstdlib>
#include <system_error>

namespace kvc::storage {

namespace {
const char* non_empty_env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
}  // namespace

std::filesystem::path resolve_data_dir(const std::string& override_dir) {
  if (!override_dir.empty()) return override_dir;
  if (const char* d = non_empty_env("KVCHAT_DATA_DIR")) return d;
  if (const char* x = non_empty_env("XDG_DATA_HOME")) return std::filesystem::path(x) / "kvchat";
  if (const char* h = non_empty_env("HOME")) return std::filesystem::path(h) / ".local/share/kvchat";
  return std::filesystem::current_path() / ".kvchat";
}

Status ensure_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return make_error(ErrorCode::io, "cannot create data directory " + dir.string() + ": " +
                                         (ec ? ec.message() : "a file of that name exists") +
                                         " (choose another with --data-dir DIR)");
  }
  return {};
}

}  // namespace kvc::storage

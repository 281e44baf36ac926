// Private mounts for the storage tests: a full tmpfs or a read-only bind mount that only one forked child (and what it
// starts) sees, as root or in a user namespace; and running a test body in such a child.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kvc::test {

// Moves the calling process into a mount namespace of its own, where mounts vanish with it: as
// root unshare(CLONE_NEWNS), else a user namespace that maps this user to root. Only in a
// single-threaded process (a child just forked). Nothing, or why it cannot ("needs root or
// unprivileged user namespaces (...)"): the caller skips with that reason.
std::optional<std::string> enter_mount_namespace();
// In that namespace: a tmpfs of `bytes` on `dir` (which must exist).
std::optional<std::string> mount_tmpfs(const std::filesystem::path& dir, uint64_t bytes);
// `path` (a folder or a file) bind-mounted on itself, read-only: writes get EROFS.
std::optional<std::string> bind_read_only(const std::filesystem::path& path);
// Fills the file system that holds `dir` to the brim with DIR/ballast (every free block, as
// the kernel counts them); returns the ballast's path, to remove when room should come back.
std::filesystem::path fill_to_the_brim(const std::filesystem::path& dir);

// The child's side of a forked test: one "key value" line per fact, in a file the parent reads
// after the child exits (a child never runs Catch assertions).
class ChildReport {
 public:
  explicit ChildReport(std::filesystem::path path) : path_(std::move(path)) {}
  void line(const std::string& key, const std::string& value) const {
    std::ofstream(path_, std::ios::app) << key << ' ' << value << '\n';
  }
  std::vector<std::string> all(const std::string& key) const;
  std::string first(const std::string& key) const;  // "" when there is none
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Forks; the child runs body() and exits with its return value (its threads die with it). The
// parent waits and returns that exit code (-1 when the child did not exit normally).
int run_in_child(const std::function<int()>& body);

}  // namespace kvc::test

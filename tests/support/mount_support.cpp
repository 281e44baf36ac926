// Mount namespaces for tests: unshare, a uid map for the unprivileged case, tmpfs and read-only bind mounts.
#include "support/mount_support.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kvc::test {

namespace {

std::string why(const std::string& what) { return what + ": " + std::strerror(errno); }

bool write_proc(const char* file, const std::string& text) {
  const int fd = ::open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

}  // namespace

std::optional<std::string> enter_mount_namespace() {
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  if (uid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) return why("unshare(CLONE_NEWNS) as root");
  } else {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      return why("a mount namespace needs root or unprivileged user namespaces (unshare(CLONE_NEWUSER))");
    }
    // This user is root inside: enough to mount a tmpfs and bind mounts here.
    if (!write_proc("/proc/self/setgroups", "deny") ||
        !write_proc("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n") ||
        !write_proc("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n")) {
      return why("mapping this user to root in a user namespace");
    }
  }
  // Mounts made from here on stay in this namespace.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return why("making / private");
  return std::nullopt;
}

std::optional<std::string> mount_tmpfs(const std::filesystem::path& dir, uint64_t bytes) {
  const std::string options = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0)
    return why("mounting a tmpfs on " + dir.string());
  return std::nullopt;
}

std::optional<std::string> bind_read_only(const std::filesystem::path& path) {
  if (::mount(path.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) return why("bind-mounting " + path.string());
  // A remount keeps the flags the mount came with (in a user namespace they are locked).
  struct statvfs st {};
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY;
  if (::statvfs(path.c_str(), &st) == 0) {
    if (st.f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (st.f_flag & ST_NODEV) flags |= MS_NODEV;
    if (st.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (st.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (st.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (st.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  }
  if (::mount(nullptr, path.c_str(), nullptr, flags, nullptr) != 0) {
    return why("remounting " + path.string() + " read-only");
  }
  return std::nullopt;
}

std::filesystem::path fill_to_the_brim(const std::filesystem::path& dir) {
  const std::filesystem::path ballast = dir / "ballast";
  const int fd = ::open(ballast.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return ballast;
  // Big writes first, then ever smaller ones: the last block's last bytes go too.
  std::vector<char> chunk(1 << 20, 'b');
  for (size_t n = chunk.size(); n > 0; n /= 2) {
    while (::write(fd, chunk.data(), n) == static_cast<ssize_t>(n)) {}
  }
  ::fsync(fd);
  ::close(fd);
  return ballast;
}

std::vector<std::string> ChildReport::all(const std::string& key) const {
  std::vector<std::string> out;
  std::ifstream in(path_);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind(key + " ", 0) == 0) out.push_back(l.substr(key.size() + 1));
  }
  return out;
}

std::string ChildReport::first(const std::string& key) const {
  auto v = all(key);
  return v.empty() ? "" : v.front();
}

int run_in_child(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) ::_exit(body());
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace kvc::test

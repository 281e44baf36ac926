// Helpers for the kill-mid-answer tests: a private Xvfb display, processes started with fork+exec
// that a test SIGKILLs itself, and the checks run on a data directory after each kill.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace kvc::test {

// How many kills a loop runs: $KVC_KILL_COUNT when set (the documented full run), else `reduced`.
int kill_count(int reduced);

// An Xvfb server on a free display for the life of the object; display() is "" when it could
// not start (the caller skips with the reason in error()).
class XvfbDisplay {
 public:
  XvfbDisplay();
  ~XvfbDisplay();
  XvfbDisplay(const XvfbDisplay&) = delete;
  XvfbDisplay& operator=(const XvfbDisplay&) = delete;
  const std::string& display() const { return display_; }
  const std::string& error() const { return error_; }

 private:
  pid_t pid_ = -1;
  std::string display_, error_;
};

// A child process: argv[0] is the program's path; its stdout and stderr go to `log_file`.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
        const std::string& log_file);
  ~Child();  // SIGKILL if still running
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  // Still running (reaps it if it has exited; exit_status() then says how).
  bool running();
  // SIGKILL and reap: true when it died of the signal (it was still running).
  bool kill_now();
  // Waits up to timeout_s for it to exit: its exit code, or -1 (signalled, or still running: killed).
  int wait_exit(int timeout_s);
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  std::string log_file_;
};

// PRAGMA integrity_check of a SQLite file: "ok", or what it found.
std::string integrity(const std::filesystem::path& db);

// What the cold store in `kv_dir` (DIR/kv_cache.db) serves after a kill. When `corrupt_one`,
// the newest stored block's payload gets a flipped byte first (a torn write the checksum must catch).
struct ColdCheck {
  int64_t n_blocks = 0;           // rows in its index
  int64_t n_served = 0;           // blocks read back ok
  int64_t n_refused = 0;          // blocks the store refused as corrupt
  int64_t n_bad_served = 0;       // blocks served whose bytes do not match their checksum: must be 0
  bool corrupted_refused = true;  // the block made corrupt was refused (true when none was)
};
ColdCheck check_cold_store(const std::filesystem::path& kv_dir, bool corrupt_one, std::mt19937& rng);

}  // namespace kvc::test

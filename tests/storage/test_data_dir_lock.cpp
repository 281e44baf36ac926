// One writer per data directory: the flock on DIR/lock refuses a second holder with who holds
// it, and is free again when the holder goes, however it goes (SIGKILL included).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "storage/data_dir_lock.h"
#include "support/test_support.h"

using kvc::storage::DataDirLock;

TEST_CASE("data dir lock: a second holder is refused with the first one's pid and name", "[storage]") {
  kvc::test::TempDir tmp;
  auto first = DataDirLock::acquire(tmp.path(), "the kvchat app");
  REQUIRE(first.ok());
  // A second open file description, as a second process has: flock refuses it too.
  auto second = DataDirLock::acquire(tmp.path(), "kvchat-cli serve");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == kvc::ErrorCode::invalid_argument);
  CHECK_THAT(second.error().message,
             Catch::Contains("another kvchat (pid " + std::to_string(::getpid()) + ", the kvchat app)") &&
                 Catch::Contains("is using the data directory " + tmp.path().string()) &&
                 Catch::Contains("--data-dir"));
  { DataDirLock gone = std::move(*first); }
  CHECK(DataDirLock::acquire(tmp.path(), "kvchat-cli serve").ok());
}

TEST_CASE("data dir lock: a holder killed with SIGKILL leaves the directory free", "[storage]") {
  kvc::test::TempDir tmp;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto held = DataDirLock::acquire(tmp.path(), "a child");
    const char c = held.ok() ? 'y' : 'n';
    [[maybe_unused]] const ssize_t n = ::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  REQUIRE(c == 'y');
  auto refused = DataDirLock::acquire(tmp.path(), "the test");
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("(pid " + std::to_string(child) + ", a child)"));
  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // The lock file is still there (it is never removed); the lock is not.
  CHECK(std::filesystem::exists(tmp.path() / "lock"));
  CHECK(DataDirLock::acquire(tmp.path(), "the test").ok());
}

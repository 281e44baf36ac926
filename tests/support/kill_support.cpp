// The kill tests' processes (Xvfb, the app, the CLI, the server) and their after-kill checks.
#include "support/kill_support.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/kv/block_key.h"
#include "storage/database.h"
#include "storage/sqlite_cold_store.h"

namespace kvc::test {

int kill_count(int reduced) {
  const char* env = std::getenv("KVC_KILL_COUNT");
  if (env == nullptr || *env == '\0') return reduced;
  const int n = std::atoi(env);
  return n > 0 ? n : reduced;
}

XvfbDisplay::XvfbDisplay() {
  if (std::system("command -v Xvfb >/dev/null 2>&1") != 0) {
    error_ = "Xvfb is not installed (apt-get install xvfb)";
    return;
  }
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    ::close(fds[0]);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    const std::string fd = std::to_string(fds[1]);
    ::execlp("Xvfb", "Xvfb", "-displayfd", fd.c_str(), "-screen", "0", "1280x900x24", "-nolisten", "tcp",
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string number;
  char c = 0;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') number += c;
  ::close(fds[0]);
  if (number.empty()) {
    error_ = "Xvfb did not start";
    return;
  }
  display_ = ":" + number;
}

XvfbDisplay::~XvfbDisplay() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
}

Child::Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& log_file)
    : log_file_(log_file) {
  REQUIRE(!argv.empty());
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    const int out = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

Child::~Child() {
  if (running()) kill_now();
}

bool Child::running() {
  if (reaped_ || pid_ <= 0) return false;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
  return !reaped_;
}

bool Child::kill_now() {
  if (!running()) return false;
  ::kill(pid_, SIGKILL);
  REQUIRE(::waitpid(pid_, &status_, 0) == pid_);
  reaped_ = true;
  return WIFSIGNALED(status_) && WTERMSIG(status_) == SIGKILL;
}

int Child::wait_exit(int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (running()) {
    kill_now();
    return -1;
  }
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
}

std::string Child::log() const {
  std::ifstream f(log_file_);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string integrity(const std::filesystem::path& db) {
  auto d = storage::Database::open(db, {.mode = storage::OpenMode::read_write});
  if (!d) return d.error().message;
  auto st = d->prepare("PRAGMA integrity_check");
  if (!st) return st.error().message;
  auto row = st->step();
  return row && *row ? st->column_text(0) : "no result";
}

ColdCheck check_cold_store(const std::filesystem::path& kv_dir, bool corrupt_one, std::mt19937& rng) {
  ColdCheck out;
  struct Row {
    kv::BlockKey key, checksum;
    int64_t n_bytes = 0, payload_rowid = 0, last_use = 0;
  };
  std::vector<Row> rows;
  kv::BlockKey corrupted;
  {
    auto db = storage::Database::open(kv_dir / "kv_cache.db", {.mode = storage::OpenMode::read_write});
    REQUIRE(db.ok());
    auto st = db->prepare("SELECT key, checksum, n_bytes, payload_rowid, last_use FROM blocks");
    REQUIRE(st.ok());
    for (;;) {
      auto row = st->step();
      REQUIRE(row.ok());
      if (!*row) break;
      rows.push_back({storage::key_from_blob(st->column_blob(0)), storage::key_from_blob(st->column_blob(1)),
                      st->column_int64(2), st->column_int64(3), st->column_int64(4)});
    }
    st->reset();
    if (corrupt_one && !rows.empty()) {
      // The newest block (the killed answer's end, most likely): the next turn's history before
      // it must still hit.
      const Row& r = *std::max_element(rows.begin(), rows.end(),
                                       [](const Row& a, const Row& b) { return a.last_use < b.last_use; });
      if (r.payload_rowid > 0) {
        auto sel = db->prepare("SELECT data FROM payloads WHERE id = ?");
        REQUIRE(sel.ok());
        sel->bind(1, r.payload_rowid);
        auto got = sel->step();
        REQUIRE(got.ok());
        REQUIRE(*got);
        std::vector<uint8_t> data(sel->column_blob(0).begin(), sel->column_blob(0).end());
        sel->reset();
        REQUIRE(!data.empty());
        data[std::uniform_int_distribution<size_t>(0, data.size() - 1)(rng)] ^= 0x5a;
        auto upd = db->prepare("UPDATE payloads SET data = ? WHERE id = ?");
        REQUIRE(upd.ok());
        REQUIRE(upd->bind_blob(1, data).bind(2, r.payload_rowid).run().ok());
        corrupted = r.key;
      }
    }
  }
  out.n_blocks = static_cast<int64_t>(rows.size());
  auto cold = storage::SqliteColdStore::open(kv_dir);
  REQUIRE(cold.ok());
  for (const Row& r : rows) {
    std::vector<uint8_t> buf(static_cast<size_t>(r.n_bytes));
    const kv::ColdRead got = (*cold)->read(r.key, buf);
    if (got == kv::ColdRead::ok) {
      ++out.n_served;
      if (kv::hash_bytes(buf) != r.checksum) ++out.n_bad_served;
      if (r.key == corrupted) out.corrupted_refused = false;
    } else if (got == kv::ColdRead::corrupt) {
      ++out.n_refused;
    }
  }
  (*cold)->check_invariants();
  return out;
}

}  // namespace kvc::test

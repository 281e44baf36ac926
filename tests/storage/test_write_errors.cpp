// Real write errors from the kernel on every store: a child process whose file size limit
// (RLIMIT_FSIZE, soft; SIGXFSZ ignored) makes writes fail with EFBIG, and a 1 MiB tmpfs (ENOSPC)
// where this process may mount one. Each failing write returns one error that says what to do,
// nothing acknowledged before is lost, and once the limit is lifted (or space freed) the same
// open store writes again; PRAGMA integrity_check is ok after every case.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "app/gui/app_settings.h"
#include "core/kv/block_key.h"
#include "storage/conversation_store.h"
#include "storage/file_write.h"
#include "storage/sqlite_cold_store.h"
#include "support/kill_support.h"
#include "support/mount_support.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

// The child's report, one "key value" line each, written to a file the parent reads.
class Report {
 public:
  explicit Report(std::filesystem::path p) : path_(std::move(p)) {}
  void line(const std::string& key, const std::string& value) {
    std::ofstream(path_, std::ios::app) << key << ' ' << value << '\n';
  }
  std::vector<std::string> all(const std::string& key) const {
    std::vector<std::string> out;
    std::ifstream in(path_);
    for (std::string l; std::getline(in, l);) {
      if (l.rfind(key + " ", 0) == 0) out.push_back(l.substr(key.size() + 1));
    }
    return out;
  }
  std::string first(const std::string& key) const {
    auto v = all(key);
    return v.empty() ? "" : v.front();
  }

 private:
  std::filesystem::path path_;
};

void limit_file_size(rlim_t bytes) {
  rlimit lim{};
  ::getrlimit(RLIMIT_FSIZE, &lim);
  lim.rlim_cur = bytes;  // the hard limit stays: the child may raise it again
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(90);
}

void lift_file_size_limit() {
  rlimit lim{};
  ::getrlimit(RLIMIT_FSIZE, &lim);
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(91);
}

// Runs body in a child with SIGXFSZ ignored; the child's exit code (the body returns it).
template <class F>
int in_child(F body) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    ::_exit(body());
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

std::string text_of(int i) { return "message " + std::to_string(i) + " " + std::string(900, 'a' + i % 26); }

// Writes user messages under the limit until `n_fail` writes have been refused, then lifts the
// limit (`lift`) and writes again: acks ("ack ID I"), refusals ("refused MESSAGE"), "recovered ID".
int conversation_child(const std::filesystem::path& dir, Report& rep, const std::function<void()>& limit,
                       const std::function<void()>& lift, int n_fail) {
  auto store = storage::ConversationStore::open_in(dir);
  if (!store) return 20;
  auto c = (*store)->create_conversation("under a limit", {});
  if (!c) return 21;
  int64_t parent = 0;
  limit();
  int n_refused = 0;
  for (int i = 0; i < 5000 && n_refused < n_fail; ++i) {
    auto id = (*store)->append_message(*c, parent, storage::Role::user, text_of(i), std::vector<int32_t>{i});
    if (id.ok()) {
      rep.line("ack", std::to_string(*id) + " " + std::to_string(i));
      parent = *id;
    } else {
      rep.line("refused", id.error().message);
      ++n_refused;
    }
  }
  if (n_refused < n_fail) return 22;  // the limit never bit
  // Chatting goes on from RAM meanwhile; here: the store object is still usable once room returns.
  lift();
  auto again = (*store)->append_message(*c, parent, storage::Role::user, text_of(7777), std::vector<int32_t>{7777});
  if (!again) {
    rep.line("still_failing", again.error().message);
    return 23;
  }
  rep.line("ack", std::to_string(*again) + " 7777");
  auto a = (*store)->begin_assistant_message(*c, *again);
  if (!a || !(*store)->append_streamed(*a, "an answer", std::vector<int32_t>{1, 2}).ok() ||
      !(*store)->finish_message(*a).ok()) {
    return 24;
  }
  rep.line("recovered", std::to_string(*a));
  return 0;
}

// Every acknowledged message is there, whole; the file passes integrity_check.
void check_acked(const std::filesystem::path& dir, const Report& rep) {
  CHECK(test::integrity(dir / "kvchat.db") == "ok");
  auto store = storage::ConversationStore::open_in(dir);
  REQUIRE(store.ok());
  const auto acks = rep.all("ack");
  CHECK(acks.size() >= 2);
  for (const std::string& a : acks) {
    std::istringstream in(a);
    int64_t id = 0;
    int i = 0;
    in >> id >> i;
    auto m = (*store)->message(id);
    REQUIRE(m.ok());
    CHECK(m->text == text_of(i));
    CHECK(m->tokens == std::vector<int32_t>{i});
  }
  auto answer = (*store)->message(std::stoll(rep.first("recovered")));
  REQUIRE(answer.ok());
  CHECK(answer->text == "an answer");
  CHECK(answer->state == storage::MessageState::complete);
}

std::vector<uint8_t> payload_of(int i, size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(i));
  std::vector<uint8_t> p(n);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  return p;
}

kv::BlockKey block_key(int i) {
  const int32_t t[1] = {i};
  return kv::chain_key(kv::BlockKey{3, 4}, t);
}

int n_refused_total = 0;  // over the cases, for the closing figures

}  // namespace

TEST_CASE("write errors: kvchat.db under a file size limit (the WAL grows into it) refuses, keeps, recovers",
          "[storage]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "data";
  Report rep(tmp.path() / "report.txt");
  const int rc = in_child([&] {
    return conversation_child(
        dir, rep, [] { limit_file_size(160 * 1024); }, lift_file_size_limit, 3);
  });
  INFO(test::read_file(tmp.path() / "report.txt"));
  REQUIRE(rc == 0);
  const auto refused = rep.all("refused");
  REQUIRE(refused.size() == 3);
  for (const std::string& m : refused) {
    CHECK(m.find("conversations database") != std::string::npos);
    CHECK(m.find("size limit") != std::string::npos);  // EFBIG, in words, with what to do
    CHECK(m.find("raise the limit or choose another --data-dir") != std::string::npos);
  }
  n_refused_total += static_cast<int>(refused.size());
  check_acked(dir, rep);
  WARN("kvchat.db: " << rep.all("ack").size() << " writes acknowledged, " << refused.size()
                     << " refused with EFBIG; integrity_check ok");
}

TEST_CASE("write errors: kvchat.db on a full 1 MiB tmpfs (ENOSPC) refuses, keeps, recovers when space is freed",
          "[storage]") {
  test::TempDir tmp;
  Report rep(tmp.path() / "report.txt");
  const auto mnt = tmp.path() / "mnt";
  std::filesystem::create_directories(mnt);
  const int rc = in_child([&] {
    // A mount namespace of its own: the tmpfs vanishes with the child, whatever happens.
    std::optional<std::string> why = test::enter_mount_namespace();
    if (!why) why = test::mount_tmpfs(mnt, 1 << 20);
    if (why) {
      rep.line("skip", "cannot mount a tmpfs here (" + *why + "); the RLIMIT_FSIZE case covers EFBIG");
      return 0;
    }
    const auto ballast = mnt / "ballast";
    const auto dir = mnt / "data";
    int code = conversation_child(
        dir, rep,
        [&] {
          // Fill what is left but 96 KiB, so that the WAL runs into the end of the disk.
          std::ofstream f(ballast, std::ios::binary);
          std::vector<char> chunk(4096, 'x');
          for (int i = 0; i < 256 && std::filesystem::space(mnt).available > 96 * 1024; ++i) {
            if (!f.write(chunk.data(), static_cast<std::streamsize>(chunk.size())) || !f.flush()) break;
          }
        },
        [&] { std::filesystem::remove(ballast); }, 3);
    // The parent cannot see this mount: check here, and copy the file out.
    rep.line("integrity", test::integrity(dir / "kvchat.db"));
    std::error_code ec;
    std::filesystem::copy(dir, tmp.path() / "copy", std::filesystem::copy_options::recursive, ec);
    if (ec) return 30;
    return code;
  });
  INFO(test::read_file(tmp.path() / "report.txt"));
  if (!rep.first("skip").empty()) KVC_SKIP(rep.first("skip"));
  REQUIRE(rc == 0);
  CHECK(rep.first("integrity") == "ok");
  const auto refused = rep.all("refused");
  REQUIRE(refused.size() == 3);
  for (const std::string& m : refused) CHECK(m.find("the disk is full; free space") != std::string::npos);
  n_refused_total += static_cast<int>(refused.size());
  check_acked(tmp.path() / "copy", rep);
}

TEST_CASE("write errors: the cold store's BLOB placement under a file size limit turns off, keeps, and comes back",
          "[storage]") {
  test::TempDir tmp;
  const auto dir = tmp.path() / "kv";
  constexpr size_t k_bytes = 32 * 1024;
  Report rep(tmp.path() / "report.txt");
  storage::ColdStoreOptions opt;  // the default placement: payloads as BLOBs in kv_cache.db
  REQUIRE(opt.placement == storage::PayloadPlacement::blob);
  opt.retry_after_ms = 1000;
  const int rc = in_child([&] {
    auto s = storage::SqliteColdStore::open(dir, opt);
    if (!s) return 40;
    for (int i = 0; i < 4; ++i) (*s)->put(block_key(i), {}, {}, payload_of(i, k_bytes));
    (*s)->flush();
    if (!(*s)->stats().healthy) return 41;
    limit_file_size(static_cast<rlim_t>(std::filesystem::file_size(dir / "kv_cache.db")) + 64 * 1024);
    int i = 4;
    for (; i < 200 && (*s)->stats().healthy; ++i) {
      (*s)->put(block_key(i), {}, {}, payload_of(i, k_bytes));
      (*s)->flush();
    }
    if ((*s)->stats().healthy) return 42;
    rep.line("refused", (*s)->stats().warning);
    if ((*s)->put(block_key(500), {}, {}, payload_of(500, k_bytes))) return 43;  // off: refused at once
    // Served from disk still, checksums verified.
    std::vector<uint8_t> out(k_bytes);
    if ((*s)->read(block_key(1), out) != kv::ColdRead::ok || out != payload_of(1, k_bytes)) return 44;
    lift_file_size_limit();
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    if (!(*s)->put(block_key(600), {}, {}, payload_of(600, k_bytes))) return 45;
    (*s)->flush();
    if (!(*s)->stats().healthy || !(*s)->stats().warning.empty()) return 46;
    if ((*s)->read(block_key(600), out) != kv::ColdRead::ok || out != payload_of(600, k_bytes)) return 47;
    rep.line("extra", std::to_string((*s)->extra_stats().n_write_failures) + " " +
                          std::to_string((*s)->extra_stats().n_recoveries));
    (*s)->check_invariants();
    return 0;
  });
  INFO(test::read_file(tmp.path() / "report.txt"));
  REQUIRE(rc == 0);
  const std::string warning = rep.first("refused");
  CHECK(warning.find("cold KV cache disabled") != std::string::npos);
  CHECK(warning.find("size limit") != std::string::npos);
  CHECK(warning.find("tries the disk again") != std::string::npos);
  CHECK(rep.first("extra") == "1 1");
  ++n_refused_total;
  CHECK(test::integrity(dir / "kv_cache.db") == "ok");
  auto s = storage::SqliteColdStore::open(dir, opt);
  REQUIRE(s.ok());
  for (int i : {0, 1, 2, 3, 600}) {
    std::vector<uint8_t> out(k_bytes);
    INFO("block " << i);
    CHECK((*s)->read(block_key(i), out) == kv::ColdRead::ok);
    CHECK(out == payload_of(i, k_bytes));
  }
  (*s)->check_invariants();
}

TEST_CASE("write errors: settings and exports under a file size limit fail whole, say why, keep the old file",
          "[storage][app]") {
  test::TempDir tmp;
  const auto settings = tmp.path() / "settings.json";
  app::AppSettings before;
  before.last_model = "/models/old.gguf";
  REQUIRE(app::save_app_settings(settings, before).ok());
  const auto export_path = tmp.path() / "conversation.md";
  Report rep(tmp.path() / "report.txt");
  const int rc = in_child([&] {
    limit_file_size(64);
    app::AppSettings after;
    after.last_model = "/models/" + std::string(200, 'n') + ".gguf";
    const Status s1 = app::save_app_settings(settings, after);
    const Status s2 = storage::write_file_replacing(export_path, std::string(4096, 'e'), "the conversation export");
    lift_file_size_limit();  // before the report: it is a file too
    if (s1.ok()) return 50;
    if (s2.ok()) return 51;
    rep.line("settings", s1.error().message);
    rep.line("export", s2.error().message);
    if (!app::save_app_settings(settings, after).ok()) return 52;
    if (!storage::write_file_replacing(export_path, std::string(4096, 'e'), "the conversation export").ok()) return 53;
    return 0;
  });
  INFO(test::read_file(tmp.path() / "report.txt"));
  REQUIRE(rc == 0);
  CHECK(rep.first("settings").find("cannot write settings file") != std::string::npos);
  CHECK(rep.first("settings").find("size limit") != std::string::npos);
  CHECK(rep.first("export").find("cannot write the conversation export") != std::string::npos);
  CHECK(rep.first("export").find("size limit") != std::string::npos);
  n_refused_total += 2;
  CHECK_FALSE(std::filesystem::exists(settings.string() + ".tmp"));  // nothing half-written left
  CHECK(app::load_app_settings(settings).last_model.size() > 200);   // the later save, whole
  CHECK(std::filesystem::file_size(export_path) == 4096);
}

TEST_CASE("write errors: an old settings file survives a refused save", "[storage][app]") {
  test::TempDir tmp;
  const auto settings = tmp.path() / "settings.json";
  app::AppSettings before;
  before.last_model = "/models/old.gguf";
  REQUIRE(app::save_app_settings(settings, before).ok());
  const int rc = in_child([&] {
    limit_file_size(16);
    app::AppSettings after;
    after.last_model = "/models/new.gguf";
    return app::save_app_settings(settings, after).ok() ? 60 : 0;
  });
  REQUIRE(rc == 0);
  CHECK(app::load_app_settings(settings).last_model == "/models/old.gguf");
  CHECK_FALSE(std::filesystem::exists(settings.string() + ".tmp"));
  WARN("writes refused over the write-error cases so far: " << n_refused_total);
}

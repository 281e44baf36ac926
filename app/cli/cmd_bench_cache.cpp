// kvchat-cli bench-cache: time to first token of a long conversation, cold and from each tier.
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "app/cli/cli_common.h"
#include "core/kv/kv_format.h"
#include "core/kv/trace_export.h"
#include "core/model/session.h"
#include "core/util/clock.h"
#include "storage/data_dir.h"
#include "storage/sqlite_cold_store.h"

extern char** environ;

namespace kvc::cli {

namespace {

struct BenchCacheArgs {
  ModelOptions model;
  int64_t n_history = 1200;
  int64_t n_new = 20;
  int32_t block_tokens = 16;
  std::string kv_type = "f16";
  int conversations = 2;
  int turns = 3;
  int repetitions = 3;
  bool json = false;
  std::string trace_file;
  std::string csv_file;
  std::string restart_child;  // hidden: run as the restarted process, prompts read from this file
};

using Clock = std::chrono::steady_clock;

// Time to first token: evaluate the prompt (reusing what the session's cache has) and
// pick the first token greedily.
Result<double> ttft(model::Session& s, std::span<const int32_t> prompt) {
  const auto t0 = Clock::now();
  auto logits = s.evaluate(prompt);
  if (!logits.ok()) return logits.error();
  volatile auto best = std::max_element(logits->begin(), logits->end()) - logits->begin();
  (void)best;
  return ms_since(t0);
}

// The restart case runs in a new process: this executable again, in the hidden mode
// `bench-cache --restart-child FILE`, over the same data dir, model and KV settings. FILE holds
// two prompts as (int32 count, int32 ids...): the history with a new message, then the history.
struct RestartRun {
  double ttft_ms = 0, ttft_same_prompt_ms = 0, restore_mb_s = 0;
  int64_t n_cached = 0, n_from_t2 = 0, n_recomputed_history = 0, n_recomputed_bad = 0, t2_bytes_read = 0;
  int64_t pid = 0;  // the restarted process's
};

Status write_prompts(const std::filesystem::path& path, const std::vector<std::vector<int32_t>>& prompts) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& p : prompts) {
    const auto n = static_cast<int32_t>(p.size());
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(reinterpret_cast<const char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(int32_t)));
  }
  if (!out.flush()) return make_error(ErrorCode::io, "cannot write " + path.string() + "; check the --data-dir");
  return {};
}

Result<std::vector<std::vector<int32_t>>> read_prompts(const std::filesystem::path& path, int n_prompts) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n_prompts; ++i) {
    int32_t n = 0;
    if (!in.read(reinterpret_cast<char*>(&n), sizeof n) || n <= 0 || n > (1 << 24)) break;
    std::vector<int32_t> p(static_cast<size_t>(n));
    if (!in.read(reinterpret_cast<char*>(p.data()), static_cast<std::streamsize>(p.size() * sizeof(int32_t)))) break;
    prompts.push_back(std::move(p));
  }
  if (static_cast<int>(prompts.size()) != n_prompts) {
    return make_error(ErrorCode::invalid_file, "prompt file " + path.string() + " is missing or truncated");
  }
  return prompts;
}

// Runs this executable again with `args` (argv[1...]); returns its stdout, its stderr is ours.
Result<std::string> run_self(const std::vector<std::string>& args, int& exit_code) {
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return make_error(ErrorCode::io, "cannot find kvchat-cli's own executable: " + ec.message());
  int fds[2];
  if (::pipe(fds) != 0) return make_error(ErrorCode::io, std::string("cannot create a pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return make_error(ErrorCode::io, "cannot start " + exe + ": " + std::strerror(rc));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0)
      out.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

Result<RestartRun> run_restart_process(const BenchCacheArgs& a, const std::string& model_path,
                                       const std::filesystem::path& data_dir,
                                       const std::filesystem::path& prompt_file) {
  std::vector<std::string> args = {"bench-cache",
                                   "--restart-child",
                                   prompt_file.string(),
                                   "-m",
                                   model_path,
                                   "--data-dir",
                                   data_dir.string(),
                                   "-t",
                                   std::to_string(a.model.threads),
                                   "-b",
                                   std::to_string(a.model.n_batch),
                                   "--history",
                                   std::to_string(a.n_history),
                                   "--new",
                                   std::to_string(a.n_new),
                                   "--block",
                                   std::to_string(a.block_tokens),
                                   "--kv-type",
                                   a.kv_type,
                                   "--quiet"};
  int exit_code = -1;
  auto out = run_self(args, exit_code);
  if (!out.ok()) return out.error();
  if (exit_code != 0) {
    return make_error(ErrorCode::internal, "the restarted bench-cache process failed (exit code " +
                                               std::to_string(exit_code) + "); its error is above");
  }
  const nlohmann::json j = nlohmann::json::parse(*out, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ttft_ms")) {
    return make_error(ErrorCode::internal, "the restarted bench-cache process printed no result: " + *out);
  }
  RestartRun r;
  r.ttft_ms = j.value("ttft_ms", 0.0);
  r.ttft_same_prompt_ms = j.value("ttft_same_prompt_ms", 0.0);
  r.restore_mb_s = j.value("t2_restore_mb_s", 0.0);
  r.n_cached = j.value("cached_tokens", int64_t{0});
  r.n_from_t2 = j.value("cached_t2_tokens", int64_t{0});
  r.n_recomputed_history = j.value("recomputed_history_tokens", int64_t{-1});
  r.n_recomputed_bad = j.value("recomputed_bad_tokens", int64_t{0});
  r.t2_bytes_read = j.value("t2_bytes_read", int64_t{0});
  r.pid = j.value("pid", int64_t{0});
  return r;
}

// Drops the store's files (DIR/kv_cache.db and its -wal, payload files) from the OS page cache
// with posix_fadvise(DONTNEED), as after a reboot or memory pressure; returns the bytes of them
// still resident afterwards (mincore), which is 0 when the drop took.
int64_t drop_page_cache(const std::filesystem::path& dir) {
  int64_t resident = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    (void)::fdatasync(fd);  // dirty pages cannot be dropped
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    const auto size = static_cast<size_t>(it->file_size(ec));
    if (size > 0) {
      void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      if (map != MAP_FAILED) {
        const long page = ::sysconf(_SC_PAGESIZE);
        std::vector<unsigned char> in_core((size + static_cast<size_t>(page) - 1) / static_cast<size_t>(page));
        if (::mincore(map, size, in_core.data()) == 0) {
          for (unsigned char c : in_core) resident += (c & 1) ? page : 0;
        }
        ::munmap(map, size);
      }
    }
    ::close(fd);
  }
  return resident;
}

model::SessionOptions bench_session_options(const BenchCacheArgs& a, kv::KvFormat fmt, int64_t n_ctx) {
  model::SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_batch = a.model.n_batch;
  o.k_format = o.v_format = fmt;
  o.block_tokens = a.block_tokens;
  o.budget.t1_bytes = int64_t{4} << 30;
  return o;
}

// The restarted process: opens the store left by the parent (read-only: it measures, it does
// not change the parent's files), resumes the conversation from T2, prints JSON on stdout.
// Exits with 3 when any history token that was on disk had to be recomputed.
int run_restart_child(BenchCacheArgs a) {
  a.model.quiet = true;
  auto fmt = parse_kv_type("--kv-type", a.kv_type);
  if (!fmt.ok()) return report(fmt.error());
  auto prompts = read_prompts(a.restart_child, 2);
  if (!prompts.ok()) return report(prompts.error());
  const std::vector<int32_t>& prompt = (*prompts)[0];
  const std::vector<int32_t>& history = (*prompts)[1];
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  storage::ColdStoreOptions co;
  co.read_only = true;
  auto cold = storage::SqliteColdStore::open(storage::resolve_data_dir(a.model.data_dir) / "bench-cache", co);
  if (!cold.ok()) return report(cold.error());
  model::SessionOptions o = bench_session_options(a, *fmt, static_cast<int64_t>(prompt.size()) + 64);

  // Each session is warmed up with an unrelated message first, as the parent's cases are
  // (weights and buffers paged in): what is timed is the resume from a store and an index
  // this process has never seen.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(m.config().n_vocab - 1));
  std::vector<int32_t> warm(static_cast<size_t>(a.n_new));
  for (auto& t : warm) t = dist(rng);
  o.cold = cold->get();
  auto s = model::Session::create(m, o);
  if (!s.ok()) return report(s.error());
  (void)ttft(*s, warm);
  const int64_t read_before = (*cold)->stats().bytes_read;
  auto ms = ttft(*s, prompt);
  if (!ms.ok()) return report(ms.error());
  const kv::PrefixInfo p = s->last_prefix();
  const int64_t bytes_read = (*cold)->stats().bytes_read - read_before;
  auto s2 = model::Session::create(m, o);
  if (!s2.ok()) return report(s2.error());
  (void)ttft(*s2, warm);
  auto same = ttft(*s2, history);
  if (!same.ok()) return report(same.error());

  // The history's full blocks were written to disk by the parent: all of them must come back.
  const int64_t B = a.block_tokens;
  const int64_t cacheable = static_cast<int64_t>(history.size()) / B * B;
  const int64_t recomputed = std::max<int64_t>(0, cacheable - p.n_cached);
  nlohmann::json j;
  j["pid"] = static_cast<int64_t>(::getpid());
  j["ttft_ms"] = *ms;
  j["ttft_same_prompt_ms"] = *same;
  j["prompt_tokens"] = p.n_prompt;
  j["cached_tokens"] = p.n_cached;
  j["cached_t2_tokens"] = p.n_from_tier[2];
  j["recomputed_history_tokens"] = recomputed;
  j["recomputed_bad_tokens"] = p.n_recomputed_bad;
  j["t2_bytes_read"] = bytes_read;
  j["promote_ms"] = p.promote_ms;
  j["t2_restore_mb_s"] = p.promote_ms > 0 ? static_cast<double>(bytes_read) / 1e6 / (p.promote_ms / 1e3) : 0.0;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  if (recomputed != 0 || p.n_recomputed_bad != 0) {
    std::fprintf(stderr,
                 "kvchat-cli: bench-cache restart: the new process recomputed %lld of the %lld history tokens on disk "
                 "(%lld lost to missing or corrupt blocks); the restart did not resume from T2\n",
                 static_cast<long long>(recomputed), static_cast<long long>(cacheable),
                 static_cast<long long>(p.n_recomputed_bad));
    return 3;
  }
  return 0;
}

int run_bench_cache(BenchCacheArgs a) {
  if (!a.restart_child.empty()) return run_restart_child(std::move(a));
  a.model.quiet = a.model.quiet || a.json;
  auto fmt = parse_kv_type("--kv-type", a.kv_type);
  if (!fmt.ok()) return report(fmt.error());
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(m.config().n_vocab - 1));
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = dist(rng);
    return v;
  };
  std::vector<int32_t> history = random_tokens(a.n_history);
  if (m.tokenizer().bos() >= 0) history.front() = m.tokenizer().bos();
  // Each case sends a message of its own, so only the history can come from the cache.
  auto with_new_message = [&](const std::vector<int32_t>& h) {
    std::vector<int32_t> p = h;
    const auto msg = random_tokens(a.n_new);
    p.insert(p.end(), msg.begin(), msg.end());
    return p;
  };
  std::vector<int32_t> other_history = random_tokens(a.n_history);
  other_history.front() = history.front();
  const std::vector<int32_t> prompt = with_new_message(history);

  // The cold tier: a real SQLite store in a scratch folder under the data dir.
  const auto cold_dir = storage::resolve_data_dir(a.model.data_dir) / "bench-cache";
  std::error_code ec;
  std::filesystem::remove_all(cold_dir, ec);
  auto cold = storage::SqliteColdStore::open(cold_dir);
  if (!cold.ok()) return report(cold.error());

  model::SessionOptions o = bench_session_options(a, *fmt, static_cast<int64_t>(prompt.size()) + 64);
  o.cold = cold->get();
  auto fresh = [&]() { return model::Session::create(m, o); };

  auto s_new = fresh();
  if (!s_new.ok()) return report(s_new.error());
  (void)ttft(*s_new, random_tokens(a.n_new));  // warm-up: page in weights and buffers
  auto new_only = ttft(*s_new, random_tokens(a.n_new));
  if (!new_only.ok()) return report(new_only.error());

  Progress bar("cold prefill of " + std::to_string(prompt.size()) + " tokens", a.model.quiet);
  auto s = fresh();
  if (!s.ok()) return report(s.error());
  (void)ttft(*s, random_tokens(a.n_new));  // warm-up, as above
  auto cold_ms = ttft(*s, with_new_message(other_history));
  if (!cold_ms.ok()) return report(cold_ms.error());
  bar.done();

  // Each case, repeated; every repetition sends a new message after the same history.
  std::vector<double> t0v, t1v, t2v, rsv, rsame, mbv, rmbv, rdrop, rdrop_mbv;
  kv::PrefixInfo p0, p1, p2;
  RestartRun restart;          // the last repetition's restarted process
  RestartRun restart_dropped;  // and the one started with the store out of the page cache
  int64_t resident_after_drop = 0;
  auto s0 = fresh();
  if (!s0.ok()) return report(s0.error());
  kv::KvEventLog events(size_t{1} << 18);
  s0->cache().set_event_log(&events);
  auto timed = [&](model::Session& sess, const std::vector<int32_t>& p, std::vector<double>& out,
                   kv::PrefixInfo& info) -> Status {
    auto ms = ttft(sess, p);
    if (!ms.ok()) return ms.error();
    out.push_back(*ms);
    info = sess.last_prefix();
    return {};
  };
  for (int rep = 0; rep < a.repetitions; ++rep) {
    // T0: the history is still in the compute pool (the previous turn just ended).
    if (auto r = s0->evaluate(history); !r.ok()) return report(r.error());
    if (auto st = timed(*s0, with_new_message(history), t0v, p0); !st.ok()) return report(st.error());
    // T1: the conversation was closed and its blocks demoted to host RAM.
    s0->clear();
    s0->cache().demote_all_unpinned(kv::Tier::t1);
    if (auto st = timed(*s0, with_new_message(history), t1v, p1); !st.ok()) return report(st.error());
    // T2: demoted to disk.
    s0->clear();
    s0->cache().demote_all_unpinned(kv::Tier::t2);
    (*cold)->flush();
    const int64_t read_before = (*cold)->stats().bytes_read;
    if (auto st = timed(*s0, with_new_message(history), t2v, p2); !st.ok()) return report(st.error());
    mbv.push_back(static_cast<double>((*cold)->stats().bytes_read - read_before) / 1e6 / (p2.promote_ms / 1e3));
    // A restart: a new kvchat-cli process opens the store from disk with an empty index,
    // first with a new message, then with the same prompt again (a regenerate: the case
    // llama.cpp's manual slot restore covers).
    (*cold)->flush();
    const auto prompt_file = cold_dir.parent_path() / "bench-cache-restart-prompts.bin";
    if (Status st = write_prompts(prompt_file, {with_new_message(history), history}); !st.ok())
      return report(st.error());
    auto child = run_restart_process(a, m.path(), storage::resolve_data_dir(a.model.data_dir), prompt_file);
    std::filesystem::remove(prompt_file, ec);
    if (!child.ok()) return report(child.error());
    rsv.push_back(child->ttft_ms);
    rsame.push_back(child->ttft_same_prompt_ms);
    rmbv.push_back(child->restore_mb_s);
    restart = *child;
    // The same restart with the store's files out of the page cache: the blocks come off the disk.
    if (Status st = write_prompts(prompt_file, {with_new_message(history), history}); !st.ok())
      return report(st.error());
    resident_after_drop = drop_page_cache(cold_dir);
    auto dropped = run_restart_process(a, m.path(), storage::resolve_data_dir(a.model.data_dir), prompt_file);
    std::filesystem::remove(prompt_file, ec);
    if (!dropped.ok()) return report(dropped.error());
    rdrop.push_back(dropped->ttft_ms);
    rdrop_mbv.push_back(dropped->restore_mb_s);
    restart_dropped = *dropped;
  }
  s0->cache().emit_tier_usage();
  if (!a.trace_file.empty() || !a.csv_file.empty()) {
    std::vector<kv::KvEvent> all;
    const auto got = events.read_since(0, all);
    if (got.n_lost > 0)
      std::fprintf(stderr, "kvchat-cli: %llu early events were overwritten\n",
                   static_cast<unsigned long long>(got.n_lost));
    if (!a.trace_file.empty()) {
      if (Status st = kv::write_chrome_trace(a.trace_file, all); !st.ok()) return report(st.error());
    }
    if (!a.csv_file.empty()) {
      if (Status st = kv::write_csv(a.csv_file, all); !st.ok()) return report(st.error());
    }
  }
  const double t0_ms = median(t0v), t1_ms = median(t1v), t2_ms = median(t2v), restart_ms = median(rsv);
  const double restart_same_ms = median(rsame), t2_mb_s = median(mbv), restart_mb_s = median(rmbv);
  const double restart_dropped_ms = median(rdrop), restart_dropped_mb_s = median(rdrop_mbv);
  const double kv_per_token = static_cast<double>(s0->cache().layout().block_bytes) / a.block_tokens;

  // A multi-conversation scenario: conversations sharing a system prompt, several turns each;
  // every turn's TTFT through the shared cache next to a cold evaluation of the same prompt.
  struct Turn {
    int conversation, turn;
    int64_t n_prompt, n_cached;
    int64_t from_tier[3];
    double cached_ms, cold_ms;
  };
  std::vector<Turn> table;
  const std::vector<int32_t> system = random_tokens(64);
  std::vector<std::vector<int32_t>> convs(static_cast<size_t>(a.conversations), system);
  o.cold = nullptr;
  auto shared = fresh();
  if (!shared.ok()) return report(shared.error());
  for (int t = 0; t < a.turns; ++t) {
    for (int c = 0; c < a.conversations; ++c) {
      auto& conv = convs[static_cast<size_t>(c)];
      const auto msg = random_tokens(a.n_new);
      conv.insert(conv.end(), msg.begin(), msg.end());
      auto cached = ttft(*shared, conv);
      if (!cached.ok()) return report(cached.error());
      const kv::PrefixInfo pi = shared->last_prefix();
      auto scratch = fresh();
      if (!scratch.ok()) return report(scratch.error());
      auto cold_turn = ttft(*scratch, conv);
      if (!cold_turn.ok()) return report(cold_turn.error());
      table.push_back({c,
                       t,
                       pi.n_prompt,
                       pi.n_cached,
                       {pi.n_from_tier[0], pi.n_from_tier[1], pi.n_from_tier[2]},
                       *cached,
                       *cold_turn});
      const auto reply = random_tokens(8);  // the reply's tokens join the stream
      conv.insert(conv.end(), reply.begin(), reply.end());
      if (auto r = shared->append(reply); !r.ok()) return report(r.error());
    }
  }

  if (a.json) {
    nlohmann::json j;
    j["model"] = m.path();
    j["backend"] = std::string(m.backend().name());
    j["kv_type"] = a.kv_type;
    j["block_tokens"] = a.block_tokens;
    j["history_tokens"] = a.n_history;
    j["new_tokens"] = a.n_new;
    j["ttft_cold_ms"] = *cold_ms;
    j["ttft_t0_ms"] = t0_ms;
    j["ttft_t1_ms"] = t1_ms;
    j["ttft_t2_ms"] = t2_ms;
    j["ttft_restart_ms"] = restart_ms;
    j["ttft_restart_same_prompt_ms"] = restart_same_ms;
    j["ttft_restart_page_cache_dropped_ms"] = restart_dropped_ms;
    j["restart_page_cache_dropped_t2_restore_mb_s"] = restart_dropped_mb_s;
    j["store_bytes_resident_after_drop"] = resident_after_drop;
    j["restart_page_cache_dropped"] = {{"cached_t2_tokens", restart_dropped.n_from_t2},
                                       {"recomputed_history_tokens", restart_dropped.n_recomputed_history}};
    j["repetitions"] = a.repetitions;
    j["prefill_new_only_ms"] = *new_only;
    j["t2_restore_mb_s"] = t2_mb_s;
    j["restart_t2_restore_mb_s"] = restart_mb_s;
    j["pid"] = static_cast<int64_t>(::getpid());
    j["restart"] = {{"pid", restart.pid},
                    {"cached_tokens", restart.n_cached},
                    {"cached_t2_tokens", restart.n_from_t2},
                    {"recomputed_history_tokens", restart.n_recomputed_history},
                    {"recomputed_bad_tokens", restart.n_recomputed_bad},
                    {"t2_bytes_read", restart.t2_bytes_read}};
    j["kv_bytes_per_token"] = kv_per_token;
    j["cached_tokens"] = {
        {"t0", p0.n_cached}, {"t1", p1.n_from_tier[1]}, {"t2", p2.n_from_tier[2]}, {"restart_t2", restart.n_from_t2}};
    for (const Turn& t : table) {
      j["turns"].push_back({{"conversation", t.conversation},
                            {"turn", t.turn},
                            {"prompt_tokens", t.n_prompt},
                            {"cached_tokens", t.n_cached},
                            {"cached_t0", t.from_tier[0]},
                            {"cached_t1", t.from_tier[1]},
                            {"cached_t2", t.from_tier[2]},
                            {"ttft_cached_ms", t.cached_ms},
                            {"ttft_cold_ms", t.cold_ms}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model   %s (%s)\nbackend %s, KV %s, blocks of %d tokens, %.0f KV bytes/token\n\n", m.path().c_str(),
              m.weight_type_summary().c_str(), std::string(m.backend().name()).c_str(), a.kv_type.c_str(),
              a.block_tokens, kv_per_token);
  std::printf("history %lld tokens + new message %lld tokens: time to first token\n",
              static_cast<long long>(a.n_history), static_cast<long long>(a.n_new));
  auto row = [&](const char* what, double ms, const kv::PrefixInfo* p) {
    std::printf("  %-28s %9.1f ms", what, ms);
    if (p || ms < *cold_ms) std::printf("  %7.1fx faster than cold", *cold_ms / ms);
    if (p)
      std::printf("   (%lld cached: T0 %lld, T1 %lld, T2 %lld)", static_cast<long long>(p->n_cached),
                  static_cast<long long>(p->n_from_tier[0]), static_cast<long long>(p->n_from_tier[1]),
                  static_cast<long long>(p->n_from_tier[2]));
    std::printf("\n");
  };
  row("cold (recompute everything)", *cold_ms, nullptr);
  row("history on T0", t0_ms, &p0);
  row("history on T1 (host RAM)", t1_ms, &p1);
  row("history on T2 (disk)", t2_ms, &p2);
  kv::PrefixInfo pr;
  pr.n_cached = restart.n_cached;
  pr.n_from_tier[2] = restart.n_from_t2;
  row("restart: a new process (T2)", restart_ms, &pr);
  row("restart, same prompt again", restart_same_ms, nullptr);
  kv::PrefixInfo pd;
  pd.n_cached = restart_dropped.n_cached;
  pd.n_from_tier[2] = restart_dropped.n_from_t2;
  row("restart, page cache dropped", restart_dropped_ms, &pd);
  row("prefill of the message alone", *new_only, nullptr);
  std::printf(
      "  T2 restore: %.0f MB/s, after a restart %.0f MB/s (%.0f MB/s with the page cache dropped: %lld bytes of "
      "the store still resident); history recomputed after the restart: %lld tokens (%lld dropped)"
      "   (medians of %d repetitions)\n\n",
      t2_mb_s, restart_mb_s, restart_dropped_mb_s, static_cast<long long>(resident_after_drop),
      static_cast<long long>(restart.n_recomputed_history),
      static_cast<long long>(restart_dropped.n_recomputed_history), a.repetitions);
  std::printf("%d conversations sharing a 64-token system prompt, %d turns each:\n", a.conversations, a.turns);
  std::printf("  conv turn  prompt  cached (T0/T1/T2)    TTFT cached   TTFT cold\n");
  for (const Turn& t : table) {
    std::printf("  %4d %4d  %6lld  %6lld (%lld/%lld/%lld)  %9.1f ms  %8.1f ms\n", t.conversation, t.turn,
                static_cast<long long>(t.n_prompt), static_cast<long long>(t.n_cached),
                static_cast<long long>(t.from_tier[0]), static_cast<long long>(t.from_tier[1]),
                static_cast<long long>(t.from_tier[2]), t.cached_ms, t.cold_ms);
  }
  return 0;
}

}  // namespace

void register_bench_cache(CLI::App& app) {
  auto a = std::make_shared<BenchCacheArgs>();
  auto* cmd =
      app.add_subcommand("bench-cache", "time to first token of a long conversation: cold vs served from T0/T1/T2");
  add_model_options(*cmd, a->model);
  cmd->add_option("--history", a->n_history, "tokens of conversation history")->capture_default_str();
  cmd->add_option("--new", a->n_new, "tokens of the new message")->capture_default_str();
  cmd->add_option("--block", a->block_tokens, "tokens per KV block")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--kv-type", a->kv_type, "KV format: f16, int8, int4, int8h, int4h, int4c")->capture_default_str();
  cmd->add_option("--conversations", a->conversations, "conversations in the multi-turn scenario")
      ->capture_default_str();
  cmd->add_option("--turns", a->turns, "turns per conversation in the scenario")->capture_default_str();
  cmd->add_option("-r,--repetitions", a->repetitions, "repetitions of each cached case (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  cmd->add_option("--trace", a->trace_file, "write the cache's events as Chrome trace JSON (opens in Perfetto)");
  cmd->add_option("--csv", a->csv_file, "write the cache's events as CSV");
  cmd->add_option("--restart-child", a->restart_child, "internal: run as the restarted process")->group("");
  cmd->add_flag("--json", a->json, "print a JSON object (ttft_cold_ms, ttft_t0_ms, ttft_t1_ms, ttft_t2_ms, ...)");
  cmd->callback([a] {
    if (int rc = run_bench_cache(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

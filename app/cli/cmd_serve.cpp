// kvchat-cli serve: the OpenAI-compatible HTTP server, until SIGINT or SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "app/cli/cli_common.h"
#include "app/server/engine_host.h"
#include "app/server/loopback.h"
#include "app/server/server.h"
#include "storage/answer_store.h"
#include "storage/data_dir.h"
#include "storage/data_dir_lock.h"

namespace kvc::cli {

namespace {

struct ServeArgs {
  ModelOptions model;
  server::ServerOptions server;
  std::string alias;
  int64_t parallel = 4;
  int64_t t0_mib = 0;  // 0, as in the app's Engine window: the machine's default (default_budgets)
  int64_t t1_mib = 0;
  int64_t disk_mib = 0;
  std::string kv_type = "f16";
};

int run_serve(ServeArgs a) {
  // Signals go to the watcher thread alone: blocked here, before any thread exists, so every
  // thread inherits the mask. SIGPIPE is ignored: a client gone mid-write is an error return.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);  // the watcher's "run() returned by itself"
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto kv_format = parse_kv_type("--kv-type", a.kv_type);
  if (!kv_format.ok()) return report(kv_format.error());
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;

  const std::filesystem::path dir = storage::resolve_data_dir(a.model.data_dir) / "serve";
  if (Status st = storage::ensure_dir(dir); !st.ok()) return report(st.error());
  // Two servers on one data directory would share its cold store and answer database.
  auto lock = storage::DataDirLock::acquire(dir, "kvchat-cli serve");
  if (!lock.ok()) return report(lock.error());

  auto answers = storage::AnswerStore::open(dir / "answers.db");
  if (!answers.ok()) {
    std::fprintf(stderr,
                 "kvchat-cli serve: answers are kept in memory only (resent histories after a restart will "
                 "be recomputed from their first answer): %s\n",
                 answers.error().what().c_str());
    answers = storage::AnswerStore::open("");
  }

  server::EngineHostOptions ho;
  ho.n_ctx = context_length(a.model, m);
  // The same defaults as the app's (free RAM and disk for this model and context).
  const BudgetDefaults d =
      default_budgets(backend::with_device_memory(read_machine_resources(dir), *loaded->backend), m.weight_bytes(),
                      true, static_cast<uint64_t>(m.config().kv_bytes_per_token(*kv_format)), ho.n_ctx);
  ho.budget = with_defaults(KvBudget{a.t0_mib << 20, a.t1_mib << 20, a.disk_mib << 20, 0}, d);
  ho.t0_contexts = d.t0_contexts;
  if (!d.warning.empty()) std::fprintf(stderr, "kvchat-cli serve: warning: this model %s\n", d.warning.c_str());
  ho.cold_dir = dir / "kv-cache";
  ho.kv_format = *kv_format;
  ho.max_running = a.parallel;
  ho.max_queue = a.server.max_queue;
  auto host = server::EngineHost::create(m, ho);
  if (!host.ok()) return report(host.error());

  server::ServerOptions so = a.server;
  so.write_timeout_s = so.read_timeout_s;  // --timeout is both
  so.model_id = a.alias.empty() ? std::filesystem::path(m.path()).stem().string() : a.alias;
  struct stat file_stat {};
  so.model_created = ::stat(m.path().c_str(), &file_stat) == 0 ? static_cast<int64_t>(file_stat.st_mtime) : 0;
  auto srv = std::make_unique<server::Server>(m, **host, **answers, so);
  if (Status st = srv->bind(); !st.ok()) return report(st.error());

  std::thread watcher([s = srv.get(), signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig == SIGUSR1) return;
    std::fprintf(stderr, "kvchat-cli serve: %s: finishing; generations in flight are cancelled\n",
                 sig == SIGINT ? "interrupted" : "terminated");
    s->stop();
  });
  std::printf("kvchat-cli serve: listening on http://%s:%d/v1 (model %s, context %lld, data %s)\n", so.host.c_str(),
              srv->port(), so.model_id.c_str(), static_cast<long long>(ho.n_ctx), dir.c_str());
  std::fflush(stdout);
  if (!server::is_loopback_address(so.host) && so.api_key.empty()) {
    std::fprintf(stderr,
                 "kvchat-cli serve: warning: listening on %s without --api-key: anyone who can reach this "
                 "machine can use the model\n",
                 so.host.c_str());
  }
  const Status ran = srv->run();
  pthread_kill(watcher.native_handle(), SIGUSR1);  // no-op if it already took a signal and returned
  watcher.join();
  srv.reset();                             // stops (if the listener ended by itself) before what it serves goes
  const Status closed = (*host)->close();  // the engine stops, blocks still queued for disk are written
  host->reset();
  const bool answers_on_disk = (*answers)->persistent();
  const std::string answers_warning = (*answers)->warning();  // a write that failed while serving
  answers->reset();
  if (!ran.ok()) return report(ran.error());
  if (!closed.ok()) {
    std::fprintf(stderr, "kvchat-cli serve: %s (a bug: please report it)\n", closed.error().message.c_str());
    return 4;
  }
  if (answers_on_disk && answers_warning.empty()) {
    std::fprintf(stderr, "kvchat-cli serve: stopped; the KV cache and the answers are on disk in %s\n", dir.c_str());
  } else if (answers_on_disk) {
    std::fprintf(stderr,
                 "kvchat-cli serve: stopped; the KV cache is on disk in %s; some answers could not be written to "
                 "answers.db (%s): their histories will be recomputed after a restart\n",
                 dir.c_str(), answers_warning.c_str());
  } else {
    std::fprintf(stderr,
                 "kvchat-cli serve: stopped; the KV cache is on disk in %s, the answers were kept in memory "
                 "only (see the warning at the start)\n",
                 dir.c_str());
  }
  return 0;
}

}  // namespace

void register_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve",
                                 "an OpenAI-compatible HTTP API (chat completions, completions, models) "
                                 "over the engine and its KV cache");
  add_model_options(*cmd, a->model);
  add_kv_type_option(*cmd, a->kv_type);
  server::ServerOptions& s = a->server;
  server::RequestLimits& l = s.limits;
  cmd->add_option("--host", s.host, "address to listen on (another than 127.0.0.1 exposes the model to the network)")
      ->capture_default_str();
  cmd->add_option("--port", s.port, "TCP port; 0 picks a free one")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option(
      "--cors-origin", s.cors_origins,
      "let web pages of this origin (https://host:port, or * for any) call the API from a browser; repeatable");
  cmd->add_option("--api-key", s.api_key, "require \"Authorization: Bearer KEY\" on every route but /health")
      ->envname("KVCHAT_API_KEY");
  cmd->add_option("--alias", a->alias, "the model id clients name (default: the model file's name without .gguf)");
  cmd->add_option("--parallel", a->parallel, "conversations the engine batches at once")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{256}));
  cmd->add_option("--max-queue", s.max_queue,
                  "requests in flight (running or waiting); beyond it: 429 with Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--max-tokens", l.max_tokens, "the most tokens a request may ask for (and the default)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_option("--max-messages", l.max_messages, "the most messages in one chat request")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--max-body", s.max_body_bytes, "the largest request body in bytes; larger: 413")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  cmd->add_option("--max-connections", s.max_connections,
                  "connections open at once, idle ones included; beyond it the longest idle one is closed, or "
                  "the new one answered 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--timeout", s.read_timeout_s,
                  "seconds a client may send or read nothing, or take to send a request's head, before it is "
                  "dropped")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--t0-mib", a->t0_mib,
                  "KV compute pool in MiB (default: room for two conversations of the context, one if RAM is short)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--t1-mib", a->t1_mib,
                  "KV cache in host RAM, MiB (default, as in the app: half the RAM left spare, 64 MiB to 8 GiB)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--disk-mib", a->disk_mib,
                  "KV cache on disk, MiB (default, as in the app: a quarter of the free disk, 256 MiB to 64 GiB)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd->callback([a] {
    if (int rc = run_serve(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

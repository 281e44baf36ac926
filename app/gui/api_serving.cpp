// ApiServing: an attached EngineHost and the HTTP server on the app's engine, on a thread of its own.
#include "app/gui/api_serving.h"

#include <signal.h>
#include <sys/stat.h>

#include <cstdio>

#include "storage/data_dir.h"

namespace kvc::app {

Result<std::unique_ptr<ApiServing>> ApiServing::start(const model::Model& m, EngineTurnRunner& runner,
                                                      const ApiServingOptions& o) {
  // A client gone mid-write is an error return of send(), not a signal that ends the app.
  ::signal(SIGPIPE, SIG_IGN);
  auto s = std::unique_ptr<ApiServing>(new ApiServing(runner));
  // The answers the API wrote, by the text a client resends, exactly where kvchat-cli serve
  // keeps its own; its lock keeps a serve on this data directory from writing them too.
  const std::filesystem::path dir = o.data_dir / "serve";
  const auto failed = [](const Error& e) { return make_error(e.code, "Serve on localhost: " + e.message); };
  if (Status st = storage::ensure_dir(dir); !st.ok()) return failed(st.error());
  auto lock = storage::DataDirLock::acquire(dir, "the kvchat app's API server");
  if (!lock.ok()) return failed(lock.error());
  s->lock_.emplace(std::move(*lock));
  auto answers = storage::AnswerStore::open(dir / "answers.db");
  if (!answers.ok()) {
    std::fprintf(stderr, "kvchat: the API's answers are kept in memory only: %s\n", answers.error().what().c_str());
    answers = storage::AnswerStore::open("");
    if (!answers.ok()) return failed(answers.error());
  }
  s->answers_ = std::move(*answers);

  server::EngineHostOptions ho;
  ho.max_queue = o.max_queue;
  ho.n_ctx = runner.n_ctx();  // the API's context checks and overflow window are the app's
  s->host_ = server::EngineHost::attach(m, runner.engine(), runner.cold_store(), ho);
  runner.set_cache_observer([h = s->host_.get()](const kv::KvCache& c, bool idle) { h->observe(c, idle); });

  server::ServerOptions so;
  so.host = "127.0.0.1";
  so.port = o.port;
  so.max_queue = o.max_queue;
  so.model_id = std::filesystem::path(m.path()).stem().string();
  struct stat file_stat {};
  so.model_created = ::stat(m.path().c_str(), &file_stat) == 0 ? static_cast<int64_t>(file_stat.st_mtime) : 0;
  so.on_generation = [p = s.get()](const engine::RequestResult& r, int64_t n_prompt) {
    if (r.state == engine::RequestState::failed) return;
    p->last_prompt_ = n_prompt;
    p->last_cached_ = r.prefix.n_cached;
    p->last_completion_ = static_cast<int64_t>(r.tokens.size());
    ++p->n_requests_;
    ++p->version_;
  };
  s->server_ = std::make_unique<server::Server>(m, *s->host_, *s->answers_, so);
  if (Status st = s->server_->bind(); !st.ok()) {
    s->stop();
    return make_error(st.error().code, "Serve on localhost: cannot listen on 127.0.0.1:" + std::to_string(o.port) +
                                           ": the port is in use (by another program, or kvchat-cli serve) or "
                                           "reserved; choose another port");
  }
  s->port_ = s->server_->port();
  s->thread_ = std::thread([srv = s->server_.get()] {
    if (Status st = srv->run(); !st.ok())
      std::fprintf(stderr, "kvchat: the API server: %s\n", st.error().what().c_str());
  });
  std::fprintf(stderr, "kvchat: serving the OpenAI API on http://127.0.0.1:%d/v1 (model %s)\n", s->port_,
               so.model_id.c_str());
  return s;
}

ApiServing::~ApiServing() { stop(); }

void ApiServing::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (server_) server_->stop();  // 503 for new requests, streams cancelled and ended, then the listener
  if (thread_.joinable()) thread_.join();
  server_.reset();
  runner_.set_cache_observer(nullptr);
  if (host_) {
    if (Status st = host_->close(); !st.ok()) std::fprintf(stderr, "kvchat: %s\n", st.error().message.c_str());
  }
  host_.reset();
  answers_.reset();
  lock_.reset();
  ++version_;
}

ui::ServeState ApiServing::counters() const {
  ui::ServeState s;
  s.on = !stopped_ && port_ > 0;
  s.port = port_;
  if (s.on) s.url = "http://127.0.0.1:" + std::to_string(port_) + "/v1";
  s.n_requests = n_requests_.load();
  s.n_in_flight = host_ && !stopped_ ? host_->n_in_flight() : 0;
  s.last_prompt_tokens = last_prompt_.load();
  s.last_cached_tokens = last_cached_.load();
  s.last_completion_tokens = last_completion_.load();
  return s;
}

}  // namespace kvc::app

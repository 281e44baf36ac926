// ApiServing: the app's "Serve on localhost": kvchat-cli serve's OpenAI-compatible API on
// 127.0.0.1, answered by the app's own engine and KV cache (one cache for the window and the API).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "app/gui/engine_turn_runner.h"
#include "app/server/engine_host.h"
#include "app/server/server.h"
#include "core/model/model.h"
#include "core/util/result.h"
#include "storage/answer_store.h"
#include "storage/data_dir_lock.h"
#include "ui/engine_state.h"

namespace kvc::app {

struct ApiServingOptions {
  int port = 8080;
  std::filesystem::path data_dir;  // API answers go to DATA_DIR/serve/answers.db, as serve keeps them
  int64_t max_queue = 32;
};

// Made, read and destroyed on the controller's worker thread (HTTP threads only bump counters).
class ApiServing {
 public:
  // Listens, or says why not (the port in use, kvchat-cli serve on this data directory). The
  // runner must outlive the ApiServing.
  static Result<std::unique_ptr<ApiServing>> start(const model::Model& m, EngineTurnRunner& runner,
                                                   const ApiServingOptions& o);
  ~ApiServing();  // stop()
  ApiServing(const ApiServing&) = delete;
  ApiServing& operator=(const ApiServing&) = delete;

  // New requests get 503, streams in flight end with an error event, the listener closes and
  // the API's conversations leave the engine (their blocks stay cached). Idempotent.
  void stop();
  int port() const { return port_; }
  // The ServeState fields it knows (on, url, port, counts); changes bump version().
  ui::ServeState counters() const;
  uint64_t version() const { return version_.load(); }

 private:
  ApiServing(EngineTurnRunner& runner) : runner_(runner) {}

  EngineTurnRunner& runner_;
  std::optional<storage::DataDirLock> lock_;
  std::unique_ptr<storage::AnswerStore> answers_;
  std::unique_ptr<server::EngineHost> host_;
  std::unique_ptr<server::Server> server_;
  std::thread thread_;  // server_->run()
  int port_ = 0;
  bool stopped_ = false;

  std::atomic<uint64_t> version_{0};
  std::atomic<int64_t> n_requests_{0};
  std::atomic<int64_t> last_prompt_{0}, last_cached_{0}, last_completion_{0};
};

}  // namespace kvc::app

// Server: kvchat's OpenAI-compatible HTTP API (cpp-httplib) over one EngineHost.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/server/engine_host.h"
#include "app/server/request_parsing.h"
#include "core/model/model.h"
#include "core/util/result.h"
#include "storage/answer_store.h"

namespace kvc::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback only unless told otherwise
  int port = 8080;                 // 0: any free port (port() says which)
  std::string api_key;             // non-empty: every route but /health wants "Authorization: Bearer KEY"
  // Web pages of these origins ("https://app.example", or "*" for any) may call the API from a
  // browser (CORS). Empty: no CORS headers, so browsers keep other origins' pages out.
  std::vector<std::string> cors_origins;
  std::string model_id;       // what /v1/models lists and requests must name
  int64_t model_created = 0;  // unix seconds, for /v1/models
  RequestLimits limits;
  int64_t max_body_bytes = int64_t{4} << 20;  // larger bodies: 413
  int n_http_threads = 0;                     // 0: the engine's queue limit + 8 (room to refuse with 429)
  int64_t max_queue = 32;                     // as EngineHostOptions::max_queue, for the thread count
  int retry_after_s = 1;                      // Retry-After of a 429
  int read_timeout_s = 10;                    // a client that sends nothing for this long is dropped
  int write_timeout_s = 10;                   // likewise one that reads nothing
  // Connections open at once (idle ones included); past it the longest idle one is closed, or
  // the new one answered 503. Idle connections hold no thread (app/server/connection_pool.h).
  int max_connections = 512;
  // Called (on the HTTP thread that served it) once each generation has ended, with its result
  // and prompt length: the app shows API requests with it.
  std::function<void(const engine::RequestResult&, int64_t n_prompt)> on_generation;
};

class Server {
 public:
  Server(const model::Model& m, EngineHost& host, storage::AnswerStore& answers, const ServerOptions& o);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; the error names the address and what to change.
  Status bind();
  int port() const;
  // Serves until stop(); returns once every handler has ended.
  Status run();
  // From any thread (the signal watcher): new requests get 503, generations in flight are
  // cancelled (streams end with an error event, others with 503), then the listener stops.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvc::server

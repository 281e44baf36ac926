// ServerContext: what every route handler shares (model, engine host, mapper, metrics, limits).
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "app/server/api_error.h"
#include "app/server/conversation_mapper.h"
#include "app/server/engine_host.h"
#include "app/server/metrics.h"
#include "app/server/server.h"

namespace kvc::server {

struct ServerContext {
  ServerContext(const model::Model& m, EngineHost& h, storage::AnswerStore& answers, const ServerOptions& o)
      : model(m), host(h), mapper(m, answers), options(o) {}

  const model::Model& model;
  EngineHost& host;
  ConversationMapper mapper;
  ServerMetrics metrics;
  ServerOptions options;
  std::atomic<bool> stopping{false};

  // Generation handlers whose response (a stream, perhaps) has not ended yet.
  std::mutex active_mu;
  std::condition_variable active_cv;
  int64_t n_active = 0;
  void begin_active();
  void end_active();
  // Waits until no generation handler is active, up to `timeout`.
  void wait_inactive(std::chrono::milliseconds timeout);
};

// The error object a route answers with: OpenAI's, or Anthropic's on /v1/messages.
enum class ErrorShape { openai, anthropic };
ErrorShape error_shape(const httplib::Request& req);

// Writes `e` as the response: its status and the error object in that shape.
void send_error(httplib::Response& res, const ApiError& e, ErrorShape shape = ErrorShape::openai);

// The routes, in routes.cpp (models, health, metrics, auth, errors) and routes_generate.cpp.
void register_routes(httplib::Server& http, ServerContext& ctx);
void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
// Anthropic's Messages API on the same mapping and engine path as chat completions.
void handle_messages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace kvc::server

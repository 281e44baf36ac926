// The server's routes: authentication, errors for unknown routes and bad HTTP, /v1/models,
// /health and /metrics (the generating routes are in routes_generate.cpp).
#include <algorithm>
#include <chrono>
#include <string>

#include "app/server/anthropic_json.h"
#include "app/server/connection_pool.h"
#include "app/server/loopback.h"
#include "app/server/openai_json.h"
#include "app/server/server_context.h"

namespace kvc::server {

namespace {

using nlohmann::json;

// Compares without stopping at the first difference, so timing does not reveal the key.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// CORS, before anything else: browsers send a preflight OPTIONS without the API key, and a
// "simple" cross-origin request (a form POST, text/plain) without a preflight at all — so every
// request that carries an Origin is checked here, before any handler runs. An allowed origin gets
// Access-Control-Allow-Origin on every answer (errors too, so a page can read them); any other
// origin is refused with what to do. Clients that are not browsers send no Origin.
bool answer_cors(const ServerOptions& o, const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  const bool any = std::find(o.cors_origins.begin(), o.cors_origins.end(), "*") != o.cors_origins.end();
  const bool allowed = !origin.empty() &&
                       (any || std::find(o.cors_origins.begin(), o.cors_origins.end(), origin) != o.cors_origins.end());
  if (allowed) {
    res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
    res.set_header("Vary", "Origin");
  }
  if (req.method != "OPTIONS" && (allowed || !req.has_header("Origin"))) return false;
  if (!allowed) {
    send_error(res, ApiError{403,
                             origin.empty() ? "OPTIONS is a CORS preflight and needs an Origin header"
                                            : "origin " + ellipsize(origin) +
                                                  " may not call this server from a browser; start "
                                                  "it with --cors-origin " +
                                                  ellipsize(origin),
                             "invalid_request_error", "", "cors_origin_not_allowed"});
    return true;
  }
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  res.set_header("Access-Control-Allow-Headers",
                 "Authorization, Content-Type, x-api-key, anthropic-version, anthropic-beta");
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

// A server on a loopback address answers only requests addressed to a loopback name: a web page
// whose name was made to resolve to 127.0.0.1 (DNS rebinding) is same-origin to the browser and
// sends no Origin on a GET, but its Host header still names it.
bool loopback_host_refused(const ServerOptions& o, const httplib::Request& req, httplib::Response& res) {
  if (!is_loopback_address(o.host) || !req.has_header("Host")) return false;
  const std::string host = req.get_header_value("Host");
  if (is_loopback_host_header(host)) return false;
  send_error(res, ApiError{403,
                           "this server listens on " + o.host +
                               " and answers requests for localhost, 127.0.0.1 or "
                               "[::1] only, not for " +
                               ellipsize(host) +
                               "; to serve other names, start it with --host "
                               "0.0.0.0 --api-key KEY",
                           "invalid_request_error", "", "host_not_allowed"});
  return true;
}

// A request whose body's length is not certain (two Content-Length values, one that is not a
// number, or one beside a Transfer-Encoding) could be read differently by a proxy in front:
// refused, and its connection closed after the answer (RFC 9112 §6.3).
bool ambiguous_length_refused(const httplib::Request& req, httplib::Response& res) {
  const auto lengths = req.headers.equal_range("Content-Length");
  std::string first;
  bool ambiguous = false, seen = false;
  for (auto it = lengths.first; it != lengths.second; ++it) {
    const std::string& v = it->second;
    const bool digits = !v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || (seen && v != first)) ambiguous = true;
    if (!seen) first = v;
    seen = true;
  }
  if (seen && req.has_header("Transfer-Encoding")) ambiguous = true;
  if (!ambiguous) return false;
  close_connection_after_response();
  res.set_header("Connection", "close");
  send_error(res, bad_request("the request's length is ambiguous: send one Content-Length with a decimal number, "
                              "or Transfer-Encoding without Content-Length"));
  return true;
}

httplib::Server::HandlerResponse check_request(ServerContext& ctx, const httplib::Request& req,
                                               httplib::Response& res) {
  const ServerOptions& o = ctx.options;
  if (ambiguous_length_refused(req, res) || answer_cors(o, req, res) || loopback_host_refused(o, req, res))
    return httplib::Server::HandlerResponse::Handled;
  const ErrorShape shape = error_shape(req);
  if (!o.api_key.empty() && req.path != "/health") {
    // The key as a bearer token (OpenAI's clients) or in x-api-key (Anthropic's).
    const std::string auth = req.get_header_value("Authorization");
    const std::string x_api_key = req.get_header_value("x-api-key");
    constexpr std::string_view bearer = "Bearer ";
    if (auth.empty() && x_api_key.empty()) {
      send_error(res,
                 ApiError{401,
                          "this server needs an API key: send the header \"Authorization: Bearer KEY\" or "
                          "\"x-api-key: KEY\"",
                          "invalid_request_error", "", "invalid_api_key"},
                 shape);
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool good =
        auth.empty() ? same_secret(x_api_key, o.api_key)
                     : auth.starts_with(bearer) && same_secret(std::string_view(auth).substr(bearer.size()), o.api_key);
    if (!good) {
      send_error(res, ApiError{401, "incorrect API key provided", "invalid_request_error", "", "invalid_api_key"},
                 shape);
      return httplib::Server::HandlerResponse::Handled;
    }
  }
  if (ctx.stopping.load() && req.path != "/health" && req.path != "/metrics") {
    send_error(
        res,
        ApiError{503, "the server is shutting down; retry once it is back", "server_error", "", "server_shutting_down"},
        shape);
    return httplib::Server::HandlerResponse::Handled;
  }
  return httplib::Server::HandlerResponse::Unhandled;
}

// Errors httplib produces itself (no route, a body over the limit, malformed HTTP), in the
// OpenAI shape; an error a handler already wrote is left as it is.
httplib::Server::HandlerResponse fill_error(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  ApiError e;
  e.status = res.status;
  switch (res.status) {
    case 404:
      e.message = "no route " + req.method + " " + req.path +
                  "; kvchat serve answers POST /v1/chat/completions, POST /v1/completions, POST /v1/messages, POST "
                  "/v1/messages/count_tokens, GET /v1/models, GET /health and GET /metrics";
      e.code = "unknown_route";
      break;
    case 413:
      e.message = "the request body is over this server's limit of " + std::to_string(ctx.options.max_body_bytes) +
                  " bytes (kvchat-cli serve --max-body)";
      e.code = "body_too_large";
      break;
    case 499: return httplib::Server::HandlerResponse::Unhandled;  // the client is gone
    default:
      e.message = "the request could not be read as HTTP/1.1 (status " + std::to_string(res.status) + ")";
      if (res.status >= 500) e.type = "server_error";
  }
  send_error(res, e, error_shape(req));
  return httplib::Server::HandlerResponse::Handled;
}

void handle_models(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  json list{{"object", "list"}, {"data", json::array({model_object(ctx.options.model_id, ctx.options.model_created)})}};
  res.set_content(dump(list), "application/json");
}

void handle_model(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
  if (id != ctx.options.model_id) {
    send_error(res,
               ApiError{404, "the model `" + id + "` does not exist; this server serves `" + ctx.options.model_id + "`",
                        "invalid_request_error", "model", "model_not_found"});
    return;
  }
  res.set_content(dump(model_object(ctx.options.model_id, ctx.options.model_created)), "application/json");
}

void handle_health(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  if (ctx.stopping.load()) {
    res.status = 503;
    res.set_content(R"({"status":"shutting down"})", "application/json");
    return;
  }
  json h{{"status", "ok"},
         {"model", ctx.options.model_id},
         {"requests_in_flight", ctx.host.n_in_flight()},
         {"disk_tier", ctx.host.has_disk_tier()}};
  res.set_content(dump(h), "application/json");
}

void handle_metrics(ServerContext& ctx, const httplib::Request&, httplib::Response& res) {
  res.set_content(ctx.metrics.render(ctx.host.cache_snapshot(), ctx.host.engine_stats(), ctx.host.n_in_flight()),
                  "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

void ServerContext::begin_active() {
  std::lock_guard lock(active_mu);
  ++n_active;
}

void ServerContext::end_active() {
  {
    std::lock_guard lock(active_mu);
    --n_active;
  }
  active_cv.notify_all();
}

void ServerContext::wait_inactive(std::chrono::milliseconds timeout) {
  std::unique_lock lock(active_mu);
  active_cv.wait_for(lock, timeout, [&] { return n_active == 0; });
}

ErrorShape error_shape(const httplib::Request& req) {
  return req.path.starts_with("/v1/messages") ? ErrorShape::anthropic : ErrorShape::openai;
}

void send_error(httplib::Response& res, const ApiError& e, ErrorShape shape) {
  res.status = e.status;
  res.set_content(dump(shape == ErrorShape::anthropic ? anthropic_error(e) : e.to_json()), "application/json");
}

void register_routes(httplib::Server& http, ServerContext& ctx) {
  http.set_pre_routing_handler(
      [&ctx](const httplib::Request& req, httplib::Response& res) { return check_request(ctx, req, res); });
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [&ctx](const httplib::Request& req, httplib::Response& res) { return fill_error(ctx, req, res); }));
  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) { what = e.what(); } catch (...) {
    }
    send_error(res, ApiError{500, "internal error: " + ellipsize(what), "server_error", "", ""}, error_shape(req));
  });
  http.set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    ctx.metrics.count_request(req.path, res.status);
  });
  http.Post("/v1/chat/completions",
            [&ctx](const httplib::Request& req, httplib::Response& res) { handle_chat_completions(ctx, req, res); });
  http.Post("/v1/completions",
            [&ctx](const httplib::Request& req, httplib::Response& res) { handle_completions(ctx, req, res); });
  http.Post("/v1/messages",
            [&ctx](const httplib::Request& req, httplib::Response& res) { handle_messages(ctx, req, res); });
  http.Post("/v1/messages/count_tokens",
            [&ctx](const httplib::Request& req, httplib::Response& res) { handle_count_tokens(ctx, req, res); });
  http.Get("/v1/models", [&ctx](const httplib::Request& req, httplib::Response& res) { handle_models(ctx, req, res); });
  http.Get("/v1/models/(.+)",
           [&ctx](const httplib::Request& req, httplib::Response& res) { handle_model(ctx, req, res); });
  http.Get("/health", [&ctx](const httplib::Request& req, httplib::Response& res) { handle_health(ctx, req, res); });
  http.Get("/metrics", [&ctx](const httplib::Request& req, httplib::Response& res) { handle_metrics(ctx, req, res); });
}

}  // namespace kvc::server

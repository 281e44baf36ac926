// Relaying a generation to its client: whole or as server-sent events, with cancellation.
#include "app/server/streaming.h"

#include <chrono>
#include <optional>

#include "app/server/connection_watch.h"
#include "core/chat/reasoning.h"

namespace kvc::server {

namespace {

using nlohmann::json;
constexpr auto k_poll = std::chrono::milliseconds(100);
constexpr auto k_drain_limit = std::chrono::seconds(30);
constexpr auto k_ping_every = std::chrono::seconds(10);  // an Anthropic stream's keep-alive while nothing comes

// The reply with what the engine cut at its end (a stop string), to tell which one; "" otherwise.
std::string generated_text(const ServerContext& ctx, const engine::RequestResult& r) {
  if (r.reason != model::StopReason::stop_string) return "";
  return ctx.model.tokenizer().decode(r.tokens);
}

// Bookkeeping once a generation ended: metrics, and the answer remembered.
void conclude(ServerContext& ctx, const Generation& g, const GenerationJob& job) {
  const engine::RequestResult& r = g.result();
  ctx.metrics.observe_generation(job.endpoint, r, job.n_prompt);
  if (ctx.options.on_generation) ctx.options.on_generation(r, job.n_prompt);
  if (r.state == engine::RequestState::finished && job.on_finished) job.on_finished(r);
}

// Cancels if not done and waits for the end (the engine answers a cancel within a step).
void drain(Generation& g) {
  g.cancel();
  const auto deadline = std::chrono::steady_clock::now() + k_drain_limit;
  while (!g.wait(k_poll).done && std::chrono::steady_clock::now() < deadline) {}
}

// The state of one streamed response, shared by httplib's provider and releaser.
struct Stream {
  Stream(ServerContext& c, std::shared_ptr<Generation> gen, GenerationJob j)
      : ctx(c), g(std::move(gen)), job(std::move(j)) {}
  ServerContext& ctx;
  std::shared_ptr<Generation> g;
  GenerationJob job;
  ConnectionWatch watch;  // made on the worker serving the request: its connection
  bool role_sent = false;
  bool concluded = false;
  bool shutting_down = false;
  chat::ReasoningStream harmony;              // job.harmony: the reply split as it streams
  std::optional<chat::ToolCallStream> calls;  // job.tools: the reply read for tool calls as it streams
  bool called = false;                        // a call was streamed: finish_reason "tool_calls"
  std::optional<AnthropicStream> anthropic;   // job.anthropic: the reply as Anthropic's events
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();

  std::string call_events(const chat::ToolCallStream::Delta& d) {
    called = called || !d.calls.empty();
    return tool_stream_events(job.ids, d);
  }

  std::string delta_events(const chat::ReasoningStream::Delta& d) const {
    std::string out;
    if (!d.reasoning.empty()) out += sse_event(chat_chunk(job.ids, json{{"reasoning_content", d.reasoning}}, ""));
    if (!d.answer.empty()) out += sse_event(chat_chunk(job.ids, json{{"content", d.answer}}, ""));
    return out;
  }

  std::string text_event(const std::string& text) {
    if (anthropic) return anthropic->feed(text);
    if (job.endpoint == Endpoint::chat && job.tools) {
      if (!calls) calls.emplace(job.tool_format, job.ids.id);
      return call_events(calls->feed(text));
    }
    if (job.endpoint == Endpoint::chat && job.harmony) { return delta_events(harmony.feed(text)); }
    if (job.endpoint == Endpoint::chat) return sse_event(chat_chunk(job.ids, json{{"content", text}}, ""));
    return sse_event(text_completion_chunk(job.ids, text, ""));
  }

  // The events that end a stream: finish reason, usage, [DONE]; or an error event.
  std::string closing_events() {
    const engine::RequestResult& r = g->result();
    if (anthropic) {
      if (r.state != engine::RequestState::finished)
        return named_event(anthropic_error(generation_error(r, shutting_down)));
      return anthropic->finish(r, generated_text(ctx, r));
    }
    if (r.state != engine::RequestState::finished) return sse_event(generation_error(r, shutting_down).to_json());
    std::string out;
    if (job.endpoint == Endpoint::chat) {
      out += sse_event(chat_chunk(job.ids, json::object(), called ? "tool_calls" : finish_reason(r.reason)));
      if (job.include_usage)
        out += sse_event(usage_chunk(job.ids, "chat.completion.chunk", r, job.n_prompt, job.history));
    } else {
      out += sse_event(text_completion_chunk(job.ids, "", finish_reason(r.reason)));
      if (job.include_usage) out += sse_event(usage_chunk(job.ids, "text_completion", r, job.n_prompt, HistoryInfo{}));
    }
    out += k_sse_done;
    return out;
  }

  // One call of httplib's provider: false ends the response (the client is gone).
  bool pump(httplib::DataSink& sink) {
    auto write = [&](const std::string& s) {
      last_write = std::chrono::steady_clock::now();
      return sink.write(s.data(), s.size());
    };
    if (!role_sent && anthropic) {
      role_sent = true;
      if (!write(anthropic->start())) return false;
    }
    if (!role_sent && job.endpoint == Endpoint::chat) {
      role_sent = true;
      if (!write(sse_event(chat_chunk(job.ids, json{{"role", "assistant"}, {"content", ""}}, "")))) return false;
    }
    const Generation::Update u = g->wait(k_poll);
    if (!u.text.empty()) {
      const std::string event = text_event(u.text);
      if (!event.empty() && !write(event)) return false;
    }
    if (!u.done) {
      if (watch.closed()) return false;
      if (anthropic && std::chrono::steady_clock::now() - last_write > k_ping_every && !write(AnthropicStream::ping()))
        return false;
      if (ctx.stopping.load() && !g->cancel_requested()) {
        shutting_down = true;
        g->cancel();
      }
      return true;
    }
    concluded = true;
    conclude(ctx, *g, job);
    // (an Anthropic stream's closing events finish what it held back)
    if (!anthropic && job.endpoint == Endpoint::chat && job.tools) {  // what was held back as a call's possible start
      if (!calls) calls.emplace(job.tool_format, job.ids.id);
      const std::string rest = call_events(calls->finish());
      if (!rest.empty() && !write(rest)) return false;
    } else if (!anthropic && job.endpoint == Endpoint::chat && job.harmony) {  // held back as a marker's start
      const std::string rest = delta_events(harmony.finish());
      if (!rest.empty() && !write(rest)) return false;
    }
    const bool ok = write(closing_events());
    sink.done();
    return ok;
  }

  // httplib is done with the response, whatever happened to it.
  void release() {
    if (!concluded) {
      drain(*g);
      concluded = true;
      conclude(ctx, *g, job);
    }
    ctx.end_active();
  }
};

}  // namespace

ApiError generation_error(const engine::RequestResult& r, bool shutting_down) {
  if (shutting_down || r.state == engine::RequestState::cancelled) {
    return ApiError{503, "the server is shutting down; retry once it is back", "server_error", "",
                    "server_shutting_down"};
  }
  switch (r.error.code) {
    case ErrorCode::invalid_argument: return bad_request(r.error.message, "messages");
    case ErrorCode::out_of_memory: return ApiError{503, r.error.message, "server_error", "", "kv_cache_full"};
    default: return ApiError{500, r.error.message, "server_error", "", ""};
  }
}

void respond_whole(ServerContext& ctx, httplib::Response& res, std::shared_ptr<Generation> g, GenerationJob job) {
  ctx.begin_active();
  const ConnectionWatch watch;
  bool gone = false, shutting_down = false;
  for (;;) {
    if (g->wait(k_poll).done) break;
    if (g->cancel_requested()) continue;
    if (watch.closed()) {
      gone = true;
      g->cancel();
    } else if (ctx.stopping.load()) {
      shutting_down = true;
      g->cancel();
    }
  }
  conclude(ctx, *g, job);
  const engine::RequestResult& r = g->result();
  if (gone) {
    res.status = 499;  // nginx's "client closed request": nobody reads it, the logs and metrics do
  } else if (r.state != engine::RequestState::finished) {
    send_error(res, generation_error(r, shutting_down), job.anthropic ? ErrorShape::anthropic : ErrorShape::openai);
  } else if (job.anthropic) {
    res.set_content(dump(anthropic_message(*job.anthropic, r, generated_text(ctx, r))), "application/json");
  } else {
    json body = job.endpoint == Endpoint::chat ? chat_completion(job.ids, r, job.n_prompt, job.history)
                                               : text_completion(job.ids, r, job.n_prompt);
    if (job.endpoint == Endpoint::chat && job.tools) {
      set_tool_reply(body, chat::parse_reply(r.text, job.tool_format, /*finished=*/true, job.ids.id));
    } else if (job.endpoint == Endpoint::chat && job.harmony) {
      const chat::ReasoningSplit split = chat::split_reasoning(r.text, /*finished=*/true);
      json& message = body["choices"][0]["message"];
      message["content"] = split.answer;
      if (split.has_reasoning) message["reasoning_content"] = split.reasoning;
    }
    res.set_content(dump(body), "application/json");
  }
  ctx.end_active();
}

void respond_stream(ServerContext& ctx, httplib::Response& res, std::shared_ptr<Generation> g, GenerationJob job) {
  ctx.begin_active();
  auto s = std::make_shared<Stream>(ctx, std::move(g), std::move(job));
  if (s->job.anthropic) s->anthropic.emplace(*s->job.anthropic);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [s](size_t, httplib::DataSink& sink) { return s->pump(sink); }, [s](bool) { s->release(); });
}

}  // namespace kvc::server

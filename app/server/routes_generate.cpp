// POST /v1/chat/completions, /v1/completions and /v1/messages (+ count_tokens): parse, map to tokens, admit, answer.
#include <algorithm>
#include <optional>
#include <span>

#include "app/common/chat_window.h"
#include "app/server/anthropic_request.h"
#include "app/server/openai_json.h"
#include "app/server/response_format.h"
#include "app/server/server_context.h"
#include "app/server/streaming.h"
#include "core/chat/reasoning.h"

namespace kvc::server {

namespace {

ApiError unknown_model(const ServerContext& ctx, const std::string& model) {
  return ApiError{
      404,
      "the model `" + model + "` does not exist; this server serves `" + ctx.options.model_id + "` (GET /v1/models)",
      "invalid_request_error", "model", "model_not_found"};
}

// The engine's options for a prompt of n_prompt tokens, or the 400 when it cannot be answered.
Parsed<engine::RequestOptions> request_options(const ServerContext& ctx, const GenerationParams& p, int64_t n_prompt,
                                               std::vector<std::string> stops, const char* prompt_param) {
  const int64_t n_ctx = ctx.host.n_ctx();
  if (n_prompt >= n_ctx) {
    ApiError e =
        bad_request("the prompt has " + std::to_string(n_prompt) + " tokens, which fills this server's context of " +
                        std::to_string(n_ctx) + " tokens; shorten it or start kvchat-cli serve with a larger -c",
                    prompt_param);
    e.code = "context_length_exceeded";
    return Parsed<engine::RequestOptions>::failure(e);
  }
  engine::RequestOptions o;
  o.max_tokens = std::min(p.max_tokens > 0 ? p.max_tokens : ctx.options.limits.max_tokens, n_ctx - n_prompt);
  o.sampling = p.sampling;
  o.grammar = p.grammar;
  o.stop_strings = std::move(stops);
  o.stop_strings.insert(o.stop_strings.end(), p.stop.begin(), p.stop.end());
  o.stop_at_eog = true;
  return Parsed<engine::RequestOptions>::success(std::move(o));
}

// A prompt of `n_bytes` of text that cannot fit the context whatever its tokens: the 400 to
// refuse it with before it is tokenized (tokenizing megabytes costs hundreds of MB), or nothing.
std::optional<ApiError> cannot_fit(const ServerContext& ctx, size_t n_bytes, const std::string& what,
                                   const char* param) {
  const size_t per_token = ctx.model.tokenizer().max_bytes_per_token();
  if (per_token == 0) return std::nullopt;
  const auto n_ctx = static_cast<size_t>(ctx.host.n_ctx());
  const size_t at_least = (n_bytes + per_token - 1) / per_token;
  if (at_least < n_ctx) return std::nullopt;
  ApiError e = bad_request(what + " is " + std::to_string(n_bytes) + " bytes, at least " + std::to_string(at_least) +
                               " tokens (a token of this model spells at most " + std::to_string(per_token) +
                               " bytes), which fills this server's context of " + std::to_string(n_ctx) +
                               " tokens; shorten it or start kvchat-cli serve with a larger -c",
                           param);
  e.code = "context_length_exceeded";
  return e;
}

// The prompt of a chat request under the context overflow policy (app/common/chat_window.h).
// The client resends the history, so the cut is replayed from it on every request: the same
// history gives the same window, before and after a restart, and its turns hit the cache.
// The room kept for answers is the server's --max-tokens (at most a quarter of the context),
// not the request's, so that every request of a conversation replays the same cuts.
Parsed<app::ChatWindow> context_window(const ServerContext& ctx, const ChatRequest& cr, const MappedPrompt& mapped) {
  std::vector<app::StreamMessage> messages;
  for (const MappedMessage& m : mapped.messages) {
    messages.push_back({m.role, m.text, std::span(mapped.tokens).subspan(m.begin, m.end - m.begin)});
  }
  const std::string_view system = !cr.messages.empty() && cr.messages[0].role == "system"
                                      ? std::string_view(cr.messages[0].content)
                                      : std::string_view();
  chat::WindowPolicy policy;
  policy.n_ctx = ctx.host.n_ctx();
  policy.n_reserve = chat::answer_reserve(policy.n_ctx, ctx.options.limits.max_tokens);
  auto w =
      app::plan_chat_window(ctx.model.tokenizer(), ctx.model.chat_template(), system, messages, policy, std::nullopt);
  if (!w.ok()) {
    ApiError e = bad_request(w.error().message + " (kvchat-cli serve -c)", "messages");
    if (w.error().code == ErrorCode::invalid_argument) e.code = "context_length_exceeded";
    return Parsed<app::ChatWindow>::failure(e);
  }
  return Parsed<app::ChatWindow>::success(std::move(*w));
}

// Admits the generation and answers it, whole or streamed.
void run(ServerContext& ctx, httplib::Response& res, GenerationRequest gr, const GenerationParams& p,
         GenerationJob job) {
  const ErrorShape shape = job.anthropic ? ErrorShape::anthropic : ErrorShape::openai;
  Refusal refusal = Refusal::none;
  std::shared_ptr<Generation> g = ctx.host.start(std::move(gr), refusal);
  if (!g) {
    if (refusal == Refusal::queue_full) {
      res.set_header("Retry-After", std::to_string(ctx.options.retry_after_s));
      send_error(res,
                 ApiError{429,
                          "the server is busy: " + std::to_string(ctx.host.n_in_flight()) +
                              " requests are in flight, its limit (kvchat-cli serve --max-queue); retry shortly",
                          "rate_limit_exceeded", "", "queue_full"},
                 shape);
    } else {
      send_error(res,
                 ApiError{503, "the server is shutting down; retry once it is back", "server_error", "",
                          "server_shutting_down"},
                 shape);
    }
    return;
  }
  job.include_usage = p.include_usage;
  if (p.stream) {
    respond_stream(ctx, res, std::move(g), std::move(job));
  } else {
    respond_whole(ctx, res, std::move(g), std::move(job));
  }
}

// Sets the request's grammar to a call of its tools (or of the named one) in the model's format.
std::optional<ApiError> force_tool_call(const ServerContext& ctx, ChatRequest& cr) {
  const char* param = "tool_choice";
  if (cr.params.grammar)
    return bad_request(
        "tool_choice \"required\" or a named function cannot be combined with a "
        "response_format other than text: the reply is a tool call",
        "response_format");
  const chat::ToolFormat format = chat::tool_format_of(ctx.model.chat_template().family());
  if (format == chat::ToolFormat::none) {
    ApiError e = bad_request(
        "this model's chat template has no tool-call format kvchat knows, so a call cannot be "
        "forced; send tool_choice \"auto\"",
        param);
    e.code = "unsupported_tool_choice";
    return e;
  }
  std::optional<std::string> only;
  if (cr.tool_choice == ToolChoice::named) only = cr.tool_choice_name;
  auto constraints = chat::tool_constraints(format, cr.tools_json, only, cr.parallel_tool_calls);
  if (!constraints.ok()) return bad_request(constraints.error().message, "tools");
  auto grammar = tool_call_grammar(*constraints, ctx.model.tokenizer());
  if (!grammar.ok()) return bad_request("a tool's parameters: " + grammar.error().message, "tools");
  cr.params.grammar = std::move(*grammar);
  return std::nullopt;
}

// A chat request mapped to its prompt (the history through the conversation mapper, the context
// window, the engine's options), with its job; or the error to answer with. /v1/chat/completions
// and /v1/messages both come here: one mapping, one engine path, one cache.
struct PreparedChat {
  GenerationRequest gr;
  GenerationJob job;
  std::vector<int32_t> stream;  // the whole conversation's tokens, what the answer is remembered after
};

// force: build the grammar of a forced call (not needed to count a prompt's tokens).
Parsed<PreparedChat> prepare_chat(ServerContext& ctx, ChatRequest& cr, bool force) {
  using P = Parsed<PreparedChat>;
  if (cr.model != ctx.options.model_id) return P::failure(unknown_model(ctx, cr.model));
  // The window keeps the system prompt and the last message whatever else it drops.
  size_t n_kept_bytes = cr.messages.empty() ? 0 : cr.messages.back().content.size();
  if (cr.messages.size() > 1 && cr.messages[0].role == "system") n_kept_bytes += cr.messages[0].content.size();
  if (auto e = cannot_fit(ctx, n_kept_bytes, "the last message (with the system prompt)", "messages"))
    return P::failure(*e);
  // Tools: rendered by the model's template and its reply read for calls, unless tool_choice is
  // "none" (then neither: the model sees no tools, as OpenAI's none means no call). A forced call
  // ("required", a named function) is held by grammar-constrained sampling to the shape of a call
  // in the template's format (core/chat/tool_constraint.h), with arguments its schema allows.
  const bool tools = !cr.tools_json.empty() && cr.tool_choice != ToolChoice::none;
  if (force && tools && (cr.tool_choice == ToolChoice::required || cr.tool_choice == ToolChoice::named)) {
    if (auto e = force_tool_call(ctx, cr)) return P::failure(*e);
  }
  auto mapped = ctx.mapper.map(cr.messages, cr.reasoning_effort, tools ? cr.tools_json : std::string());
  if (!mapped.ok()) return P::failure(bad_request(mapped.error().message, "messages"));
  auto window = context_window(ctx, cr, *mapped);
  if (!window.ok) return P::failure(window.error);
  auto options = request_options(ctx, cr.params, static_cast<int64_t>(window.value.prompt.size()),
                                 ctx.model.chat_template().stop_strings(), "messages");
  if (!options.ok) return P::failure(options.error);

  PreparedChat out;
  GenerationJob& job = out.job;
  job.endpoint = Endpoint::chat;
  job.harmony = ctx.model.chat_template().family() == chat::ChatTemplate::Family::harmony;
  job.tool_format = chat::tool_format_of(ctx.model.chat_template().family());
  job.tools = tools && job.tool_format != chat::ToolFormat::none;
  job.n_prompt = static_cast<int64_t>(window.value.prompt.size());
  job.history = HistoryInfo{mapped->conversation, mapped->n_answers, mapped->n_answers_recalled,
                            static_cast<int64_t>(window.value.first)};
  out.stream = std::move(mapped->tokens);
  out.gr = GenerationRequest{mapped->conversation, std::move(window.value.prompt), std::move(options.value)};
  return P::success(std::move(out));
}

}  // namespace

void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  Parsed<ChatRequest> parsed = parse_chat_request(req.body, ctx.options.limits);
  if (!parsed.ok) return send_error(res, parsed.error);
  ChatRequest& cr = parsed.value;
  Parsed<PreparedChat> prepared = prepare_chat(ctx, cr, /*force=*/true);
  if (!prepared.ok) return send_error(res, prepared.error);
  PreparedChat& pc = prepared.value;
  pc.job.ids = ResponseIds{new_response_id("chatcmpl-"), unix_now(), ctx.options.model_id};
  // An answer is remembered after the whole stream (what the next request maps it back after),
  // whatever window of it the engine ran.
  pc.job.on_finished = [&mapper = ctx.mapper, stream = std::move(pc.stream)](const engine::RequestResult& r) {
    mapper.remember(stream, r.text, r.tokens);
  };
  run(ctx, res, std::move(pc.gr), cr.params, std::move(pc.job));
}

void handle_messages(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const ErrorShape shape = ErrorShape::anthropic;
  Parsed<MessagesRequest> parsed = parse_messages_request(req.body, ctx.options.limits, MessagesBody::create,
                                                          ctx.model.chat_template().uses_reasoning_effort());
  if (!parsed.ok) return send_error(res, parsed.error, shape);
  ChatRequest& cr = parsed.value.chat;
  Parsed<PreparedChat> prepared = prepare_chat(ctx, cr, /*force=*/true);
  if (!prepared.ok) return send_error(res, prepared.error, shape);
  PreparedChat& pc = prepared.value;
  pc.job.ids = ResponseIds{new_response_id("msg_"), unix_now(), ctx.options.model_id};
  AnthropicReply a;
  a.ids = pc.job.ids;
  a.n_prompt = pc.job.n_prompt;
  a.history = pc.job.history;
  a.tools = pc.job.tools;
  a.tool_format = pc.job.tool_format;
  a.stop_sequences = cr.params.stop;
  const std::vector<int32_t>& prompt = pc.gr.prompt;
  const std::string tail = ctx.model.tokenizer().decode(std::span(prompt).last(std::min<size_t>(prompt.size(), 4)));
  a.opened_thinking = tail.find_last_not_of(" \n\r\t") != std::string::npos &&
                      tail.substr(0, tail.find_last_not_of(" \n\r\t") + 1).ends_with(chat::k_think_open);
  pc.job.anthropic = std::move(a);
  // Remembered under the whole reply (as the OpenAI route does) and under its text blocks, the
  // content a client sends back when the reply had reasoning: either maps back to the engine's ids.
  pc.job.on_finished = [&mapper = ctx.mapper, stream = std::move(pc.stream),
                        reply = *pc.job.anthropic](const engine::RequestResult& r) {
    mapper.remember(stream, r.text, r.tokens);
    const ReplyBlocks b = reply_blocks(reply, r.text, /*finished=*/true);
    if (b.calls.empty() && b.text != r.text) mapper.remember(stream, b.text, r.tokens);
  };
  run(ctx, res, std::move(pc.gr), cr.params, std::move(pc.job));
}

void handle_count_tokens(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const ErrorShape shape = ErrorShape::anthropic;
  Parsed<MessagesRequest> parsed = parse_messages_request(req.body, ctx.options.limits, MessagesBody::count_tokens,
                                                          ctx.model.chat_template().uses_reasoning_effort());
  if (!parsed.ok) return send_error(res, parsed.error, shape);
  Parsed<PreparedChat> prepared = prepare_chat(ctx, parsed.value.chat, /*force=*/false);
  if (!prepared.ok) return send_error(res, prepared.error, shape);
  res.set_content(dump(nlohmann::json{{"input_tokens", prepared.value.job.n_prompt}}), "application/json");
}

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
  Parsed<CompletionRequest> parsed = parse_completion_request(req.body, ctx.options.limits);
  if (!parsed.ok) return send_error(res, parsed.error);
  CompletionRequest& cr = parsed.value;
  if (cr.model != ctx.options.model_id) return send_error(res, unknown_model(ctx, cr.model));
  const tokenizer::Tokenizer& tok = ctx.model.tokenizer();
  std::vector<int32_t> prompt;
  if (cr.prompt_is_ids) {
    for (const int32_t t : cr.prompt_ids) {
      if (t >= tok.n_vocab()) {
        return send_error(res, bad_request("prompt: token id " + std::to_string(t) + " is outside the vocabulary of " +
                                               std::to_string(tok.n_vocab()),
                                           "prompt"));
      }
    }
    prompt = std::move(cr.prompt_ids);
  } else {
    if (auto e = cannot_fit(ctx, cr.prompt.size(), "the prompt", "prompt")) return send_error(res, *e);
    prompt =
        tok.encode(cr.prompt, tok.wants_bos(), true);  // control tokens written as text are parsed, as llama.cpp does
  }
  if (prompt.empty()) return send_error(res, bad_request("prompt is empty", "prompt"));
  auto options = request_options(ctx, cr.params, static_cast<int64_t>(prompt.size()), {}, "prompt");
  if (!options.ok) return send_error(res, options.error);

  GenerationJob job;
  job.endpoint = Endpoint::completion;
  job.ids = ResponseIds{new_response_id("cmpl-"), unix_now(), ctx.options.model_id};
  job.n_prompt = static_cast<int64_t>(prompt.size());
  GenerationRequest gr{0, std::move(prompt), std::move(options.value)};
  run(ctx, res, std::move(gr), cr.params, std::move(job));
}

}  // namespace kvc::server

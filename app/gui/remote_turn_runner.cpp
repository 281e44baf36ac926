// A turn streamed from a remote server, and what that server says of its cache.
#include "app/gui/remote_turn_runner.h"

#include <algorithm>

#include "app/remote/prometheus_text.h"
#include "app/remote/server_cache_report.h"

namespace kvc::app {

RemoteTurnRunner::RemoteTurnRunner(remote::Endpoint endpoint, std::string model)
    : endpoint_(std::move(endpoint)), model_(std::move(model)) {
  view_.active = true;
  view_.url = endpoint_.base_url;
  view_.model = model_;
}

void RemoteTurnRunner::refresh_memory() {
  ++version_;
  ++view_.n_metrics_reads;
  auto page = remote::fetch_metrics(endpoint_);
  if (!page.ok()) {
    view_.metrics_error = page.error().message;
    remote::read_cache_report(remote::PromPage{}, view_);
    return;
  }
  const remote::PromPage parsed = remote::parse_prometheus_text(*page);
  view_.metrics_error.clear();
  if (parsed.samples.empty() && parsed.n_bad_lines > 0) {
    view_.metrics_error = remote::metrics_url(endpoint_.base_url) + " is not a Prometheus text page (it begins \"" +
                          parsed.first_bad_line + "\")";
  }
  remote::read_cache_report(parsed, view_);
}

Result<TurnResult> RemoteTurnRunner::run(const TurnRequest& request,
                                         const std::function<bool(const TurnDelta&)>& on_delta) {
  std::vector<chat::ChatMessage> messages;
  if (!request.system_prompt.empty()) messages.emplace_back("system", request.system_prompt);
  messages.insert(messages.end(), request.messages.begin(), request.messages.end());
  remote::ChatOptions o;
  o.model = model_;
  o.generation = request.options;
  remote::StreamedAnswer a;
  const Status st = remote::stream_chat(
      endpoint_, o, messages, [&](std::string_view text) { return on_delta(TurnDelta{text}); }, a);
  ++view_.n_answers;
  view_.last_prompt_tokens = a.prompt_tokens;
  view_.last_cached_tokens = a.cached_tokens;
  if (a.cached_tokens >= 0) ++view_.n_answers_with_cached;
  refresh_memory();
  if (!st.ok()) return st.error();
  TurnResult r;
  r.text = a.text;
  r.stats.valid = true;
  // Counted by the server when its usage says; else one token per streamed chunk (what servers send).
  r.stats.n_tokens = a.completion_tokens >= 0 ? a.completion_tokens : a.n_deltas;
  r.stats.n_prompt = std::max<int64_t>(0, a.prompt_tokens);
  r.stats.n_prompt_reused = std::clamp<int64_t>(a.cached_tokens, 0, r.stats.n_prompt);
  r.stats.ttft_ms = a.ttft_ms;
  r.stats.decode_ms = a.decode_ms;
  r.stats.stop_reason = a.stopped ? "stopped" : a.finish_reason.empty() ? "stop" : a.finish_reason;
  return r;
}

}  // namespace kvc::app

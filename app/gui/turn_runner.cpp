// SessionTurnRunner: turns run on one model::Session, which reuses the longest common prefix.
#include "app/gui/turn_runner.h"

namespace kvc::app {

Result<std::unique_ptr<SessionTurnRunner>> SessionTurnRunner::create(const model::Model& m, int64_t n_ctx) {
  auto s = model::Session::create(m, n_ctx);
  if (!s.ok()) return s.error();
  return std::unique_ptr<SessionTurnRunner>(new SessionTurnRunner(std::move(*s)));
}

Result<TurnResult> SessionTurnRunner::run(const TurnRequest& request,
                                          const std::function<bool(const TurnDelta&)>& on_delta) {
  std::vector<int32_t> prompt = request.history;
  prompt.insert(prompt.end(), request.segment.begin(), request.segment.end());
  auto r = model::generate(session_, prompt, request.options,
                           [&](std::string_view piece) { return on_delta(TurnDelta{piece}); });
  if (!r.ok()) return r.error();
  TurnResult out;
  out.tokens = std::move(r->tokens);
  out.text = std::move(r->text);
  out.stats.valid = true;
  out.stats.n_tokens = static_cast<int64_t>(out.tokens.size());
  out.stats.n_prompt = r->n_prompt;
  out.stats.n_prompt_reused = r->n_prompt_reused;
  out.stats.ttft_ms = r->ttft_ms;
  out.stats.prefill_ms = r->prefill_ms;
  out.stats.decode_ms = r->decode_ms;
  out.stats.stop_reason = model::to_string(r->reason);
  return out;
}

void SessionTurnRunner::fill_memory(ui::MemoryState& out) const {
  const model::ModelConfig& c = session_.model().config();
  out.kv_bytes_per_token = c.kv_bytes_per_token(2.0);  // the session's KV is F16
  out.n_ctx = session_.n_ctx();
  out.n_session_tokens = static_cast<int64_t>(session_.tokens().size());
  out.kv_capacity_bytes = static_cast<size_t>(out.kv_bytes_per_token * static_cast<double>(out.n_ctx));
  out.kv_used_bytes = static_cast<size_t>(out.kv_bytes_per_token * static_cast<double>(out.n_session_tokens));
}

}  // namespace kvc::app

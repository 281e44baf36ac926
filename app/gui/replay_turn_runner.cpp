// Replaying a recorded answer as a streamed turn.
#include "app/gui/replay_turn_runner.h"

#include <chrono>
#include <thread>

#include "core/util/utf8.h"

namespace kvc::app {

ReplayTurnRunner::ReplayTurnRunner(std::unique_ptr<TurnRunner> inner, tokenizer::Tokenizer tokenizer,
                                   std::string answer, size_t n_chunk_bytes, int pause_ms)
    : inner_(std::move(inner)),
      tokenizer_(std::move(tokenizer)),
      answer_(std::move(answer)),
      n_chunk_bytes_(std::max<size_t>(1, n_chunk_bytes)),
      pause_ms_(pause_ms) {}

Result<TurnResult> ReplayTurnRunner::run(const TurnRequest& request,
                                         const std::function<bool(const TurnDelta&)>& on_delta) {
  const auto t0 = std::chrono::steady_clock::now();
  double ttft_ms = 0;
  size_t pos = 0;
  bool cancelled = false;
  while (pos < answer_.size()) {
    const size_t end = utf8_boundary_at_or_after(answer_, pos + n_chunk_bytes_);
    if (pos == 0) ttft_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!on_delta(TurnDelta{std::string_view(answer_).substr(pos, end - pos)})) {
      cancelled = true;
      pos = end;
      break;
    }
    pos = end;
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms_));
  }
  TurnResult r;
  r.text = answer_.substr(0, pos);
  r.tokens = tokenizer_.encode_continuation(r.text, false);
  r.stats.valid = true;
  r.stats.n_tokens = static_cast<int64_t>(r.tokens.size());
  r.stats.n_prompt = static_cast<int64_t>(request.history.size() + request.segment.size());
  r.stats.ttft_ms = ttft_ms;
  r.stats.decode_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() - ttft_ms;
  r.stats.stop_reason = cancelled ? "stopped" : "replay";
  return r;
}

}  // namespace kvc::app

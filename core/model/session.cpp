// Single-sequence evaluation with prefix reuse, and the sampling loop on top of it.
#include "core/model/session.h"

#include <algorithm>
#include <chrono>

namespace kvc::model {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string: that
// much text must be held back, since the next token may complete the stop string.
size_t held_back(std::string_view text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const auto& s : stops) {
    for (size_t n = std::min(s.size() - 1, text.size()); n > hold; --n) {
      if (text.substr(text.size() - n) == std::string_view(s).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

}  // namespace

Result<Session> Session::create(const Model& m, int64_t n_ctx, int64_t n_batch) {
  if (n_ctx <= 0) n_ctx = m.config().n_ctx_train;
  auto kv = ContiguousKv::create(m.backend(), m.config(), n_ctx);
  if (!kv.ok()) return kv.error();
  return Session(m, std::move(*kv), n_batch);
}

Result<std::span<const float>> Session::evaluate(std::span<const int32_t> tokens) {
  if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "the prompt is empty");
  if (static_cast<int64_t>(tokens.size()) > n_ctx()) {
    return make_error(ErrorCode::invalid_argument, "the prompt has " + std::to_string(tokens.size()) +
                                                       " tokens, more than the context of " +
                                                       std::to_string(n_ctx()) + " (raise -c)");
  }
  size_t common = 0;
  while (common < tokens_.size() && common < tokens.size() && tokens_[common] == tokens[common]) ++common;
  if (common == tokens.size()) --common;  // re-evaluate the last token for its logits
  tokens_.resize(common);
  n_reused_ = static_cast<int64_t>(common);
  auto r = append(tokens.subspan(common));
  n_reused_ = static_cast<int64_t>(common);
  return r;
}

Result<std::span<const float>> Session::append(std::span<const int32_t> tokens) {
  auto r = forward_->eval(tokens, static_cast<int64_t>(tokens_.size()), kv_, Logits::last);
  if (!r.ok()) return r.error();
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  n_reused_ = 0;
  n_evaluated_ = static_cast<int64_t>(tokens.size());
  return r;
}

Result<std::span<const float>> Session::evaluate_all(std::span<const int32_t> tokens) {
  tokens_.clear();
  auto r = forward_->eval(tokens, 0, kv_, Logits::all);
  if (!r.ok()) return r.error();
  tokens_.assign(tokens.begin(), tokens.end());
  n_reused_ = 0;
  n_evaluated_ = static_cast<int64_t>(tokens.size());
  return r;
}

const char* to_string(StopReason r) {
  switch (r) {
    case StopReason::max_tokens: return "max tokens";
    case StopReason::end_of_generation: return "end of generation";
    case StopReason::stop_string: return "stop string";
    case StopReason::context_full: return "context full";
    case StopReason::cancelled: return "cancelled";
  }
  return "?";
}

Result<GenerateResult> generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& opt,
                                const TextCallback& on_text) {
  KVC_TRY(opt.sampling.validate());
  const tokenizer::Tokenizer& tok = s.model().tokenizer();
  GenerateResult out;
  out.n_prompt = static_cast<int64_t>(prompt.size());
  const auto t0 = std::chrono::steady_clock::now();
  auto logits = s.evaluate(prompt);
  if (!logits.ok()) return logits.error();
  out.n_prompt_reused = s.n_reused();
  out.prefill_ms = ms_since(t0);

  sampling::Sampler sampler(opt.sampling);
  std::vector<float> work(logits->begin(), logits->end());
  tokenizer::StreamDecoder decoder(tok, /*strip_leading_space=*/false);  // a continuation
  std::string pending;  // decoded text not yet passed to on_text (may start a stop string)
  std::chrono::steady_clock::time_point t_first{};
  for (int64_t i = 0; opt.max_tokens < 0 || i < opt.max_tokens; ++i) {
    const int32_t id = sampler.sample(work, s.tokens());
    if (i == 0) {
      out.ttft_ms = ms_since(t0);
      t_first = std::chrono::steady_clock::now();
    }
    if (opt.stop_at_eog && tok.is_end_of_generation(id)) {
      out.reason = StopReason::end_of_generation;
      break;
    }
    out.tokens.push_back(id);
    pending += decoder.push(id);
    bool stopped = false;
    for (const auto& stop : opt.stop_strings) {
      if (const size_t at = pending.find(stop); !stop.empty() && at != std::string::npos) {
        pending.resize(at);
        stopped = true;
      }
    }
    const size_t hold = stopped ? 0 : held_back(pending, opt.stop_strings);
    if (pending.size() > hold) {
      const std::string ready = pending.substr(0, pending.size() - hold);
      out.text += ready;
      pending.erase(0, ready.size());
      if (on_text && !on_text(ready)) {
        out.reason = StopReason::cancelled;
        break;
      }
    }
    if (stopped) {
      out.reason = StopReason::stop_string;
      break;
    }
    if (static_cast<int64_t>(s.tokens().size()) >= s.n_ctx()) {
      out.reason = StopReason::context_full;
      break;
    }
    const int32_t one[1] = {id};
    auto next = s.append(one);
    if (!next.ok()) return next.error();
    work.assign(next->begin(), next->end());
  }
  if (out.reason != StopReason::stop_string && out.reason != StopReason::cancelled) {
    pending += decoder.finish();
    out.text += pending;
    if (on_text && !pending.empty()) on_text(pending);
  }
  if (!out.tokens.empty() && t_first != std::chrono::steady_clock::time_point{}) out.decode_ms = ms_since(t_first);
  return out;
}

}  // namespace kvc::model

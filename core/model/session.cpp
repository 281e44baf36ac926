// Single-sequence evaluation with prefix reuse, and the sampling loop on top of it.
#include "core/model/session.h"

#include <algorithm>
#include <chrono>

#include "core/model/grammar_vocabulary.h"
#include "core/model/kv_setup.h"
#include "core/util/clock.h"

namespace kvc::model {

Result<Session> Session::create(const Model& m, int64_t n_ctx, int64_t n_batch) {
  SessionOptions o;
  o.n_ctx = n_ctx;
  o.n_batch = n_batch;
  return create(m, o);
}

Result<Session> Session::create(const Model& m, const SessionOptions& o) {
  const ModelConfig& c = m.config();
  const int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
  KvSetup ks;
  ks.k_format = o.k_format;
  ks.v_format = o.v_format;
  ks.block_tokens = o.block_tokens;
  ks.budget = o.budget;
  ks.t0_tokens = n_ctx;
  ks.cold = o.cold;
  auto cache = create_kv_cache(m, ks);
  if (!cache.ok()) return cache.error();
  return Session(m, std::move(*cache), n_ctx, o.n_batch);
}

Session::Session(const Model& m, std::unique_ptr<kv::KvCache> cache, int64_t n_ctx, int64_t n_batch)
    : m_(&m),
      cache_(std::move(cache)),
      forward_(std::make_unique<Forward>(m, cache_->layouts(), n_batch)),
      seq_(cache_->create_sequence()),
      n_ctx_(n_ctx) {}

Result<std::span<const float>> Session::evaluate(std::span<const int32_t> tokens) {
  if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "the prompt is empty");
  if (static_cast<int64_t>(tokens.size()) > n_ctx_) {
    return make_error(ErrorCode::invalid_argument, "the prompt has " + std::to_string(tokens.size()) +
                                                       " tokens, more than the context of " + std::to_string(n_ctx_) +
                                                       " (raise -c)");
  }
  auto info = cache_->prepare(seq_, tokens);
  if (!info.ok()) return info.error();
  last_prefix_ = *info;
  return run(tokens.subspan(static_cast<size_t>(info->n_cached)), Logits::last);
}

Result<std::span<const float>> Session::append(std::span<const int32_t> tokens) {
  last_prefix_ = kv::PrefixInfo{};
  last_prefix_.n_prompt = cache_->n_tokens(seq_) + static_cast<int64_t>(tokens.size());
  last_prefix_.n_cached = cache_->n_tokens(seq_);
  return run(tokens, Logits::last);
}

Result<std::span<const float>> Session::evaluate_all(std::span<const int32_t> tokens) {
  clear();
  last_prefix_ = kv::PrefixInfo{};
  last_prefix_.n_prompt = static_cast<int64_t>(tokens.size());
  return run(tokens, Logits::all);
}

void Session::clear() {
  if (cache_->n_groups() > 1) cache_->park(seq_);  // a turn boundary: a windowed KV group keeps its checkpoint
  cache_->destroy_sequence(seq_);
  seq_ = cache_->create_sequence();
}

// Evaluates tokens after the sequence's history in chunks of the forward pass's batch, keeping
// the last row's logits (Logits::last) or every row's (Logits::all, gathered in all_logits_).
Result<std::span<const float>> Session::run(std::span<const int32_t> tokens, Logits which) {
  if (tokens.empty()) return make_error(ErrorCode::invalid_argument, "nothing to evaluate");
  if (cache_->n_tokens(seq_) + static_cast<int64_t>(tokens.size()) > n_ctx_) {
    return make_error(ErrorCode::invalid_argument,
                      "context full: " + std::to_string(cache_->n_tokens(seq_) + static_cast<int64_t>(tokens.size())) +
                          " tokens do not fit a context of " + std::to_string(n_ctx_) + " (raise -c)");
  }
  if (which == Logits::all) {
    all_logits_.clear();
    all_logits_.reserve(tokens.size() * static_cast<size_t>(m_->config().n_vocab));
  }
  std::span<const float> logits;
  for (size_t done = 0; done < tokens.size();) {
    const size_t n = std::min(tokens.size() - done, static_cast<size_t>(forward_->max_batch()));
    const auto chunk = tokens.subspan(done, n);
    if (!cache_->reserve(seq_, static_cast<int64_t>(n))) {
      return make_error(ErrorCode::out_of_memory, "the KV cache cannot hold " +
                                                      std::to_string(cache_->n_tokens(seq_) + static_cast<int64_t>(n)) +
                                                      " tokens; raise its budget or shorten the conversation");
    }
    tables_.clear();
    cache_->block_tables(seq_, tables_);
    const model::SeqInput in{chunk, tables_, cache_->n_tokens(seq_), cache_->kv_tail(seq_)};
    auto r = forward_->eval({&in, 1}, which);
    if (!r.ok()) return r.error();
    if (which == Logits::all) all_logits_.insert(all_logits_.end(), r->begin(), r->end());
    cache_->commit(seq_, chunk);
    logits = *r;
    done += n;
  }
  n_evaluated_ = static_cast<int64_t>(tokens.size());
  if (which == Logits::all) return std::span<const float>(all_logits_);
  return logits;
}

Result<GenerateResult> generate(Session& s, std::span<const int32_t> prompt, const GenerateOptions& opt,
                                const TextCallback& on_text) {
  KVC_TRY(opt.sampling.validate());
  GenerateResult out;
  out.n_prompt = static_cast<int64_t>(prompt.size());
  const auto t0 = std::chrono::steady_clock::now();
  auto logits = s.evaluate(prompt);
  if (!logits.ok()) return logits.error();
  out.n_prompt_reused = s.n_reused();
  out.prefix = s.last_prefix();
  out.prefill_ms = ms_since(t0);

  sampling::Sampler sampler(opt.sampling);
  if (opt.grammar) {
    sampler.constrain(std::make_unique<sampling::GrammarMatcher>(opt.grammar, grammar_vocabulary(s.model())));
  }
  std::vector<float> work(logits->begin(), logits->end());
  OutputText text(s.model().tokenizer(), opt.stop_strings, opt.stop_at_eog);
  auto emit = [&](const std::string& piece) {
    out.text += piece;
    return piece.empty() || !on_text || on_text(piece);
  };
  std::chrono::steady_clock::time_point t_first{};
  bool ended = false;
  for (int64_t i = 0; opt.max_tokens < 0 || i < opt.max_tokens; ++i) {
    const int32_t id = sampler.sample(work, s.tokens());
    if (i == 0) {
      out.ttft_ms = ms_since(t0);
      t_first = std::chrono::steady_clock::now();
    }
    const OutputText::Step st = text.push(id);
    if (st.consumed) out.tokens.push_back(id);
    const bool go_on = emit(st.ready);
    if (st.stop) {
      out.reason = st.reason;
      ended = true;
      break;
    }
    if (!go_on) {
      out.reason = StopReason::cancelled;
      ended = true;
      break;
    }
    if (sampler.constraint_done()) {  // the grammar is complete: nothing may follow
      out.reason = StopReason::end_of_generation;
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
  if (!ended) emit(text.finish());
  if (!out.tokens.empty() && t_first != std::chrono::steady_clock::time_point{}) out.decode_ms = ms_since(t_first);
  return out;
}

}  // namespace kvc::model

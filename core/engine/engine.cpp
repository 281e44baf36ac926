// The continuous-batching scheduler over the shared KV cache.
#include "core/engine/engine.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/model/grammar_vocabulary.h"
#include "core/util/assert.h"
#include "core/util/clock.h"
#include "core/util/thread_name.h"

namespace kvc::engine {

Engine::Engine(const model::Model& m, kv::KvCache& cache, const EngineOptions& options)
    : m_(m), cache_(cache), options_(options), forward_(m, cache.layouts(), options.token_budget) {
  if (options_.events) cache_.set_event_log(options_.events);
}

void Engine::emit(const Active& a, kv::KvEventType type, int64_t n_tokens, int64_t t_us) {
  if (!options_.events) return;
  kv::KvEvent e;
  e.t_us = t_us ? t_us : kv::now_us();
  e.type = type;
  e.seq_id = a.seq;
  e.request_id = a.id;
  e.n_tokens = n_tokens;
  options_.events->append(e);
}

Engine::~Engine() {
  stop();
  for (auto& a : staging_) wait_staged(*a->staging);
}

void Engine::wait_staged(Staging& st) {
  std::unique_lock lock(mu_);
  wake_.wait(lock, [&] { return st.done.load(std::memory_order_acquire); });
}

RequestId Engine::submit(Request r) {
  auto a = std::make_unique<Active>();
  a->request = std::move(r);
  a->tokens = a->request.prompt;
  a->submitted = std::chrono::steady_clock::now();
  Status valid = a->request.options.sampling.validate();
  if (valid.ok() && a->tokens.empty()) valid = make_error(ErrorCode::invalid_argument, "the prompt is empty");
  if (valid.ok() && options_.n_ctx > 0 && static_cast<int64_t>(a->tokens.size()) >= options_.n_ctx) {
    valid =
        make_error(ErrorCode::invalid_argument,
                   "the conversation has " + std::to_string(a->tokens.size()) + " tokens, which fills the context of " +
                       std::to_string(options_.n_ctx) + "; start a new conversation or raise the context size");
  }
  for (int32_t t : a->tokens) {
    if (valid.ok() && (t < 0 || t >= m_.config().n_vocab)) {
      valid = make_error(ErrorCode::invalid_argument, "token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  RequestResult failed;
  RequestId id = 0;
  {
    std::lock_guard lock(mu_);
    id = a->id = next_id_++;
    if (valid.ok()) {
      results_[id] = RequestResult{};
      inbox_.push_back(std::move(a));
      wake_.notify_one();
      return id;
    }
    failed.state = RequestState::failed;
    failed.error = valid.error();
    results_[id] = failed;
  }
  if (a->request.on_done) a->request.on_done(failed);  // outside the lock: it may call the engine
  return id;
}

void Engine::cancel(RequestId id) {
  std::lock_guard lock(mu_);
  cancels_.push_back(id);
  wake_.notify_one();
}

void Engine::prefetch(int64_t conversation, std::vector<int32_t> tokens) {
  std::lock_guard lock(mu_);
  prefetches_.push_back({conversation, std::move(tokens)});
  wake_.notify_one();
}

void Engine::forget_conversation(int64_t conversation, std::vector<kv::BlockKey> keys) {
  std::lock_guard lock(mu_);
  forgets_.push_back({conversation, std::move(keys)});
  wake_.notify_one();
}

void Engine::notify_observer() {
  std::lock_guard lock(mu_);
  observe_requested_ = true;
  wake_.notify_one();
}

void Engine::forget(RequestId id) {
  std::lock_guard lock(mu_);
  results_.erase(id);
}

void Engine::observe(bool idle) const {
  if (options_.observer) options_.observer(cache_, idle);
}

// A deleted conversation's sequence (unless a request of it is still queued or running) and its
// blocks leave RAM, then disk.
void Engine::apply_forgets(std::vector<Forget>& forgets) {
  for (Forget& f : forgets) {
    const bool busy = std::any_of(running_.begin(), running_.end(),
                                  [&](const auto& a) { return a->request.conversation == f.conversation; }) ||
                      std::any_of(waiting_.begin(), waiting_.end(),
                                  [&](const auto& a) { return a->request.conversation == f.conversation; }) ||
                      std::any_of(staging_.begin(), staging_.end(),
                                  [&](const auto& a) { return a->request.conversation == f.conversation; });
    if (auto it = conversations_.find(f.conversation); it != conversations_.end() && !busy) {
      cache_.destroy_sequence(it->second);
      conversations_.erase(it);
    }
    cache_.forget(f.keys);  // RAM copies first: an eviction in between would write them back
    if (kv::ColdStore* cold = cache_.cold_store()) cold->release(f.keys);
  }
}

void Engine::take_inbox() {
  std::vector<RequestId> cancels;
  std::vector<Prefetch> prefetches;
  std::vector<Forget> forgets;
  bool observe_requested = false;
  {
    std::lock_guard lock(mu_);
    observe_requested = std::exchange(observe_requested_, false);
    staged_ready_ = false;
    for (auto& a : inbox_) waiting_.push_back(std::move(a));
    inbox_.clear();
    cancels.swap(cancels_);
    prefetches.swap(prefetches_);
    forgets.swap(forgets_);
  }
  // The conversation's next request reports what a prefetch moves up under the tier it found.
  for (Prefetch& p : prefetches) cache_.prefetch(p.tokens, p.conversation == 0 ? 0 : sequence_for(p.conversation));
  apply_forgets(forgets);
  if (!prefetches.empty() || !forgets.empty() || observe_requested) observe(running_.empty() && waiting_.empty());
  for (RequestId id : cancels) {
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      if ((*it)->id == id) {
        finish(**it, RequestState::cancelled, model::StopReason::cancelled);
        waiting_.erase(it);
        break;
      }
    }
    for (auto it = running_.begin(); it != running_.end(); ++it) {
      if ((*it)->id == id) {
        finish(**it, RequestState::cancelled, model::StopReason::cancelled);
        running_.erase(it);
        break;
      }
    }
    for (auto it = staging_.begin(); it != staging_.end(); ++it) {
      if ((*it)->id == id) {
        wait_staged(*(*it)->staging);  // a read of a few blocks: not worth interrupting
        finish(**it, RequestState::cancelled, model::StopReason::cancelled);
        staging_.erase(it);
        break;
      }
    }
  }
}

kv::SeqId Engine::sequence_for(int64_t conversation) {
  if (conversation == 0) return cache_.create_sequence();
  auto it = conversations_.find(conversation);
  if (it == conversations_.end()) it = conversations_.emplace(conversation, cache_.create_sequence()).first;
  return it->second;
}

bool Engine::start_staging(Active& a) {
  a.staged = true;
  kv::ColdStore* cold = cache_.cold_store();
  if (!cold || running_.empty()) return false;  // alone, promoting in place is as fast
  const auto t_start = std::chrono::steady_clock::now();
  const int64_t t_start_us = kv::now_us();
  std::vector<size_t> sizes;  // block bytes per key (KV groups' blocks differ in size)
  std::vector<kv::BlockKey> keys = cache_.cold_prefix_keys(a.tokens, &sizes);
  if (keys.empty()) return false;
  if (a.seq == 0) a.seq = sequence_for(a.request.conversation);  // stage_cold reports to it
  auto st = std::make_unique<Staging>();
  st->keys = std::move(keys);
  st->started = t_start;
  size_t total = 0;
  for (size_t n : sizes) {
    st->offsets.push_back(total);
    total += n;
  }
  st->offsets.push_back(total);
  st->payloads.resize(total);
  Staging* raw = st.get();
  staging_pool_.post([this, cold, raw] {
    std::vector<std::span<uint8_t>> outs(raw->keys.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i] = std::span(raw->payloads).subspan(raw->offsets[i], raw->offsets[i + 1] - raw->offsets[i]);
    }
    raw->results = cold->read_many(raw->keys, outs);
    raw->done.store(true, std::memory_order_release);
    {
      std::lock_guard lock(mu_);
      staged_ready_ = true;
    }
    wake_.notify_all();
  });
  a.staging = std::move(st);
  if (!a.sampler) {
    // The request starts now; its lookup was the key search above, the read is its promotion.
    a.result.queue_ms = ms_since(a.submitted);
    a.result.lookup_ms = ms_since(t_start);
    emit(a, kv::KvEventType::request_started, static_cast<int64_t>(a.tokens.size()), t_start_us);
    emit(a, kv::KvEventType::lookup_done, 0, t_start_us + static_cast<int64_t>(a.result.lookup_ms * 1e3));
    a.announced = true;
  }
  return true;
}

bool Engine::collect_staged() {
  bool any = false;
  // Back to the front of the queue in their original order.
  for (auto it = staging_.rbegin(); it != staging_.rend();) {
    Active& a = **it;
    if (!a.staging->done.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    const Staging& st = *a.staging;
    std::vector<std::span<const uint8_t>> payloads(st.keys.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
      payloads[i] = std::span(st.payloads).subspan(st.offsets[i], st.offsets[i + 1] - st.offsets[i]);
    }
    const int64_t n = cache_.stage_cold(st.keys, st.results, payloads, a.seq);
    a.staged_ms = ms_since(a.staging->started) - a.result.lookup_ms;
    a.staging.reset();
    {
      std::lock_guard lock(mu_);
      ++stats_.n_staged_requests;
      stats_.n_staged_blocks += n;
    }
    waiting_.push_front(std::move(*it));
    it = decltype(it)(staging_.erase(std::next(it).base()));
    any = true;
  }
  return any;
}

Status Engine::admit(Active& a) {
  const int64_t B = cache_.block_tokens();
  for (kv::KvGroup g = 0; g < cache_.n_groups(); ++g) {  // each KV group has its own T0 pool
    // The prompt and one generated token must fit T0 (plus a block for a copy on write).
    int64_t need_blocks = (static_cast<int64_t>(a.tokens.size()) + 1 + B - 1) / B + 1;
    if (const int64_t W = g == 0 ? m_.config().sliding_window : cache_.group(g).window(); W > 0) {
      // Only the window and the chunk being computed need T0 (plus a block of margin each).
      need_blocks = std::min(need_blocks, (W + B - 1) / B + 1 + (options_.token_budget + B - 1) / B + 1);
    }
    const int64_t capacity = cache_.tier_usage(kv::Tier::t0, g).capacity_blocks;
    if (need_blocks > capacity) {
      return make_error(ErrorCode::out_of_memory, "this conversation needs " + std::to_string(need_blocks) +
                                                      " KV blocks for its " + std::to_string(a.tokens.size()) +
                                                      " tokens but the compute pool holds " + std::to_string(capacity) +
                                                      "; raise the KV budget or start a new conversation");
    }
  }
  if (a.seq == 0) a.seq = sequence_for(a.request.conversation);
  const bool first = !a.sampler;
  const int64_t t_start = kv::now_us();
  const bool announced = first && a.announced;
  if (first && !announced) {
    a.result.queue_ms = ms_since(a.submitted);
    emit(a, kv::KvEventType::request_started, static_cast<int64_t>(a.tokens.size()), t_start);
  } else if (!first) {
    emit(a, kv::KvEventType::seq_resumed, static_cast<int64_t>(a.tokens.size()), t_start);
  }
  cache_.set_current_request(a.id);
  auto info = cache_.prepare(a.seq, a.tokens);
  cache_.set_current_request(-1);
  if (!info.ok()) return info.error();
  if (first) {
    a.sampler = std::make_unique<sampling::Sampler>(a.request.options.sampling);
    if (a.request.options.grammar) {
      a.sampler->constrain(
          std::make_unique<sampling::GrammarMatcher>(a.request.options.grammar, model::grammar_vocabulary(m_)));
    }
    a.text = std::make_unique<model::OutputText>(m_.tokenizer(), a.request.options.stop_strings,
                                                 a.request.options.stop_at_eog);
    a.result.prefix = *info;  // by the tier each block was found on (before a prefetch or staging moved it)
    if (announced) {
      a.result.promote_ms = a.staged_ms + info->lookup_ms + info->promote_ms;
    } else {
      a.result.lookup_ms = info->lookup_ms;
      a.result.promote_ms = info->promote_ms;
      emit(a, kv::KvEventType::lookup_done, info->n_cached, t_start + static_cast<int64_t>(info->lookup_ms * 1e3));
    }
    emit(a, kv::KvEventType::promote_done, 0,
         t_start + static_cast<int64_t>((info->lookup_ms + info->promote_ms) * 1e3));
  }
  a.n_in_kv = info->n_cached;
  a.admitted = true;
  a.result.state = RequestState::running;
  return {};
}

void Engine::preempt(Active& a) {
  emit(a, kv::KvEventType::seq_preempted, a.n_in_kv);
  cache_.park(a.seq);
  a.n_in_kv = 0;
  a.admitted = false;
  ++a.result.n_preemptions;
  std::lock_guard lock(mu_);
  ++stats_.n_preemptions;
}

void Engine::finish(Active& a, RequestState state, model::StopReason reason, bool deliver) {
  if (a.text && state != RequestState::failed) {
    const std::string rest = a.text->finish();
    a.result.text += rest;
    if (a.request.on_text && !rest.empty()) a.request.on_text(rest);
  }
  a.result.state = state;
  a.result.reason = reason;
  a.result.total_ms = ms_since(a.submitted);
  emit(a, kv::KvEventType::request_finished, static_cast<int64_t>(a.result.tokens.size()));
  if (a.seq != 0) {
    if (a.request.conversation == 0) {
      cache_.destroy_sequence(a.seq);
    } else if (a.admitted) {
      cache_.park(a.seq);
    }
  }
  a.admitted = false;
  publish(a);
  if (deliver && a.request.on_done) a.request.on_done(a.result);
}

void Engine::publish(const Active& a) {
  std::lock_guard lock(mu_);
  results_[a.id] = a.result;
}

bool Engine::step() {
  take_inbox();
  collect_staged();
  bool admissible = false;
  const std::optional<std::vector<Entry>> batch = schedule(admissible);
  if (!batch) {
    observe(waiting_.empty());
    // Requests held back by a staging one of their conversation wait for it (staged_ready_ wakes
    // the thread): with nothing admissible, the engine thread sleeps.
    return admissible && !waiting_.empty();
  }
  if (batch->empty()) return true;  // preemptions or failures changed the queue: step again
  std::vector<model::SeqInput> inputs;
  const std::span<const float> logits = run(*batch, inputs);
  sample_and_stop(*batch, inputs, logits);  // observes the step
  return true;
}

std::optional<std::vector<Engine::Entry>> Engine::schedule(bool& admissible) {
  // Admission, oldest first. A conversation's requests share its sequence, so one of them runs
  // at a time: a request waits while an earlier one of its conversation is running, staging
  // or still waiting (two clients may send the same conversation at once).
  std::set<int64_t> busy;
  for (const auto& r : running_) busy.insert(r->request.conversation);
  for (const auto& r : staging_) busy.insert(r->request.conversation);
  admissible = false;  // a waiting request that no earlier one of its conversation holds back
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const int64_t conv = (*it)->request.conversation;
    if (conv != 0 && !busy.insert(conv).second) {
      ++it;
      continue;
    }
    admissible = true;
    if (static_cast<int64_t>(running_.size()) >= options_.max_running) break;
    std::unique_ptr<Active> a = std::move(*it);
    it = waiting_.erase(it);
    if (!a->staged && start_staging(*a)) {
      staging_.push_back(std::move(a));
      continue;
    }
    if (Status st = admit(*a); !st.ok()) {
      a->result.error = st.error();
      finish(*a, RequestState::failed, model::StopReason::cancelled);
      continue;
    }
    running_.push_back(std::move(a));
  }
  if (running_.empty()) return std::nullopt;

  // The batch: every running request's next tokens (1 when decoding, a chunk of the prompt
  // when prefilling), oldest first, up to the token budget. A request that cannot get T0
  // blocks preempts the most recently admitted one (possibly itself).
  std::vector<Entry> entries;
  int64_t budget = options_.token_budget;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Active& a = *running_[i];
    int64_t take = std::min<int64_t>(static_cast<int64_t>(a.tokens.size()) - a.n_in_kv, budget);
    KVC_ASSERT(take > 0);
    bool reserved = cache_.reserve(a.seq, take);
    while (!reserved && running_.size() > i + 1) {
      preempt(*running_.back());
      waiting_.push_front(std::move(running_.back()));
      running_.pop_back();
      reserved = cache_.reserve(a.seq, take);
    }
    // Alone: a smaller prefill chunk may still fit (with a sliding window, T0 need not hold
    // the whole prompt).
    while (!reserved && running_.size() == i + 1 && i == 0 && take > 1) {
      take = (take + 1) / 2;
      reserved = cache_.reserve(a.seq, take);
    }
    if (!reserved) {
      if (i == 0) {
        // Alone and still short: the context is full. A reply ends there; a prompt fails.
        std::unique_ptr<Active> self = std::move(running_[i]);
        running_.erase(running_.begin() + static_cast<int64_t>(i));
        if (!self->result.tokens.empty()) {
          finish(*self, RequestState::finished, model::StopReason::context_full);
        } else {
          self->result.error =
              make_error(ErrorCode::out_of_memory, "the KV cache's compute pool is too small for this prompt");
          finish(*self, RequestState::failed, model::StopReason::cancelled);
        }
        continue;
      }
      preempt(a);
      waiting_.push_front(std::move(running_[i]));
      running_.erase(running_.begin() + static_cast<int64_t>(i));
      break;
    }
    entries.push_back({&a, take});
    budget -= take;
    ++i;
  }
  return entries;
}

std::span<const float> Engine::run(std::span<const Entry> batch, std::vector<model::SeqInput>& inputs) {
  inputs.reserve(batch.size());
  const auto n_groups = static_cast<size_t>(cache_.n_groups());
  tables_.clear();  // filled before any span of it is taken: it does not move below
  for (const Entry& e : batch) cache_.block_tables(e.a->seq, tables_);
  for (size_t i = 0; i < batch.size(); ++i) {
    const Entry& e = batch[i];
    const auto chunk =
        std::span<const int32_t>(e.a->tokens).subspan(static_cast<size_t>(e.a->n_in_kv), static_cast<size_t>(e.n));
    inputs.push_back({chunk, std::span<const std::span<uint8_t* const>>(tables_).subspan(i * n_groups, n_groups),
                      e.a->n_in_kv, cache_.kv_tail(e.a->seq)});
  }
  auto logits = forward_.eval(inputs, model::Logits::last);
  KVC_ASSERT(logits.ok());  // inputs are built from validated tokens within reserved blocks
  return *logits;
}

void Engine::sample_and_stop(std::span<const Entry> batch, std::span<const model::SeqInput> inputs,
                             std::span<const float> logits) {
  const auto n_vocab = static_cast<size_t>(m_.config().n_vocab);
  std::vector<float> work;
  std::vector<Active*> done;
  int64_t n_prefill = 0, n_decode = 0, n_rows = 0;
  for (size_t k = 0; k < batch.size(); ++k) {
    Active& a = *batch[k].a;
    const bool decoding =
        a.n_in_kv + batch[k].n == static_cast<int64_t>(a.tokens.size()) && a.tokens.size() > a.request.prompt.size();
    cache_.commit(a.seq, inputs[k].tokens);
    a.n_in_kv += batch[k].n;
    n_rows += batch[k].n;
    (decoding ? n_decode : n_prefill) += batch[k].n;
    if (a.n_in_kv < static_cast<int64_t>(a.tokens.size())) continue;  // prefill continues next step
    if (!decoding && a.result.tokens.empty()) {
      a.prefilled = std::chrono::steady_clock::now();
      a.result.prefill_ms = std::chrono::duration<double, std::milli>(a.prefilled - a.submitted).count() -
                            a.result.queue_ms - a.result.lookup_ms - a.result.promote_ms;
      emit(a, kv::KvEventType::prefill_done, static_cast<int64_t>(a.tokens.size()) - a.result.prefix.n_cached);
    }
    // Its last token is in: sample the next one.
    work.assign(logits.begin() + static_cast<int64_t>(k * n_vocab),
                logits.begin() + static_cast<int64_t>((k + 1) * n_vocab));
    const int32_t id = a.sampler->sample(work, a.tokens);
    if (a.result.tokens.empty() && a.result.ttft_ms == 0) {
      a.result.ttft_ms = ms_since(a.submitted);
      a.result.first_decode_ms = ms_since(a.prefilled);
      emit(a, kv::KvEventType::first_token, 1);
    }
    const model::OutputText::Step st = a.text->push(id);
    if (st.consumed) {
      a.tokens.push_back(id);
      a.result.tokens.push_back(id);
      a.result.token_ms.push_back(ms_since(a.submitted));
    }
    a.result.text += st.ready;
    const bool go_on = st.ready.empty() || !a.request.on_text || a.request.on_text(st.ready);
    if (st.stop) {
      a.result.reason = st.reason;
      done.push_back(&a);
    } else if (a.sampler->constraint_done()) {  // the grammar is complete: nothing may follow
      a.result.reason = model::StopReason::end_of_generation;
      done.push_back(&a);
    } else if (!go_on) {
      a.result.reason = model::StopReason::cancelled;
      done.push_back(&a);
    } else if (a.request.options.max_tokens >= 0 &&
               static_cast<int64_t>(a.result.tokens.size()) >= a.request.options.max_tokens) {
      a.result.reason = model::StopReason::max_tokens;
      done.push_back(&a);
    } else if (options_.n_ctx > 0 && static_cast<int64_t>(a.tokens.size()) >= options_.n_ctx) {
      a.result.reason = model::StopReason::context_full;
      done.push_back(&a);
    } else {
      publish(a);
    }
  }
  std::vector<std::unique_ptr<Active>> ended;
  for (Active* a : done) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == a; });
    ended.push_back(std::move(*it));
    running_.erase(it);
    finish(*ended.back(),
           a->result.reason == model::StopReason::cancelled ? RequestState::cancelled : RequestState::finished,
           ended.back()->result.reason, /*deliver=*/false);
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.n_steps;
    stats_.n_tokens_prefilled += n_prefill;
    stats_.n_tokens_decoded += n_decode;
    stats_.max_batch_rows = std::max(stats_.max_batch_rows, n_rows);
  }
  // The observer sees the step (the ended requests' blocks parked or freed) before their
  // callers hear they are done: whatever a caller reads next (a server's /metrics) has them.
  cache_.emit_tier_usage();
  observe(running_.empty() && waiting_.empty());
  for (const auto& a : ended)
    if (a->request.on_done) a->request.on_done(a->result);
}

Status Engine::run_until_idle(const std::function<Status()>& check) {
  for (;;) {
    const bool busy = step();
    if (check) KVC_TRY(check());
    bool more;
    {
      std::lock_guard lock(mu_);
      more = !inbox_.empty() || !cancels_.empty() || !prefetches_.empty() || !forgets_.empty() || observe_requested_;
    }
    if (!busy && !more && running_.empty() && waiting_.empty()) {
      if (staging_.empty()) return {};
      std::unique_lock lock(mu_);  // only reads in flight: wait for one
      wake_.wait_for(lock, std::chrono::milliseconds(5), [&] { return staged_ready_; });
    }
  }
}

void Engine::start() {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] {
    set_thread_name("kvc-engine");
    for (;;) {
      if (step()) continue;
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] {
        return stopping_ || !inbox_.empty() || !cancels_.empty() || !prefetches_.empty() || !forgets_.empty() ||
               observe_requested_ || staged_ready_;
      });
      if (stopping_) return;
    }
  });
}

void Engine::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // A delete queued just before the stop is not lost to it: the engine thread is gone, so its
  // blocks leave RAM and disk here (a shutdown right after a delete left them on disk).
  std::vector<Forget> forgets;
  {
    std::lock_guard lock(mu_);
    forgets.swap(forgets_);
  }
  apply_forgets(forgets);
}

std::optional<RequestResult> Engine::result(RequestId id) const {
  std::lock_guard lock(mu_);
  auto it = results_.find(id);
  if (it == results_.end()) return std::nullopt;
  return it->second;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Status Engine::check_invariants() const {
  KVC_TRY(cache_.check_invariants());
  for (const auto& a : running_) {
    if (!a->admitted) return make_error(ErrorCode::internal, "a running request is not admitted");
    if (cache_.n_tokens(a->seq) != a->n_in_kv) {
      return make_error(ErrorCode::internal, "request " + std::to_string(a->id) + ": the cache holds " +
                                                 std::to_string(cache_.n_tokens(a->seq)) +
                                                 " tokens, the engine thinks " + std::to_string(a->n_in_kv));
    }
    if (a->n_in_kv > static_cast<int64_t>(a->tokens.size()))
      return make_error(ErrorCode::internal, "KV past the tokens");
  }
  for (const auto& a : waiting_) {
    if (a->admitted) return make_error(ErrorCode::internal, "a waiting request is still admitted");
  }
  return {};
}

}  // namespace kvc::engine

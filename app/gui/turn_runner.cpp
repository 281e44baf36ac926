// SessionTurnRunner: turns run on one model::Session, which reuses the longest common prefix.
#include "app/gui/turn_runner.h"

#include <algorithm>
#include <cstdio>

#include "core/kv/stream_keys.h"

namespace kvc::app {

Result<std::unique_ptr<SessionTurnRunner>> SessionTurnRunner::create(const model::Model& m, int64_t n_ctx,
                                                                     const std::filesystem::path& cold_dir,
                                                                     ui::TierBudgets budgets) {
  std::unique_ptr<storage::SqliteColdStore> cold;
  std::string cold_error;
  if (!cold_dir.empty()) {
    storage::ColdStoreOptions co;
    co.capacity_bytes = int64_t{4} << 30;
    auto opened = storage::SqliteColdStore::open(cold_dir, co);
    if (opened.ok()) {
      cold = std::move(*opened);
    } else {
      cold_error = opened.error().message;
      std::fprintf(stderr, "kvchat: the disk KV tier is off: %s\n", opened.error().what().c_str());
    }
  }
  model::SessionOptions o;
  o.n_ctx = n_ctx;
  o.t0_bytes = budgets.t0_bytes;
  o.t1_bytes = budgets.t1_bytes > 0 ? budgets.t1_bytes : int64_t{512} << 20;
  o.cold = cold.get();
  auto s = model::Session::create(m, o);
  if (!s.ok()) return s.error();
  auto runner = std::unique_ptr<SessionTurnRunner>(new SessionTurnRunner(std::move(cold), std::move(*s)));
  runner->cold_error_ = std::move(cold_error);
  return runner;
}

SessionTurnRunner::SessionTurnRunner(std::unique_ptr<storage::SqliteColdStore> cold, model::Session s)
    : cold_(std::move(cold)), session_(std::move(s)), events_(std::make_unique<kv::KvEventLog>(size_t{1} << 16)) {
  session_.cache().set_event_log(events_.get());
}

void SessionTurnRunner::emit_phase(kv::KvEventType type, int64_t t_us, int64_t n_tokens, int64_t n_bytes) {
  kv::KvEvent e;
  e.t_us = t_us;
  e.type = type;
  e.request_id = n_requests_;
  e.seq_id = current_conversation_;  // the trace's per-sequence track: one per conversation
  e.n_tokens = n_tokens;
  e.n_bytes = n_bytes;
  events_->append(e);
}

Result<TurnResult> SessionTurnRunner::run(const TurnRequest& request,
                                          const std::function<bool(const TurnDelta&)>& on_delta) {
  std::vector<int32_t> prompt = request.history;
  prompt.insert(prompt.end(), request.segment.begin(), request.segment.end());
  // Session::evaluate times its phases but emits no request events: they are written here, with
  // the stamps the phases ended at (lookup, promote, prefill from evaluate; first token from generate).
  ++n_requests_;
  current_conversation_ = request.conversation_id;
  kv::KvCache& cache = session_.cache();
  cache.set_current_request(n_requests_);
  const int64_t t_start = kv::now_us();
  emit_phase(kv::KvEventType::request_started, t_start, static_cast<int64_t>(prompt.size()));
  auto r = model::generate(session_, prompt, request.options,
                           [&](std::string_view piece) { return on_delta(TurnDelta{piece}); });
  cache.set_current_request(-1);
  if (!r.ok()) {
    emit_phase(kv::KvEventType::request_finished, kv::now_us(), 0);
    return r.error();
  }
  auto at = [&](double ms) { return t_start + static_cast<int64_t>(ms * 1000.0); };
  const double lookup_ms = r->prefix.lookup_ms;
  const double promote_ms = r->prefix.promote_ms;
  emit_phase(kv::KvEventType::lookup_done, at(lookup_ms), r->prefix.n_cached);
  if (promote_ms > 0) emit_phase(kv::KvEventType::promote_done, at(lookup_ms + promote_ms), 0);
  emit_phase(kv::KvEventType::prefill_done, at(std::max(r->prefill_ms, lookup_ms + promote_ms)),
             r->n_prompt - r->n_prompt_reused);
  if (!r->tokens.empty()) emit_phase(kv::KvEventType::first_token, at(std::max(r->ttft_ms, r->prefill_ms)), 0);
  emit_phase(kv::KvEventType::request_finished, kv::now_us(), static_cast<int64_t>(r->tokens.size()));
  cache.emit_tier_usage();
  std::vector<int32_t>& stream = streams_[request.conversation_id];
  stream = prompt;
  stream.insert(stream.end(), r->tokens.begin(), r->tokens.end());
  TurnResult out;
  out.tokens = std::move(r->tokens);
  out.text = std::move(r->text);
  out.stats.valid = true;
  out.stats.n_tokens = static_cast<int64_t>(out.tokens.size());
  out.stats.n_prompt = r->n_prompt;
  out.stats.n_prompt_reused = r->n_prompt_reused;
  for (int t = 0; t < 3; ++t) out.stats.n_from_tier[t] = r->prefix.n_from_tier[t];
  if (request.conversation_id == prefetched_conversation_) {
    // Blocks the prefetch promoted count for the tier they were found on.
    for (int t = 2; t >= 1; --t) {
      const int64_t moved = std::min(prefetched_.n_from_tier[t], out.stats.n_from_tier[0]);
      out.stats.n_from_tier[0] -= moved;
      out.stats.n_from_tier[t] += moved;
    }
    prefetched_conversation_ = 0;
  }
  out.stats.ttft_ms = r->ttft_ms;
  out.stats.prefill_ms = r->prefill_ms;
  out.stats.decode_ms = r->decode_ms;
  out.stats.stop_reason = model::to_string(r->reason);
  // The timeline's block hits say T0 for prefetched blocks; it shows the tiers reported here.
  if (request_tiers_.size() >= 512) request_tiers_.erase(request_tiers_.begin());
  request_tiers_[n_requests_] = {out.stats.n_from_tier[0], out.stats.n_from_tier[1], out.stats.n_from_tier[2]};
  return out;
}

void SessionTurnRunner::prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) {
  prefetched_ = session_.cache().prefetch(tokens);
  prefetched_conversation_ = conversation_id;
  if (!tokens.empty()) streams_[conversation_id] = tokens;
  session_.cache().emit_tier_usage();
}

void SessionTurnRunner::release_streams(std::span<const std::vector<int32_t>> dead,
                                        std::span<const std::vector<int32_t>> live) {
  if (!cold_) return;
  const kv::KvCache& cache = session_.cache();
  cold_->release(kv::unshared_block_keys(cache.fingerprint(), cache.block_tokens(), dead, live));
}

void SessionTurnRunner::fill_memory(ui::MemoryState& out) {
  const model::ModelConfig& c = session_.model().config();
  out.kv_bytes_per_token = c.kv_bytes_per_token(2.0);  // the session's KV is F16
  out.n_ctx = session_.n_ctx();
  out.n_session_tokens = static_cast<int64_t>(session_.tokens().size());
  out.kv_capacity_bytes = static_cast<size_t>(out.kv_bytes_per_token * static_cast<double>(out.n_ctx));
  out.kv_used_bytes = static_cast<size_t>(out.kv_bytes_per_token * static_cast<double>(out.n_session_tokens));
  const kv::KvCache& cache = session_.cache();
  out.tier_warning.clear();
  if (cold_) {
    const kv::ColdStoreStats st = cold_->stats();
    if (!st.healthy) out.tier_warning = "Disk tier off: " + st.warning + " Conversations keep working from RAM.";
  } else if (!cold_error_.empty()) {
    out.tier_warning = "Disk tier off: " + cold_error_ + " Conversations keep working from RAM.";
  }
  out.tiers.clear();
  const char* names[] = {"T0 compute", "T1 host RAM", "T2 disk"};
  for (kv::Tier t : {kv::Tier::t0, kv::Tier::t1, kv::Tier::t2}) {
    if (t == kv::Tier::t2 && !cold_) continue;
    const kv::TierUsageBytes u = cache.tier_usage(t);
    out.tiers.push_back(ui::TierView{names[kv::tier_index(t)], static_cast<size_t>(u.used_bytes),
                                     static_cast<size_t>(u.capacity_bytes)});
  }
  fill_kv(out);
  read_events(out.timelines);
}

}  // namespace kvc::app

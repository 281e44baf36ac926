// EngineTurnRunner: turns submitted to the engine thread, their text relayed to the caller.
#include "app/gui/engine_turn_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <utility>

#include "core/kv/stream_keys.h"
#include "core/model/kv_setup.h"

namespace kvc::app {

namespace {

// While a turn runs the memory view is described at most 4 times a second, the first time a
// period after the engine got busy: its blocks change once per block of tokens, each
// description walks the whole cache on the engine thread, and a short answer (stories260K's
// 64 tokens take 20 ms) would pay one whole. Idle, it is described at once (the turn's end, a
// prefetch).
constexpr int64_t k_publish_interval_us = 250'000;

// Streamed text reaches the caller at most this often (the controller publishes it at ~30 Hz):
// the engine thread wakes the caller for a turn's first text and its end only, not per token.
constexpr auto k_relay_interval = std::chrono::milliseconds(30);

}  // namespace

Result<std::unique_ptr<EngineTurnRunner>> EngineTurnRunner::create(const model::Model& m,
                                                                   const EngineRunnerOptions& o) {
  auto runner = std::unique_ptr<EngineTurnRunner>(new EngineTurnRunner(m, o));
  if (!o.cold_dir.empty()) {
    storage::ColdStoreOptions co;
    if (o.budget.t2_bytes > 0) co.capacity_bytes = o.budget.t2_bytes;
    co.batch_window_ms = storage::k_streaming_batch_window_ms;  // an answer's blocks share a commit
    auto opened = storage::SqliteColdStore::open(o.cold_dir, co);
    if (opened.ok()) {
      runner->cold_ = std::move(*opened);
    } else {
      runner->cold_error_ = opened.error().message;
      std::fprintf(stderr, "kvchat: the disk KV tier is off: %s\n", opened.error().what().c_str());
    }
  }
  model::KvSetup ks;
  ks.k_format = ks.v_format = o.kv_format;
  ks.budget = o.budget;
  ks.t0_tokens = std::max(1, o.t0_contexts) * o.n_ctx;
  ks.cold = runner->cold_.get();
  auto cache = model::create_kv_cache(m, ks);
  if (!cache.ok()) return cache.error();
  runner->cache_ = std::move(*cache);
  if (runner->cold_) runner->cold_->register_model(*runner->cache_, o.model_path);

  engine::EngineOptions eo;
  eo.n_ctx = o.n_ctx;
  eo.events = &runner->events_;
  eo.observer = [r = runner.get()](const kv::KvCache& c, bool idle) {
    const int64_t t = kv::now_us();
    if (idle) {
      r->observe(c);
    } else if (r->engine_idle_) {
      r->last_publish_us_ = t;  // busy from now: the first description a period later
    } else if (t - r->last_publish_us_ >= k_publish_interval_us) {
      r->observe(c);
    }
    r->engine_idle_ = idle;
    std::lock_guard lock(r->extra_observer_mu_);
    if (r->extra_observer_) r->extra_observer_(c, idle);
  };
  runner->engine_ = std::make_unique<engine::Engine>(m, *runner->cache_, eo);
  runner->observe(*runner->cache_);
  runner->engine_->start();
  return runner;
}

EngineTurnRunner::~EngineTurnRunner() {
  engine_.reset();  // joins the engine thread before anything it uses goes
}

void EngineTurnRunner::set_cache_observer(std::function<void(const kv::KvCache&, bool idle)> f) {
  {
    std::lock_guard lock(extra_observer_mu_);
    extra_observer_ = std::move(f);
  }
  engine_->notify_observer();
}

void EngineTurnRunner::observe(const kv::KvCache& cache) {
  kv::KvView v;
  {
    std::lock_guard lock(streams_mu_);
    std::vector<kv::KvOwner> owners;
    owners.reserve(streams_.size());
    for (const auto& [id, st] : streams_) {
      owners.push_back(kv::KvOwner{id, st.tokens, st.keys.front(), std::span(st.keys).subspan(1)});
    }
    kv::KvViewOptions o;
    o.owners = owners;
    cache.describe(v, o);
  }
  view_.publish(std::move(v));
  last_publish_us_ = kv::now_us();
  { std::lock_guard lock(view_mu_); }  // a waiter checks the version under it: no lost wake-up
  view_published_.notify_all();
}

void EngineTurnRunner::set_stream(int64_t conversation, std::vector<int32_t> tokens) {
  const auto B = static_cast<size_t>(cache_->block_tokens());
  const auto n_groups = static_cast<size_t>(cache_->n_groups());
  Stream st;
  st.keys.resize(n_groups);
  {
    // A new turn extends the stream last seen: its blocks' keys are kept, only the new ones hashed.
    std::lock_guard lock(streams_mu_);
    if (const auto it = streams_.find(conversation); it != streams_.end()) {
      const std::vector<int32_t>& old = it->second.tokens;
      const size_t n = std::min(old.size(), tokens.size());
      const size_t common = static_cast<size_t>(
          std::mismatch(old.begin(), old.begin() + static_cast<std::ptrdiff_t>(n), tokens.begin()).first - old.begin());
      for (size_t g = 0; g < n_groups; ++g) {
        const std::vector<kv::BlockKey>& had = it->second.keys[g];
        const size_t n_keep = std::min(common / B, had.size());
        st.keys[g].assign(had.begin(), had.begin() + static_cast<std::ptrdiff_t>(n_keep));
      }
    }
  }
  for (size_t g = 0; g < n_groups; ++g) {  // every KV group's chain (one group for most models)
    std::vector<kv::BlockKey>& keys = st.keys[g];
    kv::BlockKey key = keys.empty() ? cache_->group(static_cast<kv::KvGroup>(g)).fingerprint() : keys.back();
    for (size_t p = keys.size() * B; p + B <= tokens.size(); p += B) {
      key = kv::chain_key(key, std::span<const int32_t>(tokens).subspan(p, B));
      keys.push_back(key);
    }
  }
  st.tokens = std::move(tokens);
  std::lock_guard lock(streams_mu_);
  streams_[conversation] = std::move(st);
}

Result<TurnResult> EngineTurnRunner::run(const TurnRequest& request,
                                         const std::function<bool(const TurnDelta&)>& on_delta) {
  // Filled on the engine thread, drained here.
  struct Relay {
    std::mutex mu;
    std::condition_variable cv;
    std::string pending;
    bool any_text = false;  // the first text wakes the caller (time to first token); later text waits for it
    bool done = false;
    std::atomic<bool> cancel{false};
    engine::RequestResult result;
  };
  auto relay = std::make_shared<Relay>();
  engine::Request r;
  r.conversation = request.conversation_id;
  r.prompt = request.history;
  r.prompt.insert(r.prompt.end(), request.segment.begin(), request.segment.end());
  r.options = request.options;
  r.on_text = [relay](std::string_view t) {
    bool first = false;
    {
      std::lock_guard lock(relay->mu);
      relay->pending += t;
      first = !std::exchange(relay->any_text, true);
    }
    if (first) relay->cv.notify_one();
    return !relay->cancel.load();
  };
  r.on_done = [relay](const engine::RequestResult& res) {
    {
      std::lock_guard lock(relay->mu);
      relay->result = res;
      relay->done = true;
    }
    relay->cv.notify_one();
  };
  const auto n_prompt = static_cast<int64_t>(r.prompt.size());
  const engine::RequestId id = engine_->submit(std::move(r));
  auto last_delta = std::chrono::steady_clock::now();
  for (;;) {
    std::string text;
    bool done = false;
    {
      std::unique_lock lock(relay->mu);
      if (!relay->any_text) {
        // The first text (or the end) wakes this thread at once.
        relay->cv.wait_for(lock, std::chrono::milliseconds(100),
                           [&] { return relay->done || !relay->pending.empty(); });
      } else {
        // Then the text of each k_relay_interval is taken together: one wake-up, not one per token.
        relay->cv.wait_for(lock, k_relay_interval, [&] { return relay->done; });
      }
      text.swap(relay->pending);
      done = relay->done;
    }
    // While a long prompt is computed nothing streams: an empty delta every 100 ms still lets
    // the caller stop the turn.
    const auto now = std::chrono::steady_clock::now();
    const bool quiet = now - last_delta >= std::chrono::milliseconds(100);
    if ((!text.empty() || quiet) && !relay->cancel.load()) {
      last_delta = now;
      if (!on_delta(TurnDelta{text})) {
        relay->cancel = true;
        engine_->cancel(id);
      }
    }
    if (done) break;
  }
  engine_->forget(id);
  const engine::RequestResult& res = relay->result;
  if (res.state == engine::RequestState::failed) return res.error;
  n_turn_tokens_ = n_prompt + static_cast<int64_t>(res.tokens.size());
  std::vector<int32_t> stream = request.history;
  stream.insert(stream.end(), request.segment.begin(), request.segment.end());
  stream.insert(stream.end(), res.tokens.begin(), res.tokens.end());
  set_stream(request.conversation_id, std::move(stream));
  // The block map's owners changed: have the (now idle) engine thread describe the cache again
  // before the caller shows the turn's end.
  const uint64_t seen = view_.version();
  engine_->notify_observer();
  {
    std::unique_lock lock(view_mu_);
    view_published_.wait_for(lock, std::chrono::milliseconds(500), [&] { return view_.version() != seen; });
  }
  TurnResult out;
  out.tokens = res.tokens;
  out.text = res.text;
  out.stats.valid = true;
  out.stats.n_tokens = static_cast<int64_t>(res.tokens.size());
  out.stats.n_prompt = n_prompt;
  out.stats.n_prompt_reused = res.prefix.n_cached;
  for (int t = 0; t < 3; ++t) out.stats.n_from_tier[t] = res.prefix.n_from_tier[t];
  out.stats.n_prompt_recomputed = res.prefix.n_recomputed;
  out.stats.ttft_ms = res.ttft_ms;
  out.stats.prefill_ms = res.prefill_ms;
  out.stats.decode_ms = res.ttft_ms > 0 ? res.total_ms - res.ttft_ms : 0;
  out.stats.stop_reason = model::to_string(res.reason);
  return out;
}

void EngineTurnRunner::prefetch(int64_t conversation_id, const std::vector<int32_t>& tokens) {
  if (!tokens.empty()) set_stream(conversation_id, tokens);
  engine_->prefetch(conversation_id, tokens);  // observed after it ran
}

void EngineTurnRunner::release_streams(int64_t id, std::span<const std::vector<int32_t>> dead,
                                       std::span<const std::vector<int32_t>> live) {
  std::vector<kv::BlockKey> keys;
  for (kv::KvGroup g = 0; g < cache_->n_groups(); ++g) {  // every KV group's keys (one group for most models)
    const auto more = kv::unshared_block_keys(cache_->group(g).fingerprint(), cache_->block_tokens(), dead, live);
    keys.insert(keys.end(), more.begin(), more.end());
  }
  {
    std::lock_guard lock(streams_mu_);
    streams_.erase(id);
  }
  engine_->forget_conversation(id, std::move(keys));
}

void EngineTurnRunner::fill_memory(ui::MemoryState& out) {
  out.kv_bytes_per_token = 0;
  for (const kernels::KvBlockLayout& layout : cache_->layouts()) {  // every KV group's layers
    out.kv_bytes_per_token += static_cast<double>(layout.block_bytes) / static_cast<double>(layout.block_tokens);
  }
  out.kv_groups.clear();
  const model::KvGroupMap map = m_.config().kv_group_map();
  for (size_t g = 0; g < map.groups.size(); ++g) {
    const kv::KvGroupSpec& spec = map.groups[g];
    ui::KvGroupLine line{std::string(kv::kv_group_kind_name(spec.kind)), spec.n_layer, spec.window, spec.source, 0};
    if (spec.stores()) {
      const kernels::KvBlockLayout& layout = cache_->group(static_cast<kv::KvGroup>(g)).layout();
      line.bytes_per_token = static_cast<double>(layout.block_bytes) / static_cast<double>(layout.block_tokens);
      if (layout.state) line.state_bytes = static_cast<double>(layout.block_bytes);  // one snapshot a block
    }
    out.kv_groups.push_back(std::move(line));
  }
  out.n_ctx = options_.n_ctx;
  out.n_session_tokens = n_turn_tokens_.load();
  out.kv_used_bytes = static_cast<size_t>(out.kv_bytes_per_token * static_cast<double>(out.n_session_tokens));
  out.kv_capacity_bytes = static_cast<size_t>(out.kv_bytes_per_token * static_cast<double>(out.n_ctx));
  out.tier_warning.clear();
  if (cold_) {
    const kv::ColdStoreStats st = cold_->stats();
    if (!st.healthy) out.tier_warning = "Disk tier off: " + st.warning + " Conversations keep working from RAM.";
  } else if (!cold_error_.empty()) {
    out.tier_warning = "Disk tier off: " + cold_error_ + " Conversations keep working from RAM.";
  }
  view_.read(view_copy_);
  out.tiers.clear();
  for (kv::Tier t : {kv::Tier::t0, kv::Tier::t1, kv::Tier::t2}) {
    if (t == kv::Tier::t2 && !cold_) continue;
    const kv::TierUsage& u = view_copy_.metrics.tiers[static_cast<size_t>(kv::tier_index(t))];
    out.tiers.push_back(ui::TierView{ui::tier_name(kv::tier_index(t)), static_cast<size_t>(u.used_bytes),
                                     static_cast<size_t>(u.capacity_bytes)});
  }
  feed_.fill(view_copy_, out);
}

}  // namespace kvc::app

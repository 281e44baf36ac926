// EngineHost: generations submitted to the engine thread, their text relayed to HTTP threads.
#include "app/server/engine_host.h"

#include <algorithm>
#include <cstdio>

#include "core/kv/kv_events.h"
#include "core/model/kv_setup.h"

namespace kvc::server {

namespace {

constexpr int64_t k_snapshot_interval_us = 50'000;

}  // namespace

Generation::Update Generation::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
  Update u;
  u.text.swap(pending_);
  u.done = done_;
  return u;
}

void Generation::cancel() {
  engine::RequestId id = 0;
  {
    std::lock_guard lock(mu_);
    if (done_ || cancel_.exchange(true)) return;
    id = id_;
  }
  if (id != 0) engine_->cancel(id);  // else start() cancels it once it knows the id
}

Result<std::unique_ptr<EngineHost>> EngineHost::create(const model::Model& m, const EngineHostOptions& o) {
  auto host = std::unique_ptr<EngineHost>(new EngineHost(m, o));
  if (!o.cold_dir.empty()) {
    storage::ColdStoreOptions co;
    if (o.budget.t2_bytes > 0) co.capacity_bytes = o.budget.t2_bytes;
    co.batch_window_ms = storage::k_streaming_batch_window_ms;  // an answer's blocks share a commit
    auto opened = storage::SqliteColdStore::open(o.cold_dir, co);
    if (opened.ok()) {
      host->cold_ = std::move(*opened);
      host->cold_view_ = host->cold_.get();
    } else {
      host->cold_error_ = opened.error().message;
      std::fprintf(stderr, "kvchat-cli serve: the disk KV tier is off (histories will not survive a restart): %s\n",
                   opened.error().what().c_str());
    }
  }
  model::KvSetup ks;
  ks.k_format = ks.v_format = o.kv_format;
  ks.budget = o.budget;
  ks.t0_tokens = std::max(1, o.t0_contexts) * o.n_ctx;
  ks.cold = host->cold_.get();
  auto cache = model::create_kv_cache(m, ks);
  if (!cache.ok()) return cache.error();
  host->cache_ = std::move(*cache);
  // Its blocks are collected first once the model file is deleted (as the app's are).
  if (host->cold_) host->cold_->register_model(*host->cache_, m.path());

  engine::EngineOptions eo;
  eo.n_ctx = o.n_ctx;
  eo.max_running = o.max_running;
  eo.observer = [h = host.get()](const kv::KvCache& c, bool idle) { h->observe(c, idle); };
  host->owned_engine_ = std::make_unique<engine::Engine>(m, *host->cache_, eo);
  host->engine_ = host->owned_engine_.get();
  host->snapshot_now(*host->cache_);
  host->engine_->start();
  return host;
}

std::unique_ptr<EngineHost> EngineHost::attach(const model::Model& m, engine::Engine& engine,
                                               const storage::SqliteColdStore* cold, const EngineHostOptions& o) {
  auto host = std::unique_ptr<EngineHost>(new EngineHost(m, o));
  host->engine_ = &engine;
  host->cold_view_ = cold;
  engine.notify_observer();  // the first snapshot, soon
  return host;
}

EngineHost::~EngineHost() { (void)close(); }

Status EngineHost::close() {
  if (closed_) return {};
  closed_ = true;
  shutdown();
  if (!owned_engine_) {
    std::lock_guard lock(mu_);
    for (int64_t c : conversations_lru_) engine_->forget_conversation(c, {});
    conversations_lru_.clear();
    conversations_.clear();
    return {};
  }
  owned_engine_.reset();  // joins the engine thread before anything it uses goes
  Status checked = cache_->check_invariants();
  cache_.reset();
  if (cold_) cold_->flush();  // every block written behind is on disk before the store closes
  if (!checked.ok())
    return make_error(ErrorCode::internal, "the KV cache's invariants do not hold: " + checked.error().message);
  return {};
}

void EngineHost::observe(const kv::KvCache& cache, bool idle) {
  if (idle || kv::now_us() - last_snapshot_us_ >= k_snapshot_interval_us) snapshot_now(cache);
}

void EngineHost::snapshot_now(const kv::KvCache& cache) {
  CacheSnapshot s;
  for (kv::Tier t : {kv::Tier::t0, kv::Tier::t1, kv::Tier::t2}) s.tiers[kv::tier_index(t)] = cache.tier_usage(t);
  for (kv::KvGroup g = 0; g < cache.n_groups(); ++g) {
    CacheSnapshot::Group& group = s.groups.emplace_back();
    group.window = cache.group(g).window();
    for (kv::Tier t : {kv::Tier::t0, kv::Tier::t1}) group.tiers[kv::tier_index(t)] = cache.tier_usage(t, g);
  }
  s.counters = cache.counters();
  s.n_fragmented_tokens = cache.internal_fragmentation_tokens();
  if (cold_view_) {
    const kv::ColdStoreStats st = cold_view_->stats();
    s.cold_healthy = st.healthy;
    s.cold_warning = st.warning;
  }
  {
    std::lock_guard lock(snapshot_mu_);
    snapshot_ = std::move(s);
  }
  last_snapshot_us_ = kv::now_us();
}

CacheSnapshot EngineHost::cache_snapshot() const {
  std::lock_guard lock(snapshot_mu_);
  return snapshot_;
}

void EngineHost::touch_conversation_locked(int64_t conversation) {
  if (auto it = conversations_.find(conversation); it != conversations_.end()) {
    conversations_lru_.splice(conversations_lru_.begin(), conversations_lru_, it->second);
    return;
  }
  conversations_lru_.push_front(conversation);
  conversations_[conversation] = conversations_lru_.begin();
  // Past the bound, the least recent idle conversation's sequence goes (its blocks stay cached).
  for (auto it = conversations_lru_.end();
       static_cast<int64_t>(conversations_.size()) > options_.max_conversations && it != conversations_lru_.begin();) {
    --it;
    if (busy_.count(*it)) continue;
    engine_->forget_conversation(*it, {});
    conversations_.erase(*it);
    it = conversations_lru_.erase(it);
  }
}

std::shared_ptr<Generation> EngineHost::start(GenerationRequest r, Refusal& refusal) {
  refusal = Refusal::none;
  auto g = std::make_shared<Generation>();
  g->engine_ = engine_;
  g->prompt_ = r.prompt;
  int64_t conversation = r.conversation;
  {
    std::lock_guard lock(mu_);
    if (shutting_down_) {
      refusal = Refusal::shutting_down;
      return nullptr;
    }
    if (n_in_flight_.load() >= options_.max_queue) {
      refusal = Refusal::queue_full;
      return nullptr;
    }
    // One sequence serves one request at a time.
    if (conversation != 0 && busy_.count(conversation)) conversation = 0;
    if (conversation != 0) {
      ++busy_[conversation];
      touch_conversation_locked(conversation);
    }
    in_flight_[g.get()] = g;
    ++n_in_flight_;
  }
  engine::Request req;
  req.conversation = conversation;
  req.prompt = std::move(r.prompt);
  req.options = std::move(r.options);
  req.on_text = [g](std::string_view t) {
    {
      std::lock_guard lock(g->mu_);
      g->pending_ += t;
    }
    g->cv_.notify_all();
    return !g->cancel_.load();
  };
  req.on_done = [this, g, conversation](const engine::RequestResult& res) {
    engine::RequestId forget = 0;
    {
      std::lock_guard lock(g->mu_);
      g->result_ = res;
      g->done_ = true;
      forget = g->id_;  // 0 when start() has not recorded it yet: start() forgets it then
    }
    if (forget != 0) engine_->forget(forget);
    finished(conversation, g);
    g->cv_.notify_all();
  };
  const engine::RequestId id = engine_->submit(std::move(req));
  bool cancel = false, done = false;
  {
    std::lock_guard lock(g->mu_);
    g->id_ = id;
    cancel = g->cancel_.load();
    done = g->done_;
  }
  if (done)
    engine_->forget(id);
  else if (cancel)
    engine_->cancel(id);
  return g;
}

void EngineHost::finished(int64_t conversation, const std::shared_ptr<Generation>& g) {
  std::lock_guard lock(mu_);
  if (conversation != 0) {
    if (auto it = busy_.find(conversation); it != busy_.end() && --it->second <= 0) busy_.erase(it);
  }
  in_flight_.erase(g.get());
  --n_in_flight_;
  idle_cv_.notify_all();
}

void EngineHost::shutdown(std::chrono::milliseconds wait) {
  std::vector<std::shared_ptr<Generation>> running;
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    for (auto& [_, weak] : in_flight_) {
      if (auto g = weak.lock()) running.push_back(std::move(g));
    }
  }
  for (auto& g : running) g->cancel();
  std::unique_lock lock(mu_);
  idle_cv_.wait_for(lock, wait, [&] { return in_flight_.empty(); });
}

}  // namespace kvc::server

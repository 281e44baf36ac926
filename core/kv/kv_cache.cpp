// KvCache: the tier store, the sequence table and the telemetry, wired together; KV groups in lockstep.
#include "core/kv/kv_cache.h"

#include <algorithm>
#include <chrono>

#include "core/util/assert.h"

namespace kvc::kv {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<std::unique_ptr<KvCache>> KvCache::create(const KvCacheConfig& config, backend::Backend& be, ColdStore* cold) {
  return create(std::span<const KvCacheConfig>(&config, 1), be, cold);
}

Result<std::unique_ptr<KvCache>> KvCache::create(std::span<const KvCacheConfig> groups, backend::Backend& be,
                                                 ColdStore* cold) {
  if (groups.empty()) return make_error(ErrorCode::invalid_argument, "a KV cache needs at least one layer group");
  std::unique_ptr<KvCache> top;
  for (size_t g = 0; g < groups.size(); ++g) {
    const KvCacheConfig& config = groups[g];
    std::unique_ptr<KvCache> c(new KvCache());
    // Write-behind completions are the one cold store's: group 0 reports them for all groups.
    c->telemetry_ =
        std::make_unique<KvTelemetry>(g == 0 ? cold : nullptr, config.layout.block_bytes, config.layout.block_tokens);
    auto store = TierStore::create(config, be, cold, *c->telemetry_);
    if (!store.ok()) return store.error();
    c->store_ = std::move(*store);
    c->seqs_ = std::make_unique<SequenceTable>(*c->store_);
    if (g == 0) {
      top = std::move(c);
    } else {
      top->more_.push_back(std::move(c));
    }
  }
  return top;
}

KvCache::~KvCache() {
  if (!seqs_) return;
  for (const auto& [id, s] : seqs_->sequences()) seqs_->checkpoint(id);
}

SeqId KvCache::create_sequence() {
  const SeqId id = seqs_->create_sequence();
  for (auto& g : more_) {
    const SeqId same = g->create_sequence();
    KVC_ASSERT(same == id);  // the groups' tables are created and destroyed in lockstep
  }
  return id;
}

void KvCache::destroy_sequence(SeqId id) {
  seqs_->destroy_sequence(id);
  for (auto& g : more_) g->destroy_sequence(id);
}

std::vector<kernels::KvBlockLayout> KvCache::layouts() const {
  std::vector<kernels::KvBlockLayout> out{layout()};
  for (const auto& g : more_) out.push_back(g->layout());
  return out;
}

// The hit rule over the groups: P is what the global groups (no window) have; s <= P the
// longest prefix every group has (a windowed group needs only its window before s; a recurrent
// one a block boundary, or its own history's exact end). Each group
// then takes s; one that falls short (a block that cannot be promoted, no room for a copy)
// brings the others down to it.
Result<PrefixInfo> KvCache::prepare(SeqId id, std::span<const int32_t> prompt) {
  if (more_.empty()) return seqs_->prepare(id, prompt);
  const auto t_lookup = std::chrono::steady_clock::now();
  int64_t full = INT64_MAX;
  for (KvGroup g = 0; g < n_groups(); ++g) {
    // What the attention groups hold; a recurrent group resumes only at its boundaries (below).
    if (group(g).window() == 0 && !group(g).recurrent()) full = std::min(full, group(g).seqs_->probe(id, prompt));
  }
  if (full == INT64_MAX) full = seqs_->probe(id, prompt);
  int64_t cap = full;
  for (bool changed = true; changed;) {
    changed = false;
    for (KvGroup g = 0; g < n_groups(); ++g) {
      const int64_t n = group(g).seqs_->probe(id, prompt, cap);
      if (n < cap) {
        cap = n;
        changed = true;
      }
    }
  }
  const double probe_ms = ms_since(t_lookup);
  std::vector<PrefixInfo> infos;
  for (KvGroup g = 0; g < n_groups(); ++g) {
    auto r = group(g).seqs_->prepare(id, prompt, cap);
    if (!r.ok()) {
      for (KvGroup h = 0; h < g; ++h) group(h).seqs_->shorten(id, 0);
      return r.error();
    }
    infos.push_back(*r);
  }
  int64_t n = cap;
  for (const PrefixInfo& i : infos) n = std::min(n, i.n_cached);
  for (bool equal = false; !equal;) {
    equal = true;
    for (KvGroup g = 0; g < n_groups(); ++g) {
      const int64_t held = group(g).seqs_->shorten(id, n);
      if (held != n) {
        n = std::min(n, held);
        equal = false;
      }
    }
  }
  PrefixInfo info = infos[0];
  info.lookup_ms += probe_ms;
  for (size_t g = 1; g < infos.size(); ++g) {
    info.n_recomputed_bad += infos[g].n_recomputed_bad;
    info.lookup_ms += infos[g].lookup_ms;
    info.promote_ms += infos[g].promote_ms;
  }
  // Group 0 reports the tiers; positions it gave up to agree with the others leave its counts
  // from the slowest tier down.
  for (int64_t excess = info.n_cached - n, t = 2; excess > 0 && t >= 0; --t) {
    const int64_t take = std::min(excess, info.n_from_tier[t]);
    info.n_from_tier[t] -= take;
    excess -= take;
  }
  info.n_cached = n;
  info.n_recomputed = std::max<int64_t>(0, std::min(full, info.n_prompt - 1) - n);
  return info;
}

bool KvCache::reserve(SeqId id, int64_t n_new) {
  if (!seqs_->reserve(id, n_new)) return false;
  for (auto& g : more_) {
    if (!g->reserve(id, n_new)) return false;
  }
  return true;
}

void KvCache::commit(SeqId id, std::span<const int32_t> tokens) {
  seqs_->commit(id, tokens);
  for (auto& g : more_) g->commit(id, tokens);
}

void KvCache::park(SeqId id) {
  seqs_->park(id);
  for (auto& g : more_) g->park(id);
}

PrefixInfo KvCache::prefetch(std::span<const int32_t> tokens, SeqId for_seq) {
  PrefixInfo info;
  if (for_seq == 0) {
    info = store_->prefetch(tokens);
  } else {
    std::vector<MovedUp> moved;
    info = store_->prefetch(tokens, &moved);
    seqs_->note_moved_up(for_seq, moved);
  }
  for (auto& g : more_) {
    const PrefixInfo gi = g->prefetch(tokens, for_seq);
    info.n_cached = std::min(info.n_cached, gi.n_cached);
    info.n_recomputed_bad += gi.n_recomputed_bad;
  }
  return info;
}

TierUsageBytes KvCache::tier_usage(Tier t) const {
  TierUsageBytes u = store_->tier_usage(t);
  if (t == Tier::t2) return u;  // one cold store for every group
  for (const auto& g : more_) {
    const TierUsageBytes gu = g->tier_usage(t);
    u.used_bytes += gu.used_bytes;
    u.capacity_bytes += gu.capacity_bytes;
    u.used_blocks += gu.used_blocks;
    u.capacity_blocks += gu.capacity_blocks;
  }
  return u;
}

void KvCache::set_event_log(KvEventLog* log) {
  telemetry_->set_event_log(log);
  for (auto& g : more_) g->set_event_log(log);
}

void KvCache::set_current_request(int64_t request_id) {
  telemetry_->set_current_request(request_id);
  for (auto& g : more_) g->set_current_request(request_id);
}

void KvCache::emit_tier_usage() {
  if (more_.empty()) {
    telemetry_->emit_tier_usage(store_->tier_usages());
    return;
  }
  telemetry_->emit_tier_usage({tier_usage(Tier::t0), tier_usage(Tier::t1), tier_usage(Tier::t2)});
}

std::vector<BlockKey> KvCache::cold_prefix_keys(std::span<const int32_t> prompt, std::vector<size_t>* sizes) {
  std::vector<BlockKey> keys = store_->cold_prefix_keys(prompt);
  if (sizes) sizes->assign(keys.size(), store_->block_bytes());
  for (auto& g : more_) {
    const std::vector<BlockKey> more = g->store_->cold_prefix_keys(prompt);
    keys.insert(keys.end(), more.begin(), more.end());
    if (sizes) sizes->insert(sizes->end(), more.size(), g->store_->block_bytes());
  }
  return keys;
}

int64_t KvCache::stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                            std::span<const uint8_t> payloads, SeqId for_seq) {
  KVC_ASSERT(more_.empty());  // blocks of one size: several groups pass one payload per key
  if (for_seq == 0) return store_->stage_cold(keys, results, payloads);
  std::vector<MovedUp> moved;
  const int64_t n = store_->stage_cold(keys, results, payloads, &moved);
  seqs_->note_moved_up(for_seq, moved);
  return n;
}

int64_t KvCache::stage_cold(std::span<const BlockKey> keys, std::span<const ColdRead> results,
                            std::span<const std::span<const uint8_t>> payloads, SeqId for_seq) {
  // Each group stages the keys its index holds (the others' are not found there).
  int64_t n = 0;
  for (KvGroup g = 0; g < n_groups(); ++g) {
    KvCache& c = group(g);
    std::vector<MovedUp> moved;
    n += c.store_->stage_cold(keys, results, payloads, for_seq == 0 ? nullptr : &moved);
    if (for_seq != 0) c.seqs_->note_moved_up(for_seq, moved);
  }
  return n;
}

int64_t KvCache::forget(std::span<const BlockKey> keys) {
  int64_t n = store_->forget(keys);
  for (auto& g : more_) n += g->forget(keys);
  return n;
}

void KvCache::demote_all_unpinned(Tier to) {
  store_->demote_all_unpinned(to);
  for (auto& g : more_) g->demote_all_unpinned(to);
}

}  // namespace kvc::kv

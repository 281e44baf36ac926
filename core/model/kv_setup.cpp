// create_kv_cache: the one place a model's KV block layout and tier budgets are decided.
#include "core/model/kv_setup.h"

#include <algorithm>
#include <vector>

namespace kvc::model {

Result<std::unique_ptr<kv::KvCache>> create_kv_cache(const Model& m, const KvSetup& o) {
  const ModelConfig& c = m.config();
  auto layout = c.kv_layout(o.block_tokens, o.k_format, o.v_format);
  if (!layout.ok()) return layout.error();
  kv::KvCacheConfig kc;
  kc.layout = *layout;
  const int64_t n_blocks = (o.t0_tokens + o.block_tokens - 1) / o.block_tokens + 2;  // +2: copy on write, reserve ahead
  kc.t0_bytes = o.budget.t0_bytes > 0 ? o.budget.t0_bytes : n_blocks * layout->block_bytes;
  kc.t1_bytes = o.budget.t1_bytes;
  kc.fingerprint = kv_fingerprint(m, *layout);
  kc.window = c.sliding_window;
  if (c.n_kv_groups() == 1) return kv::KvCache::create(kc, m.backend(), o.cold);
  // KV groups (local and global layers): each its own blocks, keys and tiers. T0 holds the
  // positions of the budget in the global group; the local group needs only each running
  // sequence's window and chunk, so it holds at most k_local_sequences windows (plus a batch),
  // and a byte budget gives what that saves to the global group. T1 is split by layer share.
  constexpr int64_t k_local_sequences = 16;  // the engine's max_running by default
  const int64_t B = o.block_tokens;
  const int64_t n_positions = o.budget.t0_bytes > 0 ? o.budget.t0_bytes / layout->block_bytes * B : n_blocks * B;
  const int64_t local_positions = std::min(n_positions, k_local_sequences * (c.local_window + 2 * B) + 256 + 2 * B);
  std::vector<kv::KvCacheConfig> groups(static_cast<size_t>(c.n_kv_groups()));
  int64_t local_bytes = 0;
  for (int g = c.n_kv_groups() - 1; g >= 0; --g) {  // the local group first: the global one gets the rest
    auto gl = c.kv_group_layout(g, o.block_tokens, o.k_format, o.v_format);
    if (!gl.ok()) return gl.error();
    const double share = static_cast<double>(c.n_kv_group_layers(g)) / static_cast<double>(c.n_layer);
    kv::KvCacheConfig gc;
    gc.layout = *gl;
    if (g != 0) {
      gc.t0_bytes = (local_positions + B - 1) / B * gl->block_bytes;
      local_bytes += gc.t0_bytes;
    } else {
      gc.t0_bytes = o.budget.t0_bytes > 0 ? std::max(o.budget.t0_bytes - local_bytes, gl->block_bytes)
                                          : n_blocks * gl->block_bytes;
    }
    gc.t1_bytes = static_cast<int64_t>(static_cast<double>(o.budget.t1_bytes) * share);
    gc.fingerprint = kv_group_fingerprint(m, *gl, g);
    gc.window = g == 0 ? c.sliding_window : c.local_window;
    gc.checkpoints_only = g != 0;  // the local layers' blocks reach T2 only as turn checkpoints
    groups[static_cast<size_t>(g)] = gc;
  }
  return kv::KvCache::create(groups, m.backend(), o.cold);
}

}  // namespace kvc::model

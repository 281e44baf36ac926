// create_kv_cache: the one place a model's KV block layout and tier budgets are decided.
#include "core/model/kv_setup.h"

#include <algorithm>
#include <string>
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
  const KvGroupMap map = c.kv_group_map();
  for (const kv::KvGroupSpec& spec : map.groups) {
    if (!kv::kv_group_kind_supported(spec.kind)) {
      return make_error(ErrorCode::unsupported, "this model has layers whose KV cache is of kind '" +
                                                    std::string(kv::kv_group_kind_name(spec.kind)) +
                                                    "', which kvchat does not support yet");
    }
  }
  if (map.groups.size() > 1 && map.n_storing() == 1 && kernels::kv_k_per_channel(o.k_format)) {
    return make_error(ErrorCode::unsupported,
                      "int4c K keeps its partly filled last block in F16 beside the cache, which a model whose "
                      "layers share K/V does not support yet; use --kv-type int4h");
  }
  const int n_storing = map.n_storing();
  if (n_storing == 1) return kv::KvCache::create(kc, m.backend(), o.cold);
  // KV groups (local and global layers, or more): each its own blocks, keys and tiers. T0 holds the
  // positions of the budget in the full groups; a windowed group needs only each running
  // sequence's window and chunk, so it holds at most k_window_sequences windows (plus a batch),
  // and a byte budget gives what that saves to the full groups, by their share of the layers.
  // T1 is split by layer share.
  constexpr int64_t k_window_sequences = 16;  // the engine's max_running by default
  const int64_t B = o.block_tokens;
  // Bytes of one block of every storing layer: gemma4's local and global heads differ in size, so
  // the groups' layouts are summed rather than one whole layout taken.
  int64_t all_block_bytes = layout->block_bytes;
  if (c.head_dim_local > 0) {
    all_block_bytes = 0;
    for (int g = 0; g < n_storing; ++g) {
      auto gl = c.kv_group_layout(g, o.block_tokens, o.k_format, o.v_format);
      if (!gl.ok()) return gl.error();
      all_block_bytes += gl->block_bytes;
    }
  }
  const int64_t n_positions = o.budget.t0_bytes > 0 ? o.budget.t0_bytes / all_block_bytes * B : n_blocks * B;
  std::vector<kv::KvCacheConfig> groups(static_cast<size_t>(n_storing));
  int64_t window_bytes = 0, n_full_layers = 0;
  for (int g = 0; g < n_storing; ++g) {  // the windowed groups first: the full ones get the rest
    const kv::KvGroupSpec& spec = map.groups[static_cast<size_t>(g)];
    auto gl = c.kv_group_layout(g, o.block_tokens, o.k_format, o.v_format);
    if (!gl.ok()) return gl.error();
    kv::KvCacheConfig& gc = groups[static_cast<size_t>(g)];
    gc.layout = *gl;
    gc.t1_bytes = static_cast<int64_t>(static_cast<double>(o.budget.t1_bytes) * static_cast<double>(spec.n_layer) /
                                       static_cast<double>(c.n_layer_kv()));
    gc.fingerprint = kv_group_fingerprint(m, *gl, g);
    gc.window = spec.window;
    if (spec.kind == kv::KvGroupKind::recurrent) {  // a state snapshot a block: as many blocks as the positions
      gc.recurrent = true;
      int64_t positions = n_positions;
      if (o.budget.t0_bytes > 0) {  // the budget's positions over the attention group's blocks and these
        auto attn = c.kv_group_layout(0, o.block_tokens, o.k_format, o.v_format);
        if (!attn.ok()) return attn.error();
        positions = o.budget.t0_bytes / (attn->block_bytes + gl->block_bytes) * B;
      }
      gc.t0_bytes = ((positions + B - 1) / B + 2) * gl->block_bytes;
      window_bytes += gc.t0_bytes;
      continue;
    }
    if (spec.kind != kv::KvGroupKind::window) {
      n_full_layers += spec.n_layer;
      continue;
    }
    const int64_t positions = std::min(n_positions, k_window_sequences * (spec.window + 2 * B) + 256 + 2 * B);
    gc.t0_bytes = (positions + B - 1) / B * gl->block_bytes;
    window_bytes += gc.t0_bytes;
    gc.checkpoints_only = true;  // the local layers' blocks reach T2 only as turn checkpoints
  }
  for (int g = 0; g < n_storing; ++g) {
    const kv::KvGroupSpec& spec = map.groups[static_cast<size_t>(g)];
    if (spec.kind == kv::KvGroupKind::window || spec.kind == kv::KvGroupKind::recurrent) continue;
    kv::KvCacheConfig& gc = groups[static_cast<size_t>(g)];
    const double share = static_cast<double>(spec.n_layer) / static_cast<double>(n_full_layers);
    gc.t0_bytes = o.budget.t0_bytes > 0
                      ? std::max(static_cast<int64_t>(static_cast<double>(o.budget.t0_bytes - window_bytes) * share),
                                 gc.layout.block_bytes)
                      : n_blocks * gc.layout.block_bytes;
  }
  return kv::KvCache::create(groups, m.backend(), o.cold);
}

}  // namespace kvc::model

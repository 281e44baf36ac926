// create_kv_cache: the one place a model's KV block layout and tier budgets are decided.
#include "core/model/kv_setup.h"

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
  return kv::KvCache::create(kc, m.backend(), o.cold);
}

}  // namespace kvc::model

// create_kv_cache: the one place a model's KV block layout and tier budgets are decided.
#include "core/model/kv_setup.h"

#include <string>

namespace kvc::model {

Result<std::unique_ptr<kv::KvCache>> create_kv_cache(const Model& m, const KvSetup& o) {
  const ModelConfig& c = m.config();
  auto layout = kernels::make_kv_block_layout(static_cast<int>(c.n_layer), static_cast<int>(c.n_head_kv),
                                              static_cast<int>(c.head_dim), o.block_tokens, kv::to_kernel_type(o.k_format),
                                              kv::to_kernel_type(o.v_format));
  if (!layout) {
    return make_error(ErrorCode::unsupported, "KV format " + std::string(kv::kv_format_name(o.k_format)) + "/" +
                                                  std::string(kv::kv_format_name(o.v_format)) +
                                                  " needs a head size that is a multiple of 32; this model's is " +
                                                  std::to_string(c.head_dim) + " (use f16)");
  }
  kv::KvCacheConfig kc;
  kc.layout = *layout;
  const int64_t n_blocks = (o.t0_tokens + o.block_tokens - 1) / o.block_tokens + 2;  // +2: copy on write, reserve ahead
  kc.t0_bytes = o.t0_bytes > 0 ? o.t0_bytes : n_blocks * layout->block_bytes;
  kc.t1_bytes = o.t1_bytes;
  kc.fingerprint = kv_fingerprint(m, *layout);
  kc.window = c.sliding_window;
  return kv::KvCache::create(kc, m.backend(), o.cold);
}

}  // namespace kvc::model

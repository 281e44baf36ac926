// The KV cache for a model: block layout, fingerprint and tier budgets from a few choices.
#pragma once

#include <cstdint>
#include <memory>

#include "core/kv/cold_store.h"
#include "core/kv/kv_cache.h"
#include "core/kv/kv_format.h"
#include "core/model/model.h"
#include "core/util/machine_budget.h"
#include "core/util/result.h"

namespace kvc::model {

struct KvSetup {
  kv::KvFormat k_format = kv::KvFormat::f16;
  kv::KvFormat v_format = kv::KvFormat::f16;
  int32_t block_tokens = 16;  // B
  // As resolved where it was set (with_defaults); T0 0: room for t0_tokens. T2's is the cold
  // store's own (it is opened with it).
  KvBudget budget;
  int64_t t0_tokens = 4096;       // with budget.t0_bytes 0: T0 holds this many positions (+2 blocks)
  kv::ColdStore* cold = nullptr;  // T2; must outlive the cache
};

// Fails with a message naming the fix when the model cannot use the chosen KV formats.
Result<std::unique_ptr<kv::KvCache>> create_kv_cache(const Model& m, const KvSetup& setup);

}  // namespace kvc::model

// The default context length: the model's trained context, cut to what a memory budget for its KV cache holds.
#pragma once

#include <cstdint>

#include "core/model/model_config.h"

namespace kvc::model {

// One full context's KV cache (F16, every layer, K and V) may take this much by default.
constexpr int64_t k_default_ctx_kv_budget_bytes = int64_t{1} << 30;  // 1 GiB

// F16 KV bytes of n_ctx positions.
double context_kv_bytes(const ModelConfig& c, int64_t n_ctx);

// n_ctx_train when its KV fits kv_budget_bytes (<= 0: the default budget), else the largest
// multiple of 256 positions that fits (at least 256, or n_ctx_train if smaller).
int64_t default_context(const ModelConfig& c, int64_t kv_budget_bytes);

}  // namespace kvc::model

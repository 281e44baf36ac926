// Sizing the default context from the trained context and a KV memory budget.
#include "core/model/context_budget.h"

#include <algorithm>

namespace kvc::model {

double context_kv_bytes(const ModelConfig& c, int64_t n_ctx) {
  return c.kv_bytes_per_token(kv::KvFormat::f16) * static_cast<double>(n_ctx);
}

int64_t default_context(const ModelConfig& c, int64_t kv_budget_bytes) {
  const int64_t budget = kv_budget_bytes > 0 ? kv_budget_bytes : k_default_ctx_kv_budget_bytes;
  const int64_t trained = std::max<int64_t>(c.n_ctx_train, 1);
  if (context_kv_bytes(c, trained) <= static_cast<double>(budget)) return trained;
  const double per_token = c.kv_bytes_per_token(kv::KvFormat::f16);
  const auto fit = static_cast<int64_t>(static_cast<double>(budget) / per_token) / 256 * 256;
  return std::min(trained, std::max<int64_t>(fit, 256));
}

}  // namespace kvc::model

// What the views see of the inference engine's settings: the tier budgets and restarts.
#pragma once

#include <cstdint>

namespace kvc::ui {

// Budgets of the RAM tiers; 0 means the app's default (T0: room for two conversations of the
// full context, T1: 512 MiB).
// Applying new budgets recreates the runner (its RAM tiers start empty; T2 on disk stays).
struct TierBudgets {
  int64_t t0_bytes = 0;
  int64_t t1_bytes = 0;
  // What one context's KV (F16) may take: sizes the default context, the model's trained
  // context cut to fit (0: --ctx-memory, else 1 GiB). No effect when -c sets the context.
  int64_t ctx_kv_bytes = 0;
};

struct EngineState {
  TierBudgets budgets;
  int64_t n_restarts = 0;  // in-process restarts of this run (every RAM tier dropped, T2 reopened)
  int64_t ctx_kv_budget_bytes = 0;  // the budget in force (the default resolved)
  bool ctx_fixed = false;           // -c set the context: the budget does not size it
};

}  // namespace kvc::ui

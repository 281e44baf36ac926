// What the views see of the inference engine's settings: the KV budget, the machine's free
// RAM and disk they default from, restarts, and the "Serve on localhost" API server.
#pragma once

#include <cstdint>
#include <string>

#include "core/kv/kv_format.h"
#include "core/util/machine_budget.h"

namespace kvc::ui {

// The app's OpenAI-compatible API (kvchat-cli serve's) on 127.0.0.1, on the app's own engine.
struct ServeState {
  bool wanted = false;     // the switch (remembered in settings.json)
  bool on = false;         // listening
  int port = 8080;         // as set in the Engine window (the listener's while on)
  std::string url;         // "http://127.0.0.1:8080/v1" while on
  std::string error;       // why it is not on though wanted (the port is in use, ...)
  int64_t n_requests = 0;  // generations the API answered since it went on
  int64_t n_in_flight = 0;
  int64_t last_prompt_tokens = 0;  // the last API generation's prompt, and of it from the cache
  int64_t last_cached_tokens = 0;
  int64_t last_completion_tokens = 0;
};

struct EngineState {
  // As set in the Engine window (0: default; the type the pools get, core/util/machine_budget.h).
  // Applying a new budget recreates the runner (its RAM tiers start empty; T2's blocks stay).
  KvBudget budgets;
  KvBudget defaults;  // from free RAM and free disk for the loaded model (default_budgets)
  // K and V's format, as set in the Engine window (settings.json) or by --kv-type; applying
  // another recreates the runner as a budget does (blocks of another format never match).
  kv::KvFormat kv_format = kv::KvFormat::f16;
  uint64_t mem_total_bytes = 0;
  uint64_t mem_available_bytes = 0;  // when the model was loaded
  uint64_t disk_free_bytes = 0;      // of the data directory
  std::string fit_warning;           // the loaded model and its KV crowd the free RAM
  int64_t n_restarts = 0;            // in-process restarts of this run (every RAM tier dropped, T2 reopened)
  int64_t ctx_kv_budget_bytes = 0;   // the budget in force (the default resolved)
  bool ctx_fixed = false;            // -c set the context: the budget does not size it
  ServeState serve;
};

}  // namespace kvc::ui

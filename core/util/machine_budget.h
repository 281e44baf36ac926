// Tier budgets that fit the machine: T0/T1 defaults from free RAM (/proc/meminfo MemAvailable),
// T0 from free GPU memory instead when the compute pool is on a GPU, T2 from free disk (statvfs of
// the data directory), and whether a model plus its KV would fit.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvc {

// The KV cache's memory budget: the one type from where it is set (the Engine window and
// DATA_DIR/settings.json, kvchat-cli serve's --t0-mib / --t1-mib / --disk-mib, the CLI's
// --ctx-memory) to the pools. A field of 0 takes the machine's default (default_budgets below);
// with_defaults() resolves them once, and the resolved budget goes unchanged to
// model::create_kv_cache (T0, T1: kv::KvCacheConfig) and the disk store (T2).
struct KvBudget {
  int64_t t0_bytes = 0;  // the compute pool; 0 once resolved too: room for t0_contexts contexts, in whole blocks
  int64_t t1_bytes = 0;  // host RAM
  int64_t t2_bytes = 0;  // disk
  // What one context's KV (F16) may take: sizes the default context, the model's trained
  // context cut to fit (0: model::k_default_ctx_kv_budget_bytes). No effect when -c sets it.
  int64_t ctx_kv_bytes = 0;
  friend bool operator==(const KvBudget&, const KvBudget&) = default;
};

// What the machine has free; every figure can be injected (tests).
struct MachineResources {
  uint64_t mem_total_bytes = 0;
  uint64_t mem_available_bytes = 0;  // MemAvailable: reclaimable page cache included
  uint64_t disk_free_bytes = 0;      // of the data directory's file system
  // The compute device's memory when it is a GPU (backend::Backend::device_memory(), read after
  // the weights were uploaded); 0: the compute pool T0 is host RAM (the CPU backend).
  uint64_t vram_total_bytes = 0;
  uint64_t vram_free_bytes = 0;
};

// MemTotal and MemAvailable from /proc/meminfo's text ("MemAvailable:  1234 kB"); 0 when absent.
MachineResources parse_meminfo(std::string_view text);
// /proc/meminfo (or `meminfo`) and statvfs(data_dir).
MachineResources read_machine_resources(const std::filesystem::path& data_dir,
                                        const std::filesystem::path& meminfo = "/proc/meminfo");

// What the KV tiers get by default, for a model with `weight_bytes` of weights (already in
// RAM when `weights_loaded`) and a context of n_ctx tokens at kv_bytes_per_token:
//   spare = MemAvailable - weights (unless loaded) - headroom (max(1 GiB, MemTotal / 10))
//   T0 = room for 2 contexts, or 1 if only that fits in spare / 2 (never below one context)
//   T1 = half of what is spare after T0, in [64 MiB, 8 GiB]
// On a GPU (vram_total_bytes > 0) T0 is device memory, the weights are there and not in RAM:
//   spare_gpu = free GPU memory - weights (unless uploaded) - max(512 MiB, total / 20)
//   T0 = room for 2 contexts if they fit in spare_gpu, else 1 (the warning says when not even one)
//   T1 = half of spare (RAM, weights not counted), in [64 MiB, 8 GiB]
//   T2 = a quarter of the free disk, in [256 MiB, 64 GiB], never past free disk - 1 GiB
//        (at least 64 MiB when the disk is nearly full)
struct BudgetDefaults {
  int t0_contexts = 2;
  KvBudget budget;      // t0: t0_contexts * n_ctx * kv_bytes_per_token; ctx_kv_bytes 0
  std::string warning;  // the model and its KV would not fit in free RAM: what to do
};
BudgetDefaults default_budgets(const MachineResources& m, uint64_t weight_bytes, bool weights_loaded,
                               uint64_t kv_bytes_per_token, int64_t n_ctx);

// `set` with its T1 and T2 of 0 replaced by the defaults' (T0 and the context's budget keep 0:
// the cache and model::default_context size them).
KvBudget with_defaults(const KvBudget& set, const BudgetDefaults& defaults);

// Empty when weights + KV for n_ctx tokens + headroom fit in MemAvailable (in free GPU memory when
// m has a GPU); else a warning that names the figures ("needs about 5.2 GiB (weights 4.1 GiB + KV
// 1.0 GiB at 8192 tokens), 3.0 GiB of RAM is free: ...").
std::string fit_warning(const MachineResources& m, uint64_t weight_bytes, uint64_t kv_bytes_for_ctx, int64_t n_ctx);

}  // namespace kvc

// Budgets from free RAM and free disk (see machine_budget.h for the rules).
#include "core/util/machine_budget.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace kvc {

namespace {

constexpr uint64_t k_mib = uint64_t{1} << 20;
constexpr uint64_t k_gib = uint64_t{1} << 30;

uint64_t headroom(const MachineResources& m) { return std::max(k_gib, m.mem_total_bytes / 10); }
// What a GPU keeps free beside the weights and T0: activations, scratch, the display, other processes.
uint64_t gpu_headroom(const MachineResources& m) { return std::max(512 * k_mib, m.vram_total_bytes / 20); }

uint64_t minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(k_gib));
  return buf;
}

}  // namespace

MachineResources parse_meminfo(std::string_view text) {
  MachineResources m;
  std::istringstream in{std::string(text)};
  std::string key;
  uint64_t value = 0;
  std::string unit;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    if (!(l >> key >> value)) continue;
    l >> unit;
    const uint64_t bytes = unit == "kB" ? value * 1024 : value;
    if (key == "MemTotal:") m.mem_total_bytes = bytes;
    if (key == "MemAvailable:") m.mem_available_bytes = bytes;
  }
  return m;
}

MachineResources read_machine_resources(const std::filesystem::path& data_dir, const std::filesystem::path& meminfo) {
  std::ifstream f(meminfo);
  std::stringstream ss;
  ss << f.rdbuf();
  MachineResources m = parse_meminfo(ss.str());
  // The data directory may not exist yet: its nearest existing parent is on the same disk.
  std::filesystem::path dir = data_dir;
  std::error_code ec;
  while (!dir.empty() && !std::filesystem::exists(dir, ec) && dir.has_parent_path() && dir != dir.parent_path()) {
    dir = dir.parent_path();
  }
  struct statvfs st {};
  if (!dir.empty() && ::statvfs(dir.c_str(), &st) == 0) {
    m.disk_free_bytes = static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
  }
  return m;
}

BudgetDefaults default_budgets(const MachineResources& m, uint64_t weight_bytes, bool weights_loaded,
                               uint64_t kv_bytes_per_token, int64_t n_ctx) {
  BudgetDefaults b;
  const uint64_t context = kv_bytes_per_token * static_cast<uint64_t>(std::max<int64_t>(n_ctx, 1));
  const bool gpu = m.vram_total_bytes > 0;
  const uint64_t weights_in_ram = weights_loaded || gpu ? 0 : weight_bytes;
  const uint64_t spare = minus(minus(m.mem_available_bytes, weights_in_ram), headroom(m));
  uint64_t t0 = 0;
  uint64_t t1 = 0;
  if (gpu) {
    const uint64_t spare_gpu = minus(minus(m.vram_free_bytes, weights_loaded ? 0 : weight_bytes), gpu_headroom(m));
    b.t0_contexts = 2 * context <= spare_gpu ? 2 : 1;
    t0 = static_cast<uint64_t>(b.t0_contexts) * context;
    t1 = std::clamp(spare / 2, 64 * k_mib, 8 * k_gib);  // T0 is not in RAM
  } else {
    b.t0_contexts = 2 * context <= spare / 2 ? 2 : 1;
    t0 = static_cast<uint64_t>(b.t0_contexts) * context;
    t1 = std::clamp(minus(spare, t0) / 2, 64 * k_mib, 8 * k_gib);
  }
  uint64_t t2 = std::clamp(m.disk_free_bytes / 4, 256 * k_mib, 64 * k_gib);
  t2 = std::max(std::min(t2, minus(m.disk_free_bytes, k_gib)), 64 * k_mib);
  b.budget.t0_bytes = static_cast<int64_t>(t0);
  b.budget.t1_bytes = static_cast<int64_t>(t1);
  b.budget.t2_bytes = static_cast<int64_t>(t2);
  b.warning = fit_warning(m, weights_loaded ? 0 : weight_bytes, context, n_ctx);
  return b;
}

KvBudget with_defaults(const KvBudget& set, const BudgetDefaults& defaults) {
  KvBudget b = set;
  if (b.t1_bytes <= 0) b.t1_bytes = defaults.budget.t1_bytes;
  if (b.t2_bytes <= 0) b.t2_bytes = defaults.budget.t2_bytes;
  return b;
}

std::string fit_warning(const MachineResources& m, uint64_t weight_bytes, uint64_t kv_bytes_for_ctx, int64_t n_ctx) {
  const bool gpu = m.vram_total_bytes > 0;
  const uint64_t available = gpu ? m.vram_free_bytes : m.mem_available_bytes;
  if (available == 0) return {};  // unknown: say nothing
  const uint64_t need = weight_bytes + kv_bytes_for_ctx;
  const uint64_t keep = gpu ? gpu_headroom(m) : headroom(m);
  if (need + keep <= available) return {};
  std::string w = "needs about " + gib(need) + " (weights " + gib(weight_bytes) + " + KV " + gib(kv_bytes_for_ctx) +
                  " at " + std::to_string(n_ctx) + " tokens), " + gib(available) +
                  (gpu ? " of GPU memory is free" : " of RAM is free");
  if (need > available) {
    w += gpu ? ": it would not fit; choose a smaller model, a smaller context, INT8/INT4 KV or --backend cpu"
             : ": it would not fit; choose a smaller model, a smaller context or INT8/INT4 KV";
  } else {
    w += gpu ? ": it leaves less than " + gib(keep) + " of GPU memory for activations and other programs"
             : ": it leaves less than " + gib(keep) + " for the rest of the system";
  }
  return w;
}

}  // namespace kvc

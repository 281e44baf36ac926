// Tier budgets from the machine's free RAM and disk, with injected figures, and the real /proc/meminfo.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/backend/backend.h"
#include "core/util/machine_budget.h"
#include "support/test_support.h"

using kvc::MachineResources;

namespace {
constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;
}  // namespace

TEST_CASE("meminfo: MemTotal and MemAvailable in bytes", "[core]") {
  const auto m = kvc::parse_meminfo(
      "MemTotal:       16303948 kB\nMemFree:          512000 kB\nMemAvailable:    8151974 kB\nBuffers: 1 kB\n");
  CHECK(m.mem_total_bytes == uint64_t{16303948} * 1024);
  CHECK(m.mem_available_bytes == uint64_t{8151974} * 1024);
  CHECK(kvc::parse_meminfo("garbage\n").mem_available_bytes == 0);
  kvc::test::TempDir tmp;
  const auto real = kvc::read_machine_resources(tmp.path() / "not" / "made" / "yet");
  CHECK(real.mem_total_bytes > 0);
  CHECK(real.mem_available_bytes > 0);
  CHECK(real.mem_available_bytes <= real.mem_total_bytes);
  CHECK(real.disk_free_bytes > 0);  // the nearest existing parent's file system
}

TEST_CASE("budgets: a roomy machine gets two contexts in T0, half the spare RAM in T1, a quarter of the disk in T2",
          "[core]") {
  MachineResources m{32 * GiB, 20 * GiB, 400 * GiB};
  // 1 GiB of weights not loaded yet; 128 KiB per token, 4096 tokens: 512 MiB per context.
  const auto b = kvc::default_budgets(m, GiB, false, 128 * 1024, 4096);
  const uint64_t headroom = 32 * GiB / 10;
  const uint64_t spare = 20 * GiB - GiB - headroom;
  CHECK(b.budget.t0_bytes == static_cast<int64_t>(1024 * MiB));
  CHECK(b.budget.t1_bytes == static_cast<int64_t>((spare - 1024 * MiB) / 2));
  CHECK(b.budget.t2_bytes == static_cast<int64_t>(64 * GiB));  // 100 GiB capped
  CHECK(b.warning.empty());
}

TEST_CASE("budgets: a small machine shrinks every tier to its floor and warns before the model would not fit",
          "[core]") {
  MachineResources m{4 * GiB, 1536 * MiB, 2 * GiB};
  const auto b = kvc::default_budgets(m, 1200 * MiB, false, 64 * 1024, 4096);  // 256 MiB per context
  CHECK(b.budget.t0_bytes == static_cast<int64_t>(256 * MiB));                 // one context: nothing is spare
  CHECK(b.budget.t1_bytes == static_cast<int64_t>(64 * MiB));
  CHECK(b.budget.t2_bytes == static_cast<int64_t>(512 * MiB));  // a quarter of 2 GiB, under free - 1 GiB
  CHECK(b.warning.find("needs about 1.4 GiB") != std::string::npos);
  CHECK(b.warning.find("1.5 GiB of RAM is free") != std::string::npos);
  CHECK(b.warning.find("less than 1.0 GiB for the rest") != std::string::npos);

  // Far too big: says it would not fit and what to do.
  const std::string w = kvc::fit_warning(m, 4 * GiB, 512 * MiB, 8192);
  CHECK(w.find("would not fit") != std::string::npos);
  CHECK(w.find("8192 tokens") != std::string::npos);
  CHECK(kvc::fit_warning(MachineResources{64 * GiB, 60 * GiB, 0}, 4 * GiB, 512 * MiB, 8192).empty());
  CHECK(kvc::fit_warning(MachineResources{}, 4 * GiB, 512 * MiB, 8192).empty());  // unknown RAM: no guess

  // A nearly full disk still gets a small T2; T2 never eats the last GiB when there is more.
  CHECK(kvc::default_budgets(MachineResources{4 * GiB, 3 * GiB, 300 * MiB}, 0, true, 1024, 16).budget.t2_bytes ==
        static_cast<int64_t>(64 * MiB));
  CHECK(kvc::default_budgets(MachineResources{4 * GiB, 3 * GiB, 1200 * MiB}, 0, true, 1024, 16).budget.t2_bytes ==
        static_cast<int64_t>(176 * MiB));
}

TEST_CASE("budgets: on a GPU T0 follows free GPU memory, T1 free RAM, and the warning names the GPU", "[core]") {
  // 24 GiB GPU with 20 GiB free after the weights were uploaded; 32 GiB of RAM, 20 GiB available.
  MachineResources m{32 * GiB, 20 * GiB, 400 * GiB, 24 * GiB, 20 * GiB};
  const uint64_t ram_spare = 20 * GiB - 32 * GiB / 10;  // the weights are on the GPU, not in RAM
  SECTION("two contexts fit beside the weights") {
    const auto b = kvc::default_budgets(m, 4 * GiB, true, 128 * 1024, 32768);  // 4 GiB per context
    CHECK(b.t0_contexts == 2);
    CHECK(b.budget.t0_bytes == static_cast<int64_t>(8 * GiB));
    CHECK(b.budget.t1_bytes == static_cast<int64_t>(std::min(ram_spare / 2, 8 * GiB)));  // T0 not taken from RAM
    CHECK(b.warning.empty());
  }
  SECTION("only one context fits in what the GPU has spare") {
    const auto b = kvc::default_budgets(m, 4 * GiB, true, 128 * 1024, 131072);  // 16 GiB per context
    // spare = 20 GiB - max(512 MiB, 24 GiB / 20) = 18.8 GiB: one 16 GiB context, not two.
    CHECK(b.t0_contexts == 1);
    CHECK(b.budget.t0_bytes == static_cast<int64_t>(16 * GiB));
    CHECK(b.warning.empty());
  }
  SECTION("weights not uploaded yet count against free GPU memory, not RAM") {
    const auto b = kvc::default_budgets(m, 14 * GiB, false, 128 * 1024, 32768);  // 14 + 2 x 4 GiB > 18.8
    CHECK(b.t0_contexts == 1);
    CHECK(b.budget.t1_bytes == static_cast<int64_t>(std::min(ram_spare / 2, 8 * GiB)));
  }
  SECTION("a model and one context that do not fit: the warning says GPU memory and what to do") {
    const auto b = kvc::default_budgets(m, 18 * GiB, false, 128 * 1024, 32768);
    CHECK(b.t0_contexts == 1);  // never below one context: the warning tells the user
    CHECK(b.warning.find("needs about 22.0 GiB") != std::string::npos);
    CHECK(b.warning.find("20.0 GiB of GPU memory is free") != std::string::npos);
    CHECK(b.warning.find("--backend cpu") != std::string::npos);
    // Tight but fitting: less than the GPU headroom left.
    const auto t = kvc::default_budgets(m, 15 * GiB, false, 128 * 1024, 32768);
    CHECK(t.warning.find("of GPU memory for activations") != std::string::npos);
  }
  SECTION("the same figures without a GPU are judged against RAM") {
    MachineResources cpu{32 * GiB, 20 * GiB, 400 * GiB};
    const auto b = kvc::default_budgets(cpu, 18 * GiB, false, 128 * 1024, 32768);
    CHECK(b.warning.find("of RAM is free") != std::string::npos);
    CHECK(b.budget.t1_bytes == static_cast<int64_t>(64 * MiB));  // the weights take the RAM
  }
}

TEST_CASE("budgets: the CPU backend adds no GPU memory to the machine's figures", "[core]") {
  auto cpu = kvc::backend::make_cpu_backend(1);
  const MachineResources m = kvc::backend::with_device_memory(MachineResources{8 * GiB, 4 * GiB, 10 * GiB}, *cpu);
  CHECK(m.vram_total_bytes == 0);
  CHECK(m.vram_free_bytes == 0);
  CHECK(m.mem_available_bytes == 4 * GiB);
}

TEST_CASE("machine budget: a set budget keeps what is set, its zeros take the defaults", "[core]") {
  const auto d = kvc::default_budgets(MachineResources{16 * GiB, 8 * GiB, 100 * GiB}, GiB, false, 64 * 1024, 4096);
  const kvc::KvBudget none = kvc::with_defaults({}, d);
  CHECK(none.t0_bytes == 0);  // the cache sizes T0 from the layout: t0_contexts contexts
  CHECK(none.t1_bytes == d.budget.t1_bytes);
  CHECK(none.t2_bytes == d.budget.t2_bytes);
  CHECK(none.ctx_kv_bytes == 0);
  const kvc::KvBudget set{int64_t{64} << 20, int64_t{32} << 20, int64_t{128} << 20, int64_t{256} << 20};
  CHECK(kvc::with_defaults(set, d) == set);
}

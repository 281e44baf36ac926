// kvchat-cli bench: prefill and decode throughput of a model, median of repeats.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "app/cli/cli_common.h"
#include "core/model/session.h"
#include "kernels/cpu/mem_bandwidth.h"

namespace kvc::cli {

namespace {

struct BenchArgs {
  ModelOptions model;
  int64_t n_prompt = 128;
  int64_t n_gen = 32;
  int repetitions = 3;
  bool json = false;
  bool bandwidth = false;
};

int run_bench(BenchArgs a) {
  a.model.quiet = a.model.quiet || a.json;
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  const int64_t n_ctx = a.n_prompt + a.n_gen + 1;
  a.model.n_batch = std::max(a.model.n_batch, a.n_prompt);
  auto session = model::Session::create(m, n_ctx, a.model.n_batch);
  if (!session.ok()) return report(session.error());

  // Random tokens: throughput does not depend on which tokens are evaluated.
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(m.config().n_vocab - 1));
  std::vector<int32_t> prompt(static_cast<size_t>(a.n_prompt));
  for (auto& t : prompt) t = dist(rng);

  std::vector<double> pp, tg;
  for (int rep = 0; rep <= a.repetitions; ++rep) {  // rep 0 warms up caches and pages
    auto t0 = std::chrono::steady_clock::now();
    session->clear();
    auto r = session->append(prompt);
    if (!r.ok()) return report(r.error());
    const double pp_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < a.n_gen; ++i) {
      const int32_t one[1] = {dist(rng)};
      auto d = session->append(one);
      if (!d.ok()) return report(d.error());
    }
    const double tg_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) {
      pp.push_back(static_cast<double>(a.n_prompt) / pp_s);
      tg.push_back(static_cast<double>(a.n_gen) / tg_s);
    }
    if (!a.json && !a.model.quiet) {
      std::fprintf(stderr, "%s pp%lld %.1f tok/s, tg%lld %.1f tok/s\n", rep == 0 ? "warm-up" : "run",
                   static_cast<long long>(a.n_prompt), static_cast<double>(a.n_prompt) / pp_s,
                   static_cast<long long>(a.n_gen), static_cast<double>(a.n_gen) / tg_s);
    }
  }
  const double pp_med = median(pp), tg_med = median(tg);
  const double gb_s = static_cast<double>(m.weight_bytes()) * tg_med / 1e9;
  // The physical ceiling, measured in the same run on the same threads.
  double mem_gb_s = 0;
  if (a.bandwidth) {
    kernels::ThreadPool pool(a.model.threads > 0 ? a.model.threads : kernels::default_thread_count());
    mem_gb_s = kernels::measure_read_bandwidth(pool, size_t{1} << 30, 5) / 1e9;
  }
  if (a.json) {
    nlohmann::json j;
    j["model"] = m.path();
    j["weights"] = m.weight_type_summary();
    j["weight_bytes"] = m.weight_bytes();
    j["backend"] = std::string(m.backend().name());
    j["n_prompt"] = a.n_prompt;
    j["n_gen"] = a.n_gen;
    j["repetitions"] = a.repetitions;
    j["prefill_tok_s"] = pp_med;
    j["decode_tok_s"] = tg_med;
    j["prefill_runs_tok_s"] = pp;
    j["decode_runs_tok_s"] = tg;
    j["decode_weight_read_gb_s"] = gb_s;
    if (a.bandwidth) {
      j["memory_read_gb_s"] = mem_gb_s;
      j["decode_ceiling_tok_s"] = mem_gb_s * 1e9 / static_cast<double>(m.weight_bytes());
      j["decode_fraction_of_ceiling"] = gb_s / mem_gb_s;
    }
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("model     %s (%s, %s)\nbackend   %s\n", m.path().c_str(), m.weight_type_summary().c_str(),
                human_bytes(static_cast<double>(m.weight_bytes())).c_str(), std::string(m.backend().name()).c_str());
    std::printf("prefill   %8.1f tok/s  (pp%lld, median of %d)\n", pp_med, static_cast<long long>(a.n_prompt),
                a.repetitions);
    std::printf("decode    %8.1f tok/s  (tg%lld, median of %d; weights read at %.1f GB/s)\n", tg_med,
                static_cast<long long>(a.n_gen), a.repetitions, gb_s);
    if (a.bandwidth) {
      std::printf("ceiling   %8.1f tok/s  (memory read %.1f GB/s streaming sum; decode at %.0f %% of it)\n",
                  mem_gb_s * 1e9 / static_cast<double>(m.weight_bytes()), mem_gb_s, 100.0 * gb_s / mem_gb_s);
    }
  }
  return 0;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "measure prefill and decode tokens/s (median of repeats)");
  add_model_options(*cmd, a->model);
  cmd->add_option("--pp", a->n_prompt, "prompt tokens for the prefill measurement")
      ->capture_default_str()
      ->check(CLI::Range(1, 8192));
  cmd->add_option("--tg", a->n_gen, "tokens for the decode measurement")
      ->capture_default_str()
      ->check(CLI::Range(1, 8192));
  cmd->add_option("-r,--repetitions", a->repetitions, "measured repetitions (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--json", a->json, "print a JSON object (prefill_tok_s, decode_tok_s, ...)");
  cmd->add_flag("--bandwidth", a->bandwidth, "also measure the memory read bandwidth: the decode ceiling");
  cmd->callback([a] {
    if (int rc = run_bench(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

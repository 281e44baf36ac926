// kvchat-cli bench: prefill and decode throughput of a model (median of repeats), at a
// context depth and KV format of choice, and aggregate throughput of many conversations on
// the engine.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "app/cli/cli_common.h"
#include "core/engine/engine.h"
#include "core/kv/kv_format.h"
#include "core/model/kv_setup.h"
#include "core/model/session.h"
#include "core/util/clock.h"
#include "kernels/cpu/mem_bandwidth.h"

namespace kvc::cli {

namespace {

struct BenchArgs {
  ModelOptions model;
  int64_t n_prompt = 128;
  int64_t n_gen = 32;
  int64_t depth = 0;  // tokens already in the context when prefill and decode are measured
  std::string kv_type = "f16";
  std::vector<int64_t> parallel;  // conversations at once, one measurement each (empty: single-sequence bench)
  int repetitions = 3;
  bool json = false;
  bool bandwidth = false;
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return ms_since(t0) / 1000.0; }

// Random tokens: throughput does not depend on which tokens are evaluated. Ids 0-2 are
// special in most vocabularies and are avoided.
class TokenSource {
 public:
  explicit TokenSource(int64_t n_vocab) : dist_(3, static_cast<int32_t>(n_vocab - 1)) {}
  int32_t next() { return dist_(rng_); }
  std::vector<int32_t> take(int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = next();
    return v;
  }

 private:
  std::mt19937 rng_{1234};
  std::uniform_int_distribution<int32_t> dist_;
};

// Prefill of n_prompt and decode of n_gen tokens after `depth` tokens of context, one
// sequence, repeated; the context is filled once and its blocks are reused by every repeat.
int run_single(const BenchArgs& a, const model::Model& m, kv::KvFormat fmt) {
  model::SessionOptions so;
  so.n_ctx = a.depth + a.n_prompt + a.n_gen + 1;
  so.n_batch = std::max(a.model.n_batch, a.n_prompt);
  so.k_format = fmt;
  so.v_format = fmt;
  auto session = model::Session::create(m, so);
  if (!session.ok()) return report(session.error());

  TokenSource src(m.config().n_vocab);
  const std::vector<int32_t> context = src.take(a.depth);
  const std::vector<int32_t> prompt = src.take(a.n_prompt);
  double fill_s = 0;
  std::vector<double> pp, tg;
  for (int rep = 0; rep <= a.repetitions; ++rep) {  // rep 0 warms up caches and pages
    session->clear();
    if (a.depth > 0) {
      const auto t0 = Clock::now();
      auto r = session->evaluate(context);  // the first time in full, then from the cache
      if (!r.ok()) return report(r.error());
      if (rep == 0) fill_s = seconds_since(t0);
    }
    auto t0 = Clock::now();
    auto r = session->append(prompt);
    if (!r.ok()) return report(r.error());
    const double pp_s = seconds_since(t0);
    // Decode continues from the context alone (as llama-bench's tg after -d does).
    session->clear();
    if (a.depth > 0) {
      auto c = session->evaluate(context);
      if (!c.ok()) return report(c.error());
    }
    t0 = Clock::now();
    for (int64_t i = 0; i < a.n_gen; ++i) {
      const int32_t one[1] = {src.next()};
      auto d = session->append(one);
      if (!d.ok()) return report(d.error());
    }
    const double tg_s = seconds_since(t0);
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
  const auto read_bytes = static_cast<double>(m.decode_read_bytes());
  const double gb_s = read_bytes * tg_med / 1e9;
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
    j["decode_read_bytes"] = m.decode_read_bytes();
    j["expert_bytes"] = m.expert_bytes();  // a mixture of experts': all in memory, decode reads its share
    j["backend"] = std::string(m.backend().name());
    j["kv_type"] = std::string(kv::kv_format_name(fmt));
    j["depth"] = a.depth;
    j["n_prompt"] = a.n_prompt;
    j["n_gen"] = a.n_gen;
    j["repetitions"] = a.repetitions;
    j["prefill_tok_s"] = pp_med;
    j["decode_tok_s"] = tg_med;
    j["prefill_runs_tok_s"] = pp;
    j["decode_runs_tok_s"] = tg;
    j["decode_weight_read_gb_s"] = gb_s;
    if (a.depth > 0) j["context_fill_s"] = fill_s;
    if (a.bandwidth) {
      j["memory_read_gb_s"] = mem_gb_s;
      j["decode_ceiling_tok_s"] = mem_gb_s * 1e9 / read_bytes;
      j["decode_fraction_of_ceiling"] = gb_s / mem_gb_s;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model     %s (%s, %s; decode reads %s a token)\nbackend   %s\n", m.path().c_str(),
              m.weight_type_summary().c_str(), human_bytes(static_cast<double>(m.weight_bytes())).c_str(),
              human_bytes(read_bytes).c_str(), std::string(m.backend().name()).c_str());
  if (a.depth > 0) {
    std::printf("context   %lld tokens of %s KV before each measurement (filled in %.1f s)\n",
                static_cast<long long>(a.depth), std::string(kv::kv_format_name(fmt)).c_str(), fill_s);
  }
  std::printf("prefill   %8.1f tok/s  (pp%lld, median of %d)\n", pp_med, static_cast<long long>(a.n_prompt),
              a.repetitions);
  std::printf("decode    %8.1f tok/s  (tg%lld, median of %d; weights read at %.1f GB/s)\n", tg_med,
              static_cast<long long>(a.n_gen), a.repetitions, gb_s);
  if (a.bandwidth) {
    std::printf("ceiling   %8.1f tok/s  (memory read %.1f GB/s streaming sum; decode at %.0f %% of it)\n",
                mem_gb_s * 1e9 / read_bytes, mem_gb_s, 100.0 * gb_s / mem_gb_s);
  }
  return 0;
}

// What one measurement of n conversations at once gave.
struct ParallelRun {
  double ttft_p50_ms = 0, ttft_max_ms = 0;
  double decode_tok_s = 0;  // every conversation's tokens after the last first token, over that time
  double total_tok_s = 0;   // prompt and generated tokens of all, over the wall time
  double wall_s = 0;
};

// n conversations, each with its own random prompt, submitted at once to one engine; every
// request generates exactly n_gen tokens (greedy, end-of-generation ignored).
Result<ParallelRun> run_parallel_once(const BenchArgs& a, const model::Model& m, kv::KvCache& cache, int64_t n,
                                      TokenSource& src) {
  engine::EngineOptions eo;
  eo.token_budget = std::max<int64_t>(a.model.n_batch, n);
  eo.max_running = n;
  engine::Engine eng(m, cache, eo);
  std::vector<engine::RequestId> ids;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    engine::Request r;
    r.prompt = src.take(a.n_prompt);
    r.options.max_tokens = a.n_gen;
    r.options.stop_at_eog = false;
    r.options.sampling.temperature = 0;
    r.options.sampling.repeat_penalty = 1;
    ids.push_back(eng.submit(std::move(r)));
  }
  KVC_TRY(eng.run_until_idle());
  ParallelRun out;
  out.wall_s = seconds_since(t0);
  std::vector<double> ttft;
  std::vector<engine::RequestResult> results;
  for (auto id : ids) {
    auto r = eng.result(id);
    if (!r) return make_error(ErrorCode::internal, "a benchmark request has no result");
    if (r->state != engine::RequestState::finished)
      return r->state == engine::RequestState::failed
                 ? r->error
                 : make_error(ErrorCode::internal, "a benchmark request did not finish");
    ttft.push_back(r->ttft_ms);
    results.push_back(std::move(*r));
  }
  // The decode window opens when the last conversation has its first token.
  const double open_ms = *std::max_element(ttft.begin(), ttft.end());
  double close_ms = 0;
  int64_t decoded = 0;
  for (const auto& r : results) {
    for (double t : r.token_ms) {
      if (t > open_ms) ++decoded;
      close_ms = std::max(close_ms, t);
    }
  }
  out.ttft_p50_ms = median(ttft);
  out.ttft_max_ms = open_ms;
  out.decode_tok_s = close_ms > open_ms ? 1000.0 * static_cast<double>(decoded) / (close_ms - open_ms) : 0;
  out.total_tok_s = static_cast<double>(n * (a.n_prompt + a.n_gen)) / out.wall_s;
  return out;
}

int run_parallel(const BenchArgs& a, const model::Model& m, kv::KvFormat fmt) {
  const int64_t widest = *std::max_element(a.parallel.begin(), a.parallel.end());
  model::KvSetup ks;
  ks.k_format = fmt;
  ks.v_format = fmt;
  ks.t0_tokens = widest * (a.n_prompt + a.n_gen + 2 * 16);
  auto cache = model::create_kv_cache(m, ks);
  if (!cache.ok()) return report(cache.error());
  TokenSource src(m.config().n_vocab);
  nlohmann::json rows = nlohmann::json::array();
  if (!a.json) {
    std::printf("model     %s (%s), %s KV\nbackend   %s\n", m.path().c_str(), m.weight_type_summary().c_str(),
                std::string(kv::kv_format_name(fmt)).c_str(), std::string(m.backend().name()).c_str());
    std::printf("%-6s %12s %12s %14s %14s   (pp%lld + tg%lld each, median of %d)\n", "convs", "ttft p50 ms",
                "ttft max ms", "decode tok/s", "total tok/s", static_cast<long long>(a.n_prompt),
                static_cast<long long>(a.n_gen), a.repetitions);
  }
  for (int64_t n : a.parallel) {
    std::vector<double> p50, tmax, dec, tot;
    for (int rep = 0; rep <= a.repetitions; ++rep) {
      auto r = run_parallel_once(a, m, **cache, n, src);
      if (!r.ok()) return report(r.error());
      if (rep == 0) continue;  // warm-up
      p50.push_back(r->ttft_p50_ms);
      tmax.push_back(r->ttft_max_ms);
      dec.push_back(r->decode_tok_s);
      tot.push_back(r->total_tok_s);
    }
    nlohmann::json row;
    row["conversations"] = n;
    row["ttft_p50_ms"] = median(p50);
    row["ttft_max_ms"] = median(tmax);
    row["decode_tok_s"] = median(dec);
    row["total_tok_s"] = median(tot);
    row["decode_runs_tok_s"] = dec;
    rows.push_back(row);
    if (!a.json) {
      std::printf("%-6lld %12.1f %12.1f %14.1f %14.1f\n", static_cast<long long>(n), median(p50), median(tmax),
                  median(dec), median(tot));
      std::fflush(stdout);
    }
  }
  if (a.json) {
    nlohmann::json j;
    j["model"] = m.path();
    j["weights"] = m.weight_type_summary();
    j["backend"] = std::string(m.backend().name());
    j["kv_type"] = std::string(kv::kv_format_name(fmt));
    j["n_prompt"] = a.n_prompt;
    j["n_gen"] = a.n_gen;
    j["repetitions"] = a.repetitions;
    j["parallel"] = rows;
    std::printf("%s\n", j.dump(2).c_str());
  }
  return 0;
}

int run_bench(BenchArgs a) {
  a.model.quiet = a.model.quiet || a.json;
  auto fmt = parse_kv_type("--kv-type", a.kv_type);
  if (!fmt.ok()) return report(fmt.error());
  if (!a.parallel.empty() && a.depth > 0) {
    return report(make_error(ErrorCode::invalid_argument, "--parallel and --depth cannot be combined yet"));
  }
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  return a.parallel.empty() ? run_single(a, *loaded->model, *fmt) : run_parallel(a, *loaded->model, *fmt);
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
  cmd->add_option("-d,--depth", a->depth, "tokens already in the context when prefill and decode are measured")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--kv-type", a->kv_type, "KV cache format: f16, int8, int4, int8h, int4h, int4c")
      ->capture_default_str();
  cmd->add_option("--parallel", a->parallel,
                  "conversations at once on the engine (e.g. 1,2,4,8): time to first token and aggregate decode "
                  "tokens/s of each width, each conversation with its own --pp prompt and --tg tokens")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
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

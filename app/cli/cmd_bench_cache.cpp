// kvchat-cli bench-cache: time to first token of a long conversation, cold and from each tier.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "app/cli/cli_common.h"
#include "core/kv/kv_format.h"
#include "core/kv/trace_export.h"
#include "core/model/session.h"
#include "storage/data_dir.h"
#include "storage/sqlite_cold_store.h"

namespace kvc::cli {

namespace {

struct BenchCacheArgs {
  ModelOptions model;
  int64_t n_history = 1200;
  int64_t n_new = 20;
  int32_t block_tokens = 16;
  std::string kv_type = "f16";
  int conversations = 2;
  int turns = 3;
  int repetitions = 3;
  bool json = false;
  std::string trace_file;
  std::string csv_file;
};


using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Time to first token: evaluate the prompt (reusing what the session's cache has) and
// pick the first token greedily.
Result<double> ttft(model::Session& s, std::span<const int32_t> prompt) {
  const auto t0 = Clock::now();
  auto logits = s.evaluate(prompt);
  if (!logits.ok()) return logits.error();
  volatile auto best = std::max_element(logits->begin(), logits->end()) - logits->begin();
  (void)best;
  return ms_since(t0);
}

int run_bench_cache(BenchCacheArgs a) {
  a.model.quiet = a.model.quiet || a.json;
  auto fmt = kv::parse_kv_format(a.kv_type);
  if (!fmt) return report(make_error(ErrorCode::invalid_argument, "--kv-type must be f16, int8 or int4"));
  auto loaded = load_model(a.model);
  if (!loaded.ok()) return report(loaded.error());
  const model::Model& m = *loaded->model;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> dist(3, static_cast<int32_t>(m.config().n_vocab - 1));
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& t : v) t = dist(rng);
    return v;
  };
  std::vector<int32_t> history = random_tokens(a.n_history);
  if (m.tokenizer().bos() >= 0) history.front() = m.tokenizer().bos();
  // Each case sends a message of its own, so only the history can come from the cache.
  auto with_new_message = [&](const std::vector<int32_t>& h) {
    std::vector<int32_t> p = h;
    const auto msg = random_tokens(a.n_new);
    p.insert(p.end(), msg.begin(), msg.end());
    return p;
  };
  std::vector<int32_t> other_history = random_tokens(a.n_history);
  other_history.front() = history.front();
  const std::vector<int32_t> prompt = with_new_message(history);

  // The cold tier: a real SQLite store in a scratch folder under the data dir.
  const auto cold_dir = storage::resolve_data_dir(a.model.data_dir) / "bench-cache";
  std::error_code ec;
  std::filesystem::remove_all(cold_dir, ec);
  auto cold = storage::SqliteColdStore::open(cold_dir);
  if (!cold.ok()) return report(cold.error());

  model::SessionOptions o;
  o.n_ctx = static_cast<int64_t>(prompt.size()) + 64;
  o.n_batch = a.model.n_batch;
  o.k_format = o.v_format = *fmt;
  o.block_tokens = a.block_tokens;
  o.t1_bytes = int64_t{4} << 30;
  o.cold = cold->get();
  auto fresh = [&]() { return model::Session::create(m, o); };

  auto s_new = fresh();
  if (!s_new.ok()) return report(s_new.error());
  (void)ttft(*s_new, random_tokens(a.n_new));  // warm-up: page in weights and buffers
  auto new_only = ttft(*s_new, random_tokens(a.n_new));
  if (!new_only.ok()) return report(new_only.error());

  Progress bar("cold prefill of " + std::to_string(prompt.size()) + " tokens", a.model.quiet);
  auto s = fresh();
  if (!s.ok()) return report(s.error());
  (void)ttft(*s, random_tokens(a.n_new));  // warm-up, as above
  auto cold_ms = ttft(*s, with_new_message(other_history));
  if (!cold_ms.ok()) return report(cold_ms.error());
  bar.done();

  // Each case, repeated; every repetition sends a new message after the same history.
  std::vector<double> t0v, t1v, t2v, rsv, rsame, mbv;
  kv::PrefixInfo p0, p1, p2, pr, prs;
  auto s0 = fresh();
  if (!s0.ok()) return report(s0.error());
  kv::KvEventLog events(size_t{1} << 18);
  s0->cache().set_event_log(&events);
  auto timed = [&](model::Session& sess, const std::vector<int32_t>& p, std::vector<double>& out,
                   kv::PrefixInfo& info) -> Status {
    auto ms = ttft(sess, p);
    if (!ms.ok()) return ms.error();
    out.push_back(*ms);
    info = sess.last_prefix();
    return {};
  };
  for (int rep = 0; rep < a.repetitions; ++rep) {
    // T0: the history is still in the compute pool (the previous turn just ended).
    if (auto r = s0->evaluate(history); !r.ok()) return report(r.error());
    if (auto st = timed(*s0, with_new_message(history), t0v, p0); !st.ok()) return report(st.error());
    // T1: the conversation was closed and its blocks demoted to host RAM.
    s0->clear();
    s0->cache().demote_all_unpinned(kv::Tier::t1);
    if (auto st = timed(*s0, with_new_message(history), t1v, p1); !st.ok()) return report(st.error());
    // T2: demoted to disk.
    s0->clear();
    s0->cache().demote_all_unpinned(kv::Tier::t2);
    (*cold)->flush();
    const int64_t read_before = (*cold)->stats().bytes_read;
    if (auto st = timed(*s0, with_new_message(history), t2v, p2); !st.ok()) return report(st.error());
    mbv.push_back(static_cast<double>((*cold)->stats().bytes_read - read_before) / 1e6 / (p2.promote_ms / 1e3));
    // A restart: a new cache with an empty index over the store opened anew from disk (as a
    // new process opens it), first with a new message, then with the same prompt again (a
    // regenerate: the case llama.cpp's manual slot restore covers).
    (*cold)->flush();
    auto reopened = storage::SqliteColdStore::open(cold_dir);
    if (!reopened.ok()) return report(reopened.error());
    model::SessionOptions ro = o;
    ro.cold = reopened->get();
    auto sr = model::Session::create(m, ro);
    if (!sr.ok()) return report(sr.error());
    sr->cache().set_event_log(&events);
    if (auto st = timed(*sr, with_new_message(history), rsv, pr); !st.ok()) return report(st.error());
    auto sr2 = model::Session::create(m, ro);
    if (!sr2.ok()) return report(sr2.error());
    if (auto st = timed(*sr2, history, rsame, prs); !st.ok()) return report(st.error());
  }
  s0->cache().emit_tier_usage();
  if (!a.trace_file.empty() || !a.csv_file.empty()) {
    std::vector<kv::KvEvent> all;
    const auto got = events.read_since(0, all);
    if (got.n_lost > 0) std::fprintf(stderr, "kvchat-cli: %llu early events were overwritten\n", static_cast<unsigned long long>(got.n_lost));
    if (!a.trace_file.empty()) {
      if (Status st = kv::write_chrome_trace(a.trace_file, all); !st.ok()) return report(st.error());
    }
    if (!a.csv_file.empty()) {
      if (Status st = kv::write_csv(a.csv_file, all); !st.ok()) return report(st.error());
    }
  }
  const double t0_ms = median(t0v), t1_ms = median(t1v), t2_ms = median(t2v), restart_ms = median(rsv);
  const double restart_same_ms = median(rsame), t2_mb_s = median(mbv);
  const double kv_per_token = static_cast<double>(s0->cache().layout().block_bytes) / a.block_tokens;

  // A multi-conversation scenario: conversations sharing a system prompt, several turns each;
  // every turn's TTFT through the shared cache next to a cold evaluation of the same prompt.
  struct Turn {
    int conversation, turn;
    int64_t n_prompt, n_cached;
    int64_t from_tier[3];
    double cached_ms, cold_ms;
  };
  std::vector<Turn> table;
  const std::vector<int32_t> system = random_tokens(64);
  std::vector<std::vector<int32_t>> convs(static_cast<size_t>(a.conversations), system);
  o.cold = nullptr;
  auto shared = fresh();
  if (!shared.ok()) return report(shared.error());
  for (int t = 0; t < a.turns; ++t) {
    for (int c = 0; c < a.conversations; ++c) {
      auto& conv = convs[static_cast<size_t>(c)];
      const auto msg = random_tokens(a.n_new);
      conv.insert(conv.end(), msg.begin(), msg.end());
      auto cached = ttft(*shared, conv);
      if (!cached.ok()) return report(cached.error());
      const kv::PrefixInfo pi = shared->last_prefix();
      auto scratch = fresh();
      if (!scratch.ok()) return report(scratch.error());
      auto cold_turn = ttft(*scratch, conv);
      if (!cold_turn.ok()) return report(cold_turn.error());
      table.push_back({c, t, pi.n_prompt, pi.n_cached, {pi.n_from_tier[0], pi.n_from_tier[1], pi.n_from_tier[2]},
                       *cached, *cold_turn});
      const auto reply = random_tokens(8);  // the reply's tokens join the stream
      conv.insert(conv.end(), reply.begin(), reply.end());
      if (auto r = shared->append(reply); !r.ok()) return report(r.error());
    }
  }

  if (a.json) {
    nlohmann::json j;
    j["model"] = m.path();
    j["backend"] = std::string(m.backend().name());
    j["kv_type"] = a.kv_type;
    j["block_tokens"] = a.block_tokens;
    j["history_tokens"] = a.n_history;
    j["new_tokens"] = a.n_new;
    j["ttft_cold_ms"] = *cold_ms;
    j["ttft_t0_ms"] = t0_ms;
    j["ttft_t1_ms"] = t1_ms;
    j["ttft_t2_ms"] = t2_ms;
    j["ttft_restart_ms"] = restart_ms;
    j["ttft_restart_same_prompt_ms"] = restart_same_ms;
    j["repetitions"] = a.repetitions;
    j["prefill_new_only_ms"] = *new_only;
    j["t2_restore_mb_s"] = t2_mb_s;
    j["kv_bytes_per_token"] = kv_per_token;
    j["cached_tokens"] = {{"t0", p0.n_cached}, {"t1", p1.n_from_tier[1]}, {"t2", p2.n_from_tier[2]}, {"restart_t2", pr.n_from_tier[2]}};
    for (const Turn& t : table) {
      j["turns"].push_back({{"conversation", t.conversation}, {"turn", t.turn}, {"prompt_tokens", t.n_prompt},
                            {"cached_tokens", t.n_cached}, {"cached_t0", t.from_tier[0]}, {"cached_t1", t.from_tier[1]},
                            {"cached_t2", t.from_tier[2]}, {"ttft_cached_ms", t.cached_ms}, {"ttft_cold_ms", t.cold_ms}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model   %s (%s)\nbackend %s, KV %s, blocks of %d tokens, %.0f KV bytes/token\n\n", m.path().c_str(),
              m.weight_type_summary().c_str(), std::string(m.backend().name()).c_str(), a.kv_type.c_str(), a.block_tokens,
              kv_per_token);
  std::printf("history %lld tokens + new message %lld tokens: time to first token\n", static_cast<long long>(a.n_history),
              static_cast<long long>(a.n_new));
  auto row = [&](const char* what, double ms, const kv::PrefixInfo* p) {
    std::printf("  %-28s %9.1f ms", what, ms);
    if (p || ms < *cold_ms) std::printf("  %7.1fx faster than cold", *cold_ms / ms);
    if (p) std::printf("   (%lld cached: T0 %lld, T1 %lld, T2 %lld)", static_cast<long long>(p->n_cached),
                       static_cast<long long>(p->n_from_tier[0]), static_cast<long long>(p->n_from_tier[1]),
                       static_cast<long long>(p->n_from_tier[2]));
    std::printf("\n");
  };
  row("cold (recompute everything)", *cold_ms, nullptr);
  row("history on T0", t0_ms, &p0);
  row("history on T1 (host RAM)", t1_ms, &p1);
  row("history on T2 (disk)", t2_ms, &p2);
  row("after a restart (T2)", restart_ms, &pr);
  row("restart, same prompt again", restart_same_ms, &prs);
  row("prefill of the message alone", *new_only, nullptr);
  std::printf("  T2 restore: %.0f MB/s   (medians of %d repetitions)\n\n", t2_mb_s, a.repetitions);
  std::printf("%d conversations sharing a 64-token system prompt, %d turns each:\n", a.conversations, a.turns);
  std::printf("  conv turn  prompt  cached (T0/T1/T2)    TTFT cached   TTFT cold\n");
  for (const Turn& t : table) {
    std::printf("  %4d %4d  %6lld  %6lld (%lld/%lld/%lld)  %9.1f ms  %8.1f ms\n", t.conversation, t.turn,
                static_cast<long long>(t.n_prompt), static_cast<long long>(t.n_cached),
                static_cast<long long>(t.from_tier[0]), static_cast<long long>(t.from_tier[1]),
                static_cast<long long>(t.from_tier[2]), t.cached_ms, t.cold_ms);
  }
  return 0;
}

}  // namespace

void register_bench_cache(CLI::App& app) {
  auto a = std::make_shared<BenchCacheArgs>();
  auto* cmd = app.add_subcommand("bench-cache", "time to first token of a long conversation: cold vs served from T0/T1/T2");
  add_model_options(*cmd, a->model);
  cmd->add_option("--history", a->n_history, "tokens of conversation history")->capture_default_str();
  cmd->add_option("--new", a->n_new, "tokens of the new message")->capture_default_str();
  cmd->add_option("--block", a->block_tokens, "tokens per KV block")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--kv-type", a->kv_type, "KV format: f16, int8, int4")->capture_default_str();
  cmd->add_option("--conversations", a->conversations, "conversations in the multi-turn scenario")->capture_default_str();
  cmd->add_option("--turns", a->turns, "turns per conversation in the scenario")->capture_default_str();
  cmd->add_option("-r,--repetitions", a->repetitions, "repetitions of each cached case (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  cmd->add_option("--trace", a->trace_file, "write the cache's events as Chrome trace JSON (opens in Perfetto)");
  cmd->add_option("--csv", a->csv_file, "write the cache's events as CSV");
  cmd->add_flag("--json", a->json, "print a JSON object (ttft_cold_ms, ttft_t0_ms, ttft_t1_ms, ttft_t2_ms, ...)");
  cmd->callback([a] {
    if (int rc = run_bench_cache(*a); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace kvc::cli

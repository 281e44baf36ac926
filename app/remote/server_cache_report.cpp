// Reading the KV cache metrics of kvchat, vLLM, SGLang and llama-server pages.
#include "app/remote/server_cache_report.h"

#include <algorithm>

namespace kvc::remote {

namespace {

bool has_prefix(const PromPage& page, std::string_view prefix) {
  return std::any_of(page.samples.begin(), page.samples.end(),
                     [&](const PromSample& s) { return s.name.compare(0, prefix.size(), prefix) == 0; });
}

// A counter as prometheus_client exposes it ("NAME_total"), or as some exporters do (bare).
std::optional<double> counter(const PromPage& page, const std::string& name) {
  if (auto v = sum_of(page, name + "_total")) return v;
  return sum_of(page, name);
}

double or_unknown(std::optional<double> v) { return v ? *v : -1.0; }

void read_kvchat(const PromPage& page, ui::RemoteCacheView& out) {
  static const char* const tiers[] = {"t0", "t1", "t2"};
  for (int t = 0; t < ui::k_n_kv_tiers; ++t) {
    out.tier_used_bytes[static_cast<size_t>(t)] = or_unknown(sum_where(page, "kvchat_kv_used_bytes", "tier", tiers[t]));
    out.tier_capacity_bytes[static_cast<size_t>(t)] =
        or_unknown(sum_where(page, "kvchat_kv_capacity_bytes", "tier", tiers[t]));
  }
  if (out.tier_used_bytes[0] >= 0 && out.tier_capacity_bytes[0] > 0) {
    out.kv_usage = out.tier_used_bytes[0] / out.tier_capacity_bytes[0];
  }
  const auto hits = sum_of(page, "kvchat_kv_hit_tokens_total");
  const auto missed = sum_of(page, "kvchat_kv_missed_tokens_total");
  if (hits && missed) {
    out.prefix_hits = *hits;
    out.prefix_queries = *hits + *missed;
  }
  out.prompt_tokens_total = or_unknown(sum_of(page, "kvchat_prompt_tokens_total"));
  out.cached_tokens_total = or_unknown(sum_of(page, "kvchat_prompt_cached_tokens_total"));
  out.n_running = or_unknown(sum_of(page, "kvchat_requests_in_flight"));
}

void read_vllm(const PromPage& page, ui::RemoteCacheView& out) {
  // v1 names first; v0 (and early v1) spelled them with gpu_.
  auto usage = mean_of(page, "vllm:kv_cache_usage_perc");
  if (!usage) usage = mean_of(page, "vllm:gpu_cache_usage_perc");
  out.kv_usage = or_unknown(usage);
  auto queries = counter(page, "vllm:prefix_cache_queries");
  auto hits = counter(page, "vllm:prefix_cache_hits");
  if (!queries || !hits) {
    queries = counter(page, "vllm:gpu_prefix_cache_queries");
    hits = counter(page, "vllm:gpu_prefix_cache_hits");
  }
  if (queries && hits) {
    out.prefix_queries = *queries;
    out.prefix_hits = *hits;
  } else if (auto rate = mean_of(page, "vllm:gpu_prefix_cache_hit_rate")) {
    out.prefix_hit_rate = *rate;
  }
  out.n_running = or_unknown(sum_of(page, "vllm:num_requests_running"));
  out.n_waiting = or_unknown(sum_of(page, "vllm:num_requests_waiting"));
}

void read_sglang(const PromPage& page, ui::RemoteCacheView& out) {
  out.kv_usage = or_unknown(mean_of(page, "sglang:token_usage"));
  out.prefix_hit_rate = or_unknown(mean_of(page, "sglang:cache_hit_rate"));
  out.kv_used_tokens = or_unknown(sum_of(page, "sglang:num_used_tokens"));
  out.kv_capacity_tokens = or_unknown(sum_of(page, "sglang:max_total_num_tokens"));
  out.n_running = or_unknown(sum_of(page, "sglang:num_running_reqs"));
  out.n_waiting = or_unknown(sum_of(page, "sglang:num_queue_reqs"));
}

void read_llama_cpp(const PromPage& page, ui::RemoteCacheView& out) {
  out.kv_usage = or_unknown(mean_of(page, "llamacpp:kv_cache_usage_ratio"));
  out.kv_used_tokens = or_unknown(sum_of(page, "llamacpp:kv_cache_tokens"));
  out.n_running = or_unknown(sum_of(page, "llamacpp:requests_processing"));
  out.n_waiting = or_unknown(sum_of(page, "llamacpp:requests_deferred"));
}

}  // namespace

void read_cache_report(const PromPage& page, ui::RemoteCacheView& out) {
  out.engine.clear();
  out.n_samples = static_cast<int64_t>(page.samples.size());
  out.kv_usage = out.prefix_hit_rate = out.prefix_queries = out.prefix_hits = -1;
  out.kv_used_tokens = out.kv_capacity_tokens = out.n_running = out.n_waiting = -1;
  out.tier_used_bytes = {-1, -1, -1};
  out.tier_capacity_bytes = {-1, -1, -1};
  out.prompt_tokens_total = out.cached_tokens_total = -1;
  if (has_prefix(page, "kvchat_")) {
    out.engine = "kvchat";
    read_kvchat(page, out);
  } else if (has_prefix(page, "vllm:")) {
    out.engine = "vLLM";
    read_vllm(page, out);
  } else if (has_prefix(page, "sglang:")) {
    out.engine = "SGLang";
    read_sglang(page, out);
  } else if (has_prefix(page, "llamacpp:")) {
    out.engine = "llama.cpp";
    read_llama_cpp(page, out);
  }
  if (out.prefix_hit_rate < 0 && out.prefix_queries > 0 && out.prefix_hits >= 0) {
    out.prefix_hit_rate = out.prefix_hits / out.prefix_queries;
  }
  if (out.kv_usage < 0 && out.kv_used_tokens >= 0 && out.kv_capacity_tokens > 0) {
    out.kv_usage = out.kv_used_tokens / out.kv_capacity_tokens;
  }
}

}  // namespace kvc::remote

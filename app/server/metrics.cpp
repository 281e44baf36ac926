// ServerMetrics: counters and histograms, and their Prometheus text exposition.
#include "app/server/metrics.h"

#include <cstdio>
#include <tuple>

namespace kvc::server {

namespace {

constexpr const char* k_routes[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"};
constexpr const char* k_tiers[] = {"t0", "t1", "t2"};

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view labels, double v) {
  out.append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(num(v)).append("\n");
}

// One metric with a value per data tier.
template <typename F>
void per_tier(std::string& out, std::string_view name, std::string_view type, std::string_view help, F value) {
  header(out, name, type, help);
  for (int t = 0; t < 3; ++t)
    sample(out, name, std::string("tier=\"") + k_tiers[t] + "\"", static_cast<double>(value(t)));
}

const char* outcome_of(engine::RequestState s) {
  switch (s) {
    case engine::RequestState::finished: return "finished";
    case engine::RequestState::cancelled: return "cancelled";
    default: return "failed";
  }
}

}  // namespace

void Histogram::observe(double v) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  }
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view help) const {
  header(out, name, "histogram", help);
  int64_t cumulative = 0;
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, bucket, "le=\"" + num(bounds_[i]) + "\"", static_cast<double>(cumulative));
  }
  sample(out, bucket, "le=\"+Inf\"", static_cast<double>(count_));
  sample(out, std::string(name) + "_sum", "", sum_);
  sample(out, std::string(name) + "_count", "", static_cast<double>(count_));
}

ServerMetrics::ServerMetrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      time_per_token_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      // vLLM's inter_token_latency_seconds buckets, with finer ones below 10 ms for small models on CPUs.
      inter_token_({0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2, 0.3,
                    0.4,    0.5,   0.75,   1.0,   2.5,  5.0,   7.5,  10.0,  20.0, 40.0, 80.0}) {}

void ServerMetrics::count_request(std::string_view route, int status) {
  std::string r = "other";
  for (const char* known : k_routes) {
    if (route == known) r = known;
  }
  std::lock_guard lock(mu_);
  ++requests_[{r, status}];
}

void ServerMetrics::observe_generation(Endpoint e, const engine::RequestResult& r, int64_t n_prompt) {
  std::lock_guard lock(mu_);
  ++generations_[{e, outcome_of(r.state)}];
  if (r.state == engine::RequestState::failed) return;
  n_prompt_tokens_ += n_prompt;
  n_completion_tokens_ += static_cast<int64_t>(r.tokens.size());
  for (int t = 0; t < 3; ++t) n_cached_tokens_[static_cast<size_t>(t)] += r.prefix.n_from_tier[t];
  if (!r.tokens.empty()) ttft_.observe(r.ttft_ms / 1e3);
  if (r.tokens.size() >= 2) {
    time_per_token_.observe((r.total_ms - r.ttft_ms) / 1e3 / static_cast<double>(r.tokens.size() - 1));
  }
  // Sampling times are kept per token (the engine's token_ms): one gap per token after the first.
  for (size_t i = 1; i < r.token_ms.size(); ++i) inter_token_.observe((r.token_ms[i] - r.token_ms[i - 1]) / 1e3);
}

int64_t ServerMetrics::n_cancelled() const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& [k, v] : generations_) {
    if (k.second == "cancelled") n += v;
  }
  return n;
}

std::string ServerMetrics::render(const CacheSnapshot& c, const engine::EngineStats& es, int64_t n_in_flight) const {
  std::string out;
  {
    std::lock_guard lock(mu_);
    header(out, "kvchat_http_requests_total", "counter", "HTTP requests answered, by route and status code.");
    for (const auto& [k, v] : requests_) {
      sample(out, "kvchat_http_requests_total", "route=\"" + k.first + "\",code=\"" + std::to_string(k.second) + "\"",
             static_cast<double>(v));
    }
    header(out, "kvchat_generations_total", "counter", "Generations that ended, by endpoint and outcome.");
    for (const auto& [k, v] : generations_) {
      sample(out, "kvchat_generations_total",
             std::string("endpoint=\"") + (k.first == Endpoint::chat ? "chat" : "completion") + "\",outcome=\"" +
                 k.second + "\"",
             static_cast<double>(v));
    }
    header(out, "kvchat_prompt_tokens_total", "counter", "Prompt tokens of generations.");
    sample(out, "kvchat_prompt_tokens_total", "", static_cast<double>(n_prompt_tokens_));
    header(out, "kvchat_completion_tokens_total", "counter", "Tokens generated.");
    sample(out, "kvchat_completion_tokens_total", "", static_cast<double>(n_completion_tokens_));
    per_tier(out, "kvchat_prompt_cached_tokens_total", "counter",
             "Prompt tokens served from the KV cache, by the tier they were found on.",
             [&](int t) { return n_cached_tokens_[static_cast<size_t>(t)]; });
    ttft_.render(out, "kvchat_time_to_first_token_seconds", "Time from a request's submission to its first token.");
    time_per_token_.render(out, "kvchat_time_per_output_token_seconds",
                           "Mean time between a request's output tokens after the first.");
    inter_token_.render(out, "kvchat_inter_token_latency_seconds",
                        "Time between two consecutive output tokens of a generation, every pair.");
  }
  header(out, "kvchat_requests_in_flight", "gauge", "Generations running or waiting in the engine.");
  sample(out, "kvchat_requests_in_flight", "", static_cast<double>(n_in_flight));

  per_tier(out, "kvchat_kv_used_bytes", "gauge", "KV bytes held on each tier.",
           [&](int t) { return c.tiers[t].used_bytes; });
  per_tier(out, "kvchat_kv_capacity_bytes", "gauge", "KV byte budget of each tier.",
           [&](int t) { return c.tiers[t].capacity_bytes; });
  // Per KV group: a Gemma-style model's windowed layers hold far fewer bytes per token than its
  // global ones, and a shared group (layers reading another's K/V) holds none.
  for (auto [name, help, used] :
       {std::tuple{"kvchat_kv_group_used_bytes", "KV bytes each layer group holds on T0 and T1.", true},
        std::tuple{"kvchat_kv_group_capacity_bytes", "KV byte budget of each layer group on T0 and T1.", false}}) {
    header(out, name, "gauge", help);
    for (size_t g = 0; g < c.groups.size(); ++g) {
      for (int t = 0; t < 2; ++t) {
        const kv::TierUsageBytes& u = c.groups[g].tiers[t];
        sample(out, name,
               "group=\"" + std::to_string(g) + "\",window=\"" + std::to_string(c.groups[g].window) + "\",tier=\"" +
                   k_tiers[t] + "\"",
               static_cast<double>(used ? u.used_bytes : u.capacity_bytes));
      }
    }
  }
  per_tier(out, "kvchat_kv_used_blocks", "gauge", "KV blocks held on each tier.",
           [&](int t) { return c.tiers[t].used_blocks; });
  per_tier(out, "kvchat_kv_capacity_blocks", "gauge", "KV blocks each tier can hold.",
           [&](int t) { return c.tiers[t].capacity_blocks; });
  per_tier(out, "kvchat_kv_hit_blocks_total", "counter", "Cached blocks reused by prompts, by the tier they were on.",
           [&](int t) { return c.counters.n_hit_blocks[static_cast<size_t>(t)]; });
  per_tier(out, "kvchat_kv_hit_tokens_total", "counter", "Prompt tokens reused from the cache, by tier.",
           [&](int t) { return c.counters.n_hit_tokens[static_cast<size_t>(t)]; });
  per_tier(out, "kvchat_kv_evictions_total", "counter", "Blocks dropped, by the tier they were dropped from.",
           [&](int t) { return c.counters.n_evictions[static_cast<size_t>(t)]; });
  header(out, "kvchat_kv_missed_tokens_total", "counter", "Prompt tokens the cache did not hold (computed).");
  sample(out, "kvchat_kv_missed_tokens_total", "", static_cast<double>(c.counters.n_missed_tokens));
  for (const auto& [name, m, help] :
       {std::tuple{"kvchat_kv_promotions_total", &c.counters.n_promotions, "Blocks moved to a faster tier."},
        std::tuple{"kvchat_kv_demotions_total", &c.counters.n_demotions, "Blocks moved to a slower tier."}}) {
    header(out, name, "counter", help);
    for (int f = 0; f < 3; ++f) {
      for (int t = 0; t < 3; ++t) {
        if (f == t) continue;
        sample(out, name, std::string("from=\"") + k_tiers[f] + "\",to=\"" + k_tiers[t] + "\"",
               static_cast<double>((*m)[static_cast<size_t>(f)][static_cast<size_t>(t)]));
      }
    }
  }
  header(out, "kvchat_kv_fragmented_tokens", "gauge", "Unused token slots in sequences' partial last blocks.");
  sample(out, "kvchat_kv_fragmented_tokens", "", static_cast<double>(c.n_fragmented_tokens));
  header(out, "kvchat_kv_disk_healthy", "gauge", "1 while the disk tier accepts writes.");
  sample(out, "kvchat_kv_disk_healthy", "", c.cold_healthy ? 1 : 0);

  header(out, "kvchat_engine_steps_total", "counter", "Forward passes run by the engine.");
  sample(out, "kvchat_engine_steps_total", "", static_cast<double>(es.n_steps));
  header(out, "kvchat_engine_prefilled_tokens_total", "counter", "Prompt tokens computed.");
  sample(out, "kvchat_engine_prefilled_tokens_total", "", static_cast<double>(es.n_tokens_prefilled));
  header(out, "kvchat_engine_decoded_tokens_total", "counter", "Tokens decoded.");
  sample(out, "kvchat_engine_decoded_tokens_total", "", static_cast<double>(es.n_tokens_decoded));
  header(out, "kvchat_engine_preemptions_total", "counter", "Requests parked for lack of compute-pool blocks.");
  sample(out, "kvchat_engine_preemptions_total", "", static_cast<double>(es.n_preemptions));
  return out;
}

}  // namespace kvc::server

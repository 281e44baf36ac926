// ServerMetrics' Prometheus text: counters by label, cumulative histogram buckets, cache gauges.
#include <catch2/catch.hpp>

#include <sstream>

#include "app/server/metrics.h"

using namespace kvc;
using server::Histogram;
using server::ServerMetrics;

namespace {

// Every line is a comment or "name{labels} value" with a number for value.
void check_exposition(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) continue;
    INFO(line);
    const size_t space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    CHECK(line.find_first_of("{ ") > 0);
    std::size_t used = 0;
    (void)std::stod(line.substr(space + 1), &used);
    CHECK(used == line.size() - space - 1);
  }
}

}  // namespace

TEST_CASE("metrics: a histogram's buckets are cumulative, with +Inf, sum and count", "[server]") {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.5, 0.7, 5.0, 50.0}) h.observe(v);
  std::string out;
  h.render(out, "x_seconds", "test");
  CHECK_THAT(out, Catch::Contains("# TYPE x_seconds histogram\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"0.1\"} 1\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"1\"} 3\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"10\"} 4\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_bucket{le=\"+Inf\"} 5\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_sum 56.25\n"));
  CHECK_THAT(out, Catch::Contains("x_seconds_count 5\n"));
  check_exposition(out);
}

TEST_CASE("metrics: requests, generations, tokens and the cache's tiers", "[server]") {
  ServerMetrics m;
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  m.count_request("/some/random/path/123", 404);  // unknown routes share one label
  m.count_request("/another", 404);
  engine::RequestResult r;
  r.state = engine::RequestState::finished;
  r.tokens = {1, 2, 3};
  r.prefix.n_cached = 40;
  r.prefix.n_from_tier[0] = 32;
  r.prefix.n_from_tier[2] = 8;
  r.ttft_ms = 20;
  r.total_ms = 60;
  m.observe_generation(server::Endpoint::chat, r, 50);
  r.state = engine::RequestState::cancelled;
  m.observe_generation(server::Endpoint::completion, r, 10);
  server::CacheSnapshot c;
  c.tiers[0].used_bytes = 4096;
  c.tiers[2].used_blocks = 7;
  c.groups.resize(2);  // a Gemma-style model: global layers, then windowed ones
  c.groups[0].tiers[0].used_bytes = 3072;
  c.groups[1].window = 512;
  c.groups[1].tiers[0].used_bytes = 1024;
  c.groups[1].tiers[1].capacity_bytes = 65536;
  c.counters.n_hit_tokens[2] = 8;
  c.counters.n_evictions[1] = 2;
  c.counters.n_promotions[2][0] = 3;
  engine::EngineStats es;
  es.n_steps = 9;
  const std::string out = m.render(c, es, 1);
  CHECK_THAT(out, Catch::Contains("kvchat_http_requests_total{route=\"/v1/chat/completions\",code=\"200\"} 2\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_http_requests_total{route=\"/v1/chat/completions\",code=\"400\"} 1\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_http_requests_total{route=\"other\",code=\"404\"} 2\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_generations_total{endpoint=\"chat\",outcome=\"finished\"} 1\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_generations_total{endpoint=\"completion\",outcome=\"cancelled\"} 1\n"));
  CHECK(m.n_cancelled() == 1);
  CHECK_THAT(out, Catch::Contains("kvchat_prompt_tokens_total 60\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_completion_tokens_total 6\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_prompt_cached_tokens_total{tier=\"t2\"} 16\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_time_to_first_token_seconds_bucket{le=\"0.025\"} 2\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_time_per_output_token_seconds_sum 0.04\n"));  // 2 x (40 ms / 2 tokens)
  CHECK_THAT(out, Catch::Contains("kvchat_requests_in_flight 1\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_used_bytes{tier=\"t0\"} 4096\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_used_blocks{tier=\"t2\"} 7\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_group_used_bytes{group=\"0\",window=\"0\",tier=\"t0\"} 3072\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_group_used_bytes{group=\"1\",window=\"512\",tier=\"t0\"} 1024\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_group_capacity_bytes{group=\"1\",window=\"512\",tier=\"t1\"} 65536\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_hit_tokens_total{tier=\"t2\"} 8\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_evictions_total{tier=\"t1\"} 2\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_kv_promotions_total{from=\"t2\",to=\"t0\"} 3\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_engine_steps_total 9\n"));
  check_exposition(out);
}

TEST_CASE("metrics: the inter-token latency histogram has one observation per token after the first", "[server]") {
  ServerMetrics m;
  engine::RequestResult r;
  r.state = engine::RequestState::finished;
  r.tokens = {1, 2, 3, 4};
  r.token_ms = {10, 10.5, 13, 40};  // gaps: 0.5 ms, 2.5 ms, 27 ms
  r.ttft_ms = 10;
  r.total_ms = 40;
  m.observe_generation(server::Endpoint::chat, r, 8);
  r.tokens = {7};  // one token: no gap
  r.token_ms = {12};
  m.observe_generation(server::Endpoint::completion, r, 8);
  r.state = engine::RequestState::cancelled;  // a cancelled stream's gaps count too
  r.tokens = {5, 6};
  r.token_ms = {3, 4};
  m.observe_generation(server::Endpoint::chat, r, 8);
  r.state = engine::RequestState::failed;  // a failure's do not (nothing was answered)
  r.tokens = {5, 6, 7};
  r.token_ms = {3, 4, 5};
  m.observe_generation(server::Endpoint::chat, r, 8);
  const std::string out = m.render(server::CacheSnapshot{}, engine::EngineStats{}, 0);
  check_exposition(out);
  // count == tokens answered (4 + 1 + 2) - generations answered (3)
  CHECK_THAT(out, Catch::Contains("# TYPE kvchat_inter_token_latency_seconds histogram\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_count 4\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_bucket{le=\"+Inf\"} 4\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_bucket{le=\"0.0005\"} 1\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_bucket{le=\"0.001\"} 2\n"));  // + 1 ms
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_bucket{le=\"0.0025\"} 3\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_bucket{le=\"0.025\"} 3\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_bucket{le=\"0.05\"} 4\n"));
  CHECK_THAT(out, Catch::Contains("kvchat_inter_token_latency_seconds_sum 0.031\n"));
}

// The Prometheus text parser and the KV cache report read from kvchat's, vLLM's, SGLang's and
// llama-server's /metrics pages (tests/data/metrics: hand-written from their documented names).
#include <catch2/catch.hpp>

#include <cmath>

#include "app/remote/prometheus_text.h"
#include "app/remote/server_cache_report.h"
#include "support/test_support.h"

using namespace kvc;

namespace {

std::string metrics_page(const std::string& name) {
  return test::read_file(std::string(KVC_TEST_DATA_DIR) + "/metrics/" + name);
}

ui::RemoteCacheView report(const std::string& text) {
  ui::RemoteCacheView v;
  remote::read_cache_report(remote::parse_prometheus_text(text), v);
  return v;
}

}  // namespace

TEST_CASE("Prometheus text: samples, labels with escapes, special values, timestamps", "[app]") {
  const std::string page =
      "# HELP a_total things\r\n"
      "# TYPE a_total counter\r\n"
      "a_total 3\r\n"
      "\n"
      "b{x=\"1\",y=\"say \\\"hi\\\"\\n\\\\\"} 2.5e+03 1700000000000\n"
      "c{le=\"+Inf\"} +Inf\n"
      "d NaN\n"
      "  e:colon_name{ z = \"q\" , } -1\n"
      "<html>not a sample</html>\n"
      "f{unclosed=\"x} 1\n"
      "g 12 trailing words\n";
  const remote::PromPage p = remote::parse_prometheus_text(page);
  REQUIRE(p.samples.size() == 5);
  CHECK(p.samples[0].name == "a_total");
  CHECK(p.samples[0].value == 3);
  CHECK(p.samples[1].labels.at("x") == "1");
  CHECK(p.samples[1].labels.at("y") == "say \"hi\"\n\\");
  CHECK(p.samples[1].value == 2500);
  CHECK(std::isinf(p.samples[2].value));
  CHECK(std::isnan(p.samples[3].value));
  CHECK(p.samples[4].name == "e:colon_name");
  CHECK(p.samples[4].labels.at("z") == "q");
  CHECK(p.samples[4].value == -1);
  CHECK(p.n_bad_lines == 3);
  CHECK(p.first_bad_line == "<html>not a sample</html>");
  CHECK(remote::sum_of(p, "a_total") == 3);
  CHECK_FALSE(remote::sum_of(p, "d"));  // NaN is no value
  CHECK_FALSE(remote::sum_of(p, "missing"));
  CHECK(remote::sum_where(p, "b", "x", "1") == 2500);
  CHECK_FALSE(remote::sum_where(p, "b", "x", "2"));
}

TEST_CASE("Prometheus text: an HTML page or an empty one has no samples", "[app]") {
  const remote::PromPage html = remote::parse_prometheus_text("<!doctype html>\n<title>404</title>\n");
  CHECK(html.samples.empty());
  CHECK(html.n_bad_lines == 2);
  CHECK(remote::parse_prometheus_text("").samples.empty());
  const ui::RemoteCacheView v = report("<!doctype html>\n");
  CHECK(v.engine.empty());
  CHECK_FALSE(v.has_cache_data());
}

TEST_CASE("cache report: vLLM v1 page (two engines): KV usage, prefix cache hits over queries", "[app]") {
  const ui::RemoteCacheView v = report(metrics_page("vllm-v1.txt"));
  CHECK(v.engine == "vLLM");
  CHECK(v.kv_usage == Approx(0.4375));  // the mean of the engines' 0.5 and 0.375
  CHECK(v.prefix_queries == 12800);
  CHECK(v.prefix_hits == 9600);
  CHECK(v.prefix_hit_rate == Approx(0.75));
  CHECK(v.n_running == 5);
  CHECK(v.n_waiting == 1);
  CHECK(v.tier_used_bytes[0] == -1);  // kvchat's tiers: not a vLLM metric
  CHECK(v.has_cache_data());
}

TEST_CASE("cache report: vLLM v0 page: gpu_cache_usage_perc and the reported hit rate", "[app]") {
  const ui::RemoteCacheView v = report(metrics_page("vllm-v0.txt"));
  CHECK(v.engine == "vLLM");
  CHECK(v.kv_usage == Approx(0.125));
  CHECK(v.prefix_hit_rate == Approx(0.6));
  CHECK(v.prefix_queries == -1);
  CHECK(v.n_running == 2);
  CHECK(v.n_waiting == 4);
}

TEST_CASE("cache report: SGLang page: token usage, used of total tokens, cache hit rate", "[app]") {
  const ui::RemoteCacheView v = report(metrics_page("sglang.txt"));
  CHECK(v.engine == "SGLang");
  CHECK(v.kv_usage == Approx(0.28));
  CHECK(v.prefix_hit_rate == Approx(0.007507552643049313));
  CHECK(v.kv_used_tokens == 45875);
  CHECK(v.kv_capacity_tokens == 163840);
  CHECK(v.n_running == 12);
  CHECK(v.n_waiting == 2);
}

TEST_CASE("cache report: llama-server without KV metrics reports no cache data", "[app]") {
  const ui::RemoteCacheView v = report(metrics_page("llama-server.txt"));
  CHECK(v.engine == "llama.cpp");
  CHECK(v.kv_usage == -1);
  CHECK(v.n_running == 1);
  CHECK_FALSE(v.has_cache_data());
  // An older build's KV ratio is read.
  const ui::RemoteCacheView old = report("llamacpp:kv_cache_usage_ratio 0.25\nllamacpp:kv_cache_tokens 512\n");
  CHECK(old.kv_usage == Approx(0.25));
  CHECK(old.kv_used_tokens == 512);
}

TEST_CASE("cache report: kvchat's own names: tiers, hits over lookups, cached prompt tokens", "[app]") {
  const ui::RemoteCacheView v = report(
      "kvchat_kv_used_bytes{tier=\"t0\"} 1024\nkvchat_kv_used_bytes{tier=\"t1\"} 0\n"
      "kvchat_kv_capacity_bytes{tier=\"t0\"} 4096\nkvchat_kv_capacity_bytes{tier=\"t1\"} 8192\n"
      "kvchat_kv_hit_tokens_total 30\nkvchat_kv_missed_tokens_total 10\n"
      "kvchat_prompt_tokens_total 40\nkvchat_prompt_cached_tokens_total 30\n");
  CHECK(v.engine == "kvchat");
  CHECK(v.tier_used_bytes[0] == 1024);
  CHECK(v.tier_capacity_bytes[1] == 8192);
  CHECK(v.tier_used_bytes[2] == -1);
  CHECK(v.kv_usage == Approx(0.25));
  CHECK(v.prefix_hit_rate == Approx(0.75));
  CHECK(v.cached_tokens_total == 30);
  // A page read later without them clears what it no longer says; per-answer fields stay.
  ui::RemoteCacheView w = v;
  w.last_cached_tokens = 7;
  remote::read_cache_report(remote::parse_prometheus_text("up 1\n"), w);
  CHECK(w.engine.empty());
  CHECK(w.kv_usage == -1);
  CHECK(w.last_cached_tokens == 7);
}

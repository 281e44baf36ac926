// A small parser for the Prometheus text exposition format (what a server's /metrics returns).
//
//   # HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
//   # TYPE vllm:kv_cache_usage_perc gauge
//   vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
//   name{label="value",...} VALUE [TIMESTAMP]        VALUE: a float, +Inf, -Inf or NaN
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvc::remote {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Comments and blank lines are skipped; a line that is not a sample is counted and skipped, so
// one odd line does not hide the rest of a page. Invariant: every sample has a non-empty name.
struct PromPage {
  std::vector<PromSample> samples;
  int64_t n_bad_lines = 0;
  std::string first_bad_line;  // the first of them (cut to 80 bytes), for an error message
};

PromPage parse_prometheus_text(std::string_view text);

// The sum of every sample named `name` (any labels), nullopt when there is none; `mean` the mean
// (a gauge reported per engine or per GPU).
std::optional<double> sum_of(const PromPage& page, std::string_view name);
std::optional<double> mean_of(const PromPage& page, std::string_view name);
// The sum of the samples named `name` whose label `key` is `value`.
std::optional<double> sum_where(const PromPage& page, std::string_view name, std::string_view key,
                                std::string_view value);

}  // namespace kvc::remote

// ServerMetrics: request, token and latency counters of the server, rendered with the KV cache's
// own counters as Prometheus text (GET /metrics).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/server/engine_host.h"
#include "core/engine/engine.h"

namespace kvc::server {

// A Prometheus histogram: cumulative counts per upper bound, a sum and a count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double v);
  // # HELP / # TYPE lines, then name_bucket{le=...}, name_sum, name_count.
  void render(std::string& out, std::string_view name, std::string_view help) const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;   // ascending
  std::vector<int64_t> counts_;  // (bounds) observations <= each bound, not yet cumulative
  double sum_ = 0;
  int64_t count_ = 0;
};

enum class Endpoint { chat, completion };

// Thread-safe.
class ServerMetrics {
 public:
  ServerMetrics();
  // route: one of the server's routes, or anything else (counted as "other").
  void count_request(std::string_view route, int status);
  // A generation that ended (finished, cancelled or failed).
  void observe_generation(Endpoint e, const engine::RequestResult& r, int64_t n_prompt);
  std::string render(const CacheSnapshot& cache, const engine::EngineStats& engine, int64_t n_in_flight) const;

  int64_t n_cancelled() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;          // (route, status) -> count
  std::map<std::pair<Endpoint, std::string>, int64_t> generations_;  // (endpoint, outcome) -> count
  int64_t n_prompt_tokens_ = 0;
  int64_t n_completion_tokens_ = 0;
  std::array<int64_t, 3> n_cached_tokens_{};  // by the tier they came from
  Histogram ttft_;
  Histogram time_per_token_;
  Histogram inter_token_;  // every gap between two consecutive tokens of a generation
};

}  // namespace kvc::server

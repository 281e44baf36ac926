// FrameStats: the main loop's per-frame work times over its last frames (median, p99, max).
#pragma once

#include <cstddef>
#include <vector>

namespace kvc::ui {

struct FrameSummary {
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  size_t n = 0;  // frames summarised
};

// A ring of the last `capacity` frame times. UI thread only.
class FrameStats {
 public:
  explicit FrameStats(size_t capacity = 600);
  void add(double ms);
  // Nearest-rank percentiles over the frames held; all 0 when none.
  FrameSummary summary() const;

 private:
  std::vector<double> ring_;
  size_t capacity_;
  size_t next_ = 0;
};

}  // namespace kvc::ui

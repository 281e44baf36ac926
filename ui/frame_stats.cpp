// FrameStats: a ring of frame times and its nearest-rank percentiles.
#include "ui/frame_stats.h"

#include <algorithm>
#include <cmath>

namespace kvc::ui {

FrameStats::FrameStats(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) { ring_.reserve(capacity_); }

void FrameStats::add(double ms) {
  if (ring_.size() < capacity_) {
    ring_.push_back(ms);
  } else {
    ring_[next_] = ms;
  }
  next_ = (next_ + 1) % capacity_;
}

FrameSummary FrameStats::summary() const {
  FrameSummary s;
  s.n = ring_.size();
  if (ring_.empty()) return s;
  std::vector<double> v = ring_;
  std::sort(v.begin(), v.end());
  auto rank = [&](double q) {
    const auto r = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(r, 1, v.size()) - 1];
  };
  s.p50_ms = rank(0.50);
  s.p99_ms = rank(0.99);
  s.max_ms = v.back();
  return s;
}

}  // namespace kvc::ui

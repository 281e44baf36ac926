// FramePacer: the median of the last frames' costs, turned into the wait between streamed frames.
#include "ui/frame_pacer.h"

#include <algorithm>

namespace kvc::ui {

FramePacer::FramePacer(FramePacing p) : p_(p) {
  p_.max_fps = std::max(p_.max_fps, 0.1);
  p_.min_fps = std::clamp(p_.min_fps, 0.1, p_.max_fps);
  p_.cpu_share = std::clamp(p_.cpu_share, 1e-3, 1.0);
}

void FramePacer::add(double cost_s) {
  ring_[next_] = std::max(cost_s, 0.0);
  next_ = (next_ + 1) % k_window;
  n_ = std::min(n_ + 1, k_window);
}

double FramePacer::cost_s() const {
  if (n_ == 0) return 0;
  std::array<double, k_window> v = ring_;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n_ / 2);
  std::nth_element(v.begin(), mid, v.begin() + static_cast<std::ptrdiff_t>(n_));
  return *mid;
}

double FramePacer::interval_s() const {
  return std::clamp(cost_s() / p_.cpu_share, 1.0 / p_.max_fps, 1.0 / p_.min_fps);
}

}  // namespace kvc::ui

// FramePacer: how often the main loop draws while an answer streams, from what its frames cost.
#pragma once

#include <array>
#include <cstddef>

namespace kvc::ui {

// While the engine streams an answer, every frame the window draws takes CPU from it: the
// engine's compute threads work fork-join on every core, and the window borrows one of them
// while it draws (kernels::CoreLoan, so that they run one fewer rather than all waiting at a
// join for a preempted one). The frames may take at most `cpu_share` of one core:
// the wait between them is the recent cost of a frame (the median of the last few, CPU time of
// the window's thread and the GL driver's) over that share, between 1 / max_fps and 1 / min_fps.
//
//   GPU, a frame ~1-2 ms of CPU   -> / 0.03 = 33-67 ms: 15-30 frames/s
//   Mesa llvmpipe under Xvfb,
//   a frame ~25 ms of CPU         -> 830 ms: ~1 frame/s, the cores go to the engine
//
// Input does not wait for the pacer (the main loop draws at once on an event); only frames that
// would just show more streamed text do.
struct FramePacing {
  double max_fps = 30;      // --stream-fps
  double min_fps = 1;       // streamed text moves at least this often, however dear a frame
  double cpu_share = 0.03;  // --stream-cpu / 100: of one core
};

class FramePacer {
 public:
  explicit FramePacer(FramePacing p = {});
  void add(double cost_s);    // one drawn frame's cost, CPU seconds
  double cost_s() const;      // a frame's recent cost: the median of the last k_window frames (0: none yet)
  double interval_s() const;  // the wait between frames while streaming

  static constexpr size_t k_window = 15;

 private:
  FramePacing p_;
  std::array<double, k_window> ring_{};
  size_t n_ = 0;     // frames in the ring, <= k_window
  size_t next_ = 0;  // where the next frame goes
};

}  // namespace kvc::ui

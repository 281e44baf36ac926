// FramePacer: the wait between streamed frames follows their cost, within the fps bounds.
#include <catch2/catch.hpp>

#include "ui/frame_pacer.h"

using kvc::ui::FramePacer;
using kvc::ui::FramePacing;

TEST_CASE("FramePacer: cheap frames run at the most frames a second", "[ui][frame_pacer]") {
  FramePacer p(FramePacing{30, 2, 0.05});
  CHECK(p.interval_s() == Approx(1.0 / 30));  // nothing measured yet
  for (int i = 0; i < 20; ++i) p.add(0.001);  // a GPU's frame: 1 ms / 5 % = 20 ms, under 1/30 s
  CHECK(p.cost_s() == Approx(0.001));
  CHECK(p.interval_s() == Approx(1.0 / 30));
}

TEST_CASE("FramePacer: dear frames come as seldom as the CPU share says", "[ui][frame_pacer]") {
  FramePacer p(FramePacing{30, 1, 0.05});
  for (int i = 0; i < 20; ++i) p.add(0.020);  // software GL: 20 ms / 5 % = 400 ms
  CHECK(p.interval_s() == Approx(0.4));
  FramePacer q(FramePacing{30, 1, 0.10});
  for (int i = 0; i < 20; ++i) q.add(0.020);
  CHECK(q.interval_s() == Approx(0.2));  // a larger share: twice as many frames
}

TEST_CASE("FramePacer: the defaults: 3 % of a core, 1 to 30 frames a second", "[ui][frame_pacer]") {
  FramePacer gpu;
  for (int i = 0; i < 20; ++i) gpu.add(0.0015);  // 1.5 ms / 3 % = 50 ms: 20 frames/s
  CHECK(gpu.interval_s() == Approx(0.05));
  FramePacer llvmpipe;
  for (int i = 0; i < 20; ++i) llvmpipe.add(0.025);  // 25 ms / 3 % = 833 ms
  CHECK(llvmpipe.interval_s() == Approx(0.025 / 0.03));
  FramePacer dearer;
  for (int i = 0; i < 20; ++i) dearer.add(0.060);  // 2 s by the share: 1 frame/s
  CHECK(dearer.interval_s() == Approx(1.0));
}

TEST_CASE("FramePacer: never fewer than the least frames a second", "[ui][frame_pacer]") {
  FramePacer p(FramePacing{30, 2, 0.05});
  for (int i = 0; i < 20; ++i) p.add(0.200);  // 4 s by the share
  CHECK(p.interval_s() == Approx(0.5));
}

TEST_CASE("FramePacer: the median of the last frames, one slow frame does not count", "[ui][frame_pacer]") {
  FramePacer p(FramePacing{30, 0.5, 0.05});
  for (size_t i = 0; i < FramePacer::k_window; ++i) p.add(0.010);
  p.add(1.0);  // a screenshot, a window resize
  CHECK(p.cost_s() == Approx(0.010));
  for (size_t i = 0; i < FramePacer::k_window; ++i) p.add(0.030);  // the frames got dearer: only they count now
  CHECK(p.cost_s() == Approx(0.030));
  CHECK(p.interval_s() == Approx(0.6));
}

TEST_CASE("FramePacer: bounds out of order or out of range are put right", "[ui][frame_pacer]") {
  FramePacer p(FramePacing{10, 50, 0});  // min above max, no share
  for (int i = 0; i < 5; ++i) p.add(0.020);
  CHECK(p.interval_s() == Approx(0.1));  // min_fps is cut to max_fps
  p.add(-1);                             // a clock that went back counts as free
  CHECK(p.cost_s() >= 0);
}

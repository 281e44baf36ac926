// FrameStats: nearest-rank percentiles over a ring of the last frames.
#include <catch2/catch.hpp>

#include "ui/frame_stats.h"

using kvc::ui::FrameStats;

TEST_CASE("FrameStats: empty is all zeros", "[ui][frame_stats]") {
  const auto s = FrameStats(8).summary();
  CHECK(s.n == 0);
  CHECK(s.p50_ms == 0);
  CHECK(s.max_ms == 0);
}

TEST_CASE("FrameStats: nearest-rank median, p99 and max", "[ui][frame_stats]") {
  FrameStats f(100);
  for (int i = 100; i >= 1; --i) f.add(i);  // order does not matter
  const auto s = f.summary();
  CHECK(s.n == 100);
  CHECK(s.p50_ms == 50);
  CHECK(s.p99_ms == 99);
  CHECK(s.max_ms == 100);
}

TEST_CASE("FrameStats: only the last frames count", "[ui][frame_stats]") {
  FrameStats f(4);
  f.add(500);  // pushed out by the four below
  for (double ms : {1.0, 2.0, 3.0, 4.0}) f.add(ms);
  const auto s = f.summary();
  CHECK(s.n == 4);
  CHECK(s.max_ms == 4);
  CHECK(s.p50_ms == 2);
}

// Steady-clock readings for timings: microseconds on one epoch, milliseconds since a time point.
#pragma once

#include <chrono>
#include <cstdint>

namespace kvc {

// Microseconds of the steady clock (an arbitrary epoch: compare readings with each other only).
inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kvc

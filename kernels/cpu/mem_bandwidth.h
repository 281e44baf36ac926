// A memory-read bandwidth probe: the physical ceiling that decode speed is compared against.
#pragma once

#include <cstddef>

#include "kernels/cpu/thread_pool.h"

namespace kvc::kernels {

// Reads a buffer of n_bytes (larger than the caches) `repetitions` times with every thread
// of the pool summing its share, and returns the best repetition's bytes per second.
double measure_read_bandwidth(ThreadPool& pool, size_t n_bytes, int repetitions);

}  // namespace kvc::kernels

// CPU time of threads: the calling thread's, and any of the process's threads by id (Linux
// /proc/self/task), for what the window's frames cost with the GL driver's threads counted in.
#pragma once

#include <vector>

namespace kvc::ui {

// The calling thread's CPU time, seconds.
double thread_cpu_s();
// The ids of the process's threads now (empty where /proc is not there).
std::vector<int> process_thread_ids();
// The CPU time the threads have used, seconds, summed (a thread that is gone counts 0).
double threads_cpu_s(const std::vector<int>& tids);
// The threads in `after` that are not in `before` (both as process_thread_ids gives them).
std::vector<int> new_threads(const std::vector<int>& before, const std::vector<int>& after);

}  // namespace kvc::ui

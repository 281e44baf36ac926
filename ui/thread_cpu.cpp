// Thread CPU times: clock_gettime for the calling thread, /proc/self/task/TID/schedstat for others.
#include "ui/thread_cpu.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <string>
#include <system_error>

namespace kvc::ui {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<int> process_thread_ids() {
  std::vector<int> tids;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      tids.push_back(std::stoi(name));
    }
  }
  std::sort(tids.begin(), tids.end());
  return tids;
}

double threads_cpu_s(const std::vector<int>& tids) {
  double total = 0;
  for (int tid : tids) {
    // schedstat: nanoseconds on the CPU, then waiting, then time slices.
    const std::string path = "/proc/self/task/" + std::to_string(tid) + "/schedstat";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    unsigned long long ns = 0;
    if (std::fscanf(f, "%llu", &ns) == 1) total += 1e-9 * static_cast<double>(ns);
    std::fclose(f);
  }
  return total;
}

std::vector<int> new_threads(const std::vector<int>& before, const std::vector<int>& after) {
  std::vector<int> out;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(out));
  return out;
}

}  // namespace kvc::ui

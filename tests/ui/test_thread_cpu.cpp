// Thread CPU times: a new thread is found among the process's, and its CPU time is read by id.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <sys/syscall.h>
#include <unistd.h>

#include "ui/thread_cpu.h"

using namespace kvc::ui;

TEST_CASE("thread CPU: a thread started in between is new, its CPU time is read by its id", "[ui][thread_cpu]") {
  const std::vector<int> before = process_thread_ids();
  REQUIRE_FALSE(before.empty());
  CHECK(std::find(before.begin(), before.end(), static_cast<int>(::getpid())) != before.end());  // the main thread
  std::atomic<int> tid{0};
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    tid = static_cast<int>(::syscall(SYS_gettid));
    volatile double x = 0;
    while (!stop.load()) x = x + 1.0;  // CPU until told to stop
  });
  while (tid.load() == 0) std::this_thread::yield();
  const std::vector<int> fresh = new_threads(before, process_thread_ids());
  CHECK(std::find(fresh.begin(), fresh.end(), tid.load()) != fresh.end());
  // It uses CPU: its reading grows (read until it has, so a busy machine only makes this longer).
  const double t0 = threads_cpu_s({tid.load()});
  double t1 = t0;
  for (int i = 0; i < 10000 && t1 <= t0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    t1 = threads_cpu_s({tid.load()});
  }
  stop = true;
  worker.join();
  CHECK(t1 > t0);
  CHECK(threads_cpu_s({tid.load()}) == 0);  // gone: counts nothing
  CHECK(threads_cpu_s({}) == 0);
  // The calling thread's own clock moves with its work.
  const double c0 = thread_cpu_s();
  volatile double y = 0;
  for (int i = 0; i < 5'000'000 && thread_cpu_s() <= c0; ++i) y = y + 1.0;
  CHECK(thread_cpu_s() > c0);
}

TEST_CASE("thread CPU: new_threads is the set difference", "[ui][thread_cpu]") {
  CHECK(new_threads({1, 3, 5}, {1, 2, 3, 4, 5}) == std::vector<int>{2, 4});
  CHECK(new_threads({1, 2}, {1, 2}).empty());
  CHECK(new_threads({}, {7}) == std::vector<int>{7});
}

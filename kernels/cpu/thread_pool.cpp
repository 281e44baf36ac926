// Fork-join thread pool with spin-then-sleep workers.
#include "kernels/cpu/thread_pool.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <pthread.h>
#endif

namespace kvc::kernels {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Waiting for the next job or for the workers: spin with pause for up to k_spin_budget (the
// jobs of a decode step follow each other within microseconds, and a futex wake costs tens of
// microseconds in a VM), then sleep in the kernel. Never sched_yield while spinning: a yield
// hands the core to any runnable thread, a SCHED_IDLE or niced build included, for a whole
// slice, and the fork-join then waits on the descheduled thread (measured: decode 1.26x and
// prefill 1.35x faster beside an idle-class compile without the yields, equal on a quiet
// machine; BENCHMARKS.md "Decode beside background work").
constexpr auto k_spin_budget = std::chrono::microseconds(100);

// Polls `done` until it returns true (then returns true) or the spin budget runs out.
template <typename Pred>
bool spin_until(Pred&& done) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() - start > k_spin_budget) return false;
  }
}

// "kvc-compute-N" in top -H and perf (the caller, share 0, keeps its own name).
void name_this_thread(int ith) {
#if defined(__linux__)
  char name[16];
  std::snprintf(name, sizeof name, "kvc-compute-%d", ith);
  (void)pthread_setname_np(pthread_self(), name);
#else
  (void)ith;
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads < 1 ? 1 : n_threads), shares_(static_cast<size_t>(n_threads_)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::dispatch(const Job& job) {
  job_ = job;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  job.call(job.ctx, 0, n_threads_);
  if (spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) return;
  for (int left; (left = pending_.load(std::memory_order_acquire)) != 0;)
    pending_.wait(left, std::memory_order_acquire);
}

void ThreadPool::worker_main(int ith) {
  name_this_thread(ith);
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = seen;
    spin_until([&] { return (gen = generation_.load(std::memory_order_acquire)) != seen; });
    if (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    job_.call(job_.ctx, ith, n_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

int default_thread_count() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) phys = line.substr(line.find(':') + 1);
    if (line.rfind("core id", 0) == 0) cores.emplace(phys, line.substr(line.find(':') + 1));
  }
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  int n = cores.empty() ? hw : static_cast<int>(cores.size());
  if (n > hw && hw > 0) n = hw;
  return n < 1 ? 1 : n;
}

}  // namespace kvc::kernels

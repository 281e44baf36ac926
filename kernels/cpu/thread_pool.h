// A fork-join thread pool for compute kernels: the caller runs one share of every job.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace kvc::kernels {

// Invariants: a job is published by bumping generation_; every worker runs it once and
// decrements pending_; run() returns only when pending_ is 0, so a job's captures outlive
// every use. Workers and the caller spin briefly before sleeping (on generation_ and
// pending_): decode issues hundreds of small jobs per token, and a futex round trip per job
// would cost more than the job; sleeping after that keeps an oversubscribed machine usable.
class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads, the caller included; >= 1
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(ith, nth) once on each of nth threads (ith = 0 is the caller) and waits.
  template <typename F>
  void run(F&& fn) {
    if (n_threads_ == 1) {
      fn(0, 1);
      return;
    }
    Job job{&invoke<std::remove_reference_t<F>>, &fn};
    dispatch(job);
  }

  // Splits [0, n) into chunks of at least `grain` items, one contiguous range per thread,
  // and calls fn(begin, end) for each non-empty range.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    const int64_t max_parts = grain > 0 ? (n + grain - 1) / grain : n;
    const int nth = static_cast<int>(max_parts < n_threads_ ? (max_parts < 1 ? 1 : max_parts) : n_threads_);
    if (nth <= 1) {
      if (n > 0) fn(int64_t{0}, n);
      return;
    }
    run([&](int ith, int) {
      if (ith >= nth) return;
      const int64_t begin = n * ith / nth;
      const int64_t end = n * (ith + 1) / nth;
      if (begin < end) fn(begin, end);
    });
  }

 private:
  struct Job {
    void (*call)(void* ctx, int ith, int nth);
    void* ctx;
  };
  template <typename F>
  static void invoke(void* ctx, int ith, int nth) {
    (*static_cast<F*>(ctx))(ith, nth);
  }

  void dispatch(const Job& job);
  void worker_main(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  Job job_{};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

// A sensible default: the number of physical cores, at least 1 (hyperthreads do not help
// bandwidth-bound decode).
int default_thread_count();

}  // namespace kvc::kernels

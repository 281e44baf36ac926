// A fork-join thread pool for compute kernels: the caller runs one share of every job.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace kvc::kernels {

// Invariants: a job is published by storing generation_ (a counter and the job's width, the
// number of threads that run it); every thread below the width runs it once and the workers
// among them decrement pending_; run() returns only when pending_ is 0, so a job's captures
// outlive every use. Workers and the caller spin briefly before sleeping (on generation_ and
// pending_): decode issues hundreds of small jobs per token, and a futex round trip per job
// would cost more than the job; sleeping after that keeps an oversubscribed machine usable.
// A job is as wide as the pool less the cores lent away (CoreLoan); a worker left out by a
// loan sleeps until the loans change.

// A core lent away from the process's compute pools while it lives: every ThreadPool runs its
// jobs on one thread fewer (at least one, the caller), and the worker it leaves out sleeps.
// For another thread of the process that needs a core for a while, such as a window drawing
// a frame on a software renderer beside a streaming answer: taken from a fork-join pool by
// preemption, that core would stall every compute thread at the next join, for a slice each
// time; lent, it costs the pool that core only. Loans nest; each is one core.
class CoreLoan {
 public:
  CoreLoan();
  ~CoreLoan();
  CoreLoan(const CoreLoan&) = delete;
  CoreLoan& operator=(const CoreLoan&) = delete;
};

// Cores lent now (live CoreLoans).
int cores_lent();

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads, the caller included; 1 .. 65535
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }
  // Threads a job runs on now: n_threads() less the cores lent, at least 1.
  int width() const {
    const int w = n_threads_ - cores_lent();
    return w < 1 ? 1 : w;
  }

  // Calls fn(ith, nth) once on each of nth = width() threads (ith = 0 is the caller) and waits.
  template <typename F>
  void run(F&& fn) {
    run_on(width(), fn);
  }

  // Splits [0, n) into chunks of at least `grain` items, one contiguous range per thread,
  // and calls fn(begin, end) for each non-empty range.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    const int64_t max_parts = grain > 0 ? (n + grain - 1) / grain : n;
    const int w = width();
    const int nth = static_cast<int>(max_parts < w ? (max_parts < 1 ? 1 : max_parts) : w);
    if (nth <= 1) {
      if (n > 0) fn(int64_t{0}, n);
      return;
    }
    run_on(nth, [&](int ith, int) {
      const int64_t begin = n * ith / nth;
      const int64_t end = n * (ith + 1) / nth;
      if (begin < end) fn(begin, end);
    });
  }

  // Like parallel_for, one contiguous share of [0, n) per thread, but each share is walked
  // from its front in pieces of `piece` items, and a thread done with its own share takes the
  // back half of what another has left as its new share: a thread that its core or the memory
  // system slowed does not keep the rest waiting at the join. fn(begin, end) is called once per
  // piece, on whichever thread took it; every thread walks forward through contiguous pieces,
  // so a kernel prefetching ahead of its rows prefetches what it runs next.
  template <typename F>
  void parallel_for_balanced(int64_t n, int64_t piece, F&& fn) {
    if (piece < 1) piece = 1;
    const int64_t n_pieces = (n + piece - 1) / piece;
    const int w = width();
    const int nth = static_cast<int>(n_pieces < w ? n_pieces : w);
    if (nth <= 1 || n_pieces > k_max_pieces) {
      parallel_for(n, piece, fn);
      return;
    }
    for (int i = 0; i < nth; ++i) shares_[static_cast<size_t>(i)].set(n_pieces * i / nth, n_pieces * (i + 1) / nth);
    run_on(nth, [&](int ith, int) {
      auto call = [&](int64_t p) { fn(p * piece, p + 1 < n_pieces ? (p + 1) * piece : n); };
      Share& own = shares_[static_cast<size_t>(ith)];
      for (;;) {
        for (int64_t p; (p = own.take_front()) >= 0;) call(p);
        int64_t begin = -1, end = -1;
        for (int k = 1; k < nth && begin < 0; ++k)
          shares_[static_cast<size_t>((ith + k) % nth)].take_back_half(begin, end);
        if (begin < 0) return;
        own.set(begin, end);  // only its owner refills a share, and only when it is empty
      }
    });
  }

 private:
  // fn(ith, nth) on threads 0 .. nth - 1 (1 <= nth <= n_threads()); the others sit this job out.
  template <typename F>
  void run_on(int nth, F&& fn) {
    if (nth <= 1) {
      fn(0, 1);
      return;
    }
    Job job{&invoke<std::remove_reference_t<F>>, &fn};
    dispatch(job, nth);
  }

  struct Job {
    void (*call)(void* ctx, int ith, int nth);
    void* ctx;
  };
  template <typename F>
  static void invoke(void* ctx, int ith, int nth) {
    (*static_cast<F*>(ctx))(ith, nth);
  }

  void dispatch(const Job& job, int nth);
  // generation_: the job counter above, the job's width in the low bits.
  static constexpr int k_width_bits = 16;
  static constexpr uint64_t k_width_mask = (uint64_t{1} << k_width_bits) - 1;
  void worker_main(int ith);

  // A share of parallel_for_balanced: pieces [begin, end) packed in one word, so that the owner
  // taking from the front and a thief taking from the back never both get a piece.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
    static uint64_t pack(int64_t begin, int64_t end) {
      return static_cast<uint64_t>(begin) << 32 | static_cast<uint64_t>(end);
    }
    void set(int64_t begin, int64_t end) { range.store(pack(begin, end), std::memory_order_relaxed); }
    // The next piece from the front, or -1 when the share is empty.
    int64_t take_front() {
      uint64_t r = range.load(std::memory_order_relaxed);
      for (;;) {
        const auto begin = static_cast<int64_t>(r >> 32), end = static_cast<int64_t>(r & 0xffffffffu);
        if (begin >= end) return -1;
        if (range.compare_exchange_weak(r, pack(begin + 1, end), std::memory_order_relaxed)) return begin;
      }
    }
    // The back half of what is left (at least one piece) as [begin, end); begin = -1 if none.
    void take_back_half(int64_t& begin, int64_t& end) {
      uint64_t r = range.load(std::memory_order_relaxed);
      for (;;) {
        const auto b = static_cast<int64_t>(r >> 32), e = static_cast<int64_t>(r & 0xffffffffu);
        if (b >= e) return;
        const int64_t mid = e - std::max<int64_t>(1, (e - b) / 2);
        if (range.compare_exchange_weak(r, pack(b, mid), std::memory_order_relaxed)) {
          begin = mid;
          end = e;
          return;
        }
      }
    }
  };
  static constexpr int64_t k_max_pieces = 0xffffffff;

  int n_threads_;
  std::vector<Share> shares_;  // parallel_for_balanced's, one per thread
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

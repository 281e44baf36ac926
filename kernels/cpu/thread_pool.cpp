// Fork-join thread pool with spin-then-sleep workers.
#include "kernels/cpu/thread_pool.h"

#include <algorithm>
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

// The process's loans (CoreLoan): their count in the low half, and in the high half a count of
// changes, so that a worker sleeping on the word wakes at every change (a loan ended and another
// begun leave the count as it was, not the word).
std::atomic<uint64_t> g_loans{0};
constexpr uint64_t k_loan_change = uint64_t{1} << 32;

int lent_in(uint64_t word) { return static_cast<int>(word & 0xffffffffu); }

}  // namespace

CoreLoan::CoreLoan() { g_loans.fetch_add(k_loan_change + 1, std::memory_order_acq_rel); }

CoreLoan::~CoreLoan() {
  g_loans.fetch_add(k_loan_change - 1, std::memory_order_acq_rel);
  g_loans.notify_all();
}

int cores_lent() { return lent_in(g_loans.load(std::memory_order_acquire)); }

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(std::clamp(n_threads, 1, static_cast<int>(k_width_mask))), shares_(static_cast<size_t>(n_threads_)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(uint64_t{1} << k_width_bits, std::memory_order_acq_rel);
  generation_.notify_all();
  // A worker a loan left out sleeps on the loans: a change of the word (not of the count) wakes it.
  g_loans.fetch_add(k_loan_change, std::memory_order_acq_rel);
  g_loans.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::dispatch(const Job& job, int nth) {
  job_ = job;
  pending_.store(nth - 1, std::memory_order_relaxed);
  // Only the caller's thread stores generation_ (one run() at a time).
  const uint64_t counter = (generation_.load(std::memory_order_relaxed) >> k_width_bits) + 1;
  generation_.store(counter << k_width_bits | static_cast<uint64_t>(nth), std::memory_order_release);
  generation_.notify_all();
  job.call(job.ctx, 0, nth);
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
    const int nth = static_cast<int>(gen & k_width_mask);
    if (ith >= nth) {
      // Not in this job. Left out by a loan (not by a job of few parts): sleep until the loans
      // change; a job that takes this thread again comes after such a change, or was published
      // before the check of generation_ below.
      const uint64_t loans = g_loans.load(std::memory_order_acquire);
      if (ith >= n_threads_ - lent_in(loans) && generation_.load(std::memory_order_acquire) == seen)
        g_loans.wait(loans, std::memory_order_acquire);
      continue;
    }
    job_.call(job_.ctx, ith, nth);
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

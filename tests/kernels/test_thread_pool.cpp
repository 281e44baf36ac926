// Thread pool: every thread runs each job once; parallel_for and parallel_for_balanced cover
// [0, n) exactly once, and a thread done early takes the back half of a slow one's share.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/thread_pool.h"
#include "support/test_support.h"

using namespace kvc::kernels;

TEST_CASE("thread pool runs each job on every thread once", "[kernels]") {
  for (int nth : {1, 2, 3, 5}) {
    ThreadPool pool(nth);
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(nth));
      std::atomic<int> wrong_n{0};  // Catch's assertions are not thread-safe (TSan): checked after the job
      pool.run([&](int ith, int n) {
        if (n != nth) wrong_n.fetch_add(1);
        hits[static_cast<size_t>(ith)].fetch_add(1);
      });
      REQUIRE(wrong_n.load() == 0);
      for (auto& h : hits) REQUIRE(h.load() == 1);
    }
  }
}

TEST_CASE("parallel_for covers the range exactly once", "[kernels]") {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& s : seen) REQUIRE(s.load() == 1);
  }
}

TEST_CASE("parallel_for_balanced covers the range exactly once, in whole pieces", "[kernels]") {
  for (int nth : {1, 2, 3, 5}) {
    ThreadPool pool(nth);
    for (int64_t n : {0, 1, 5, 64, 1000, 4097})
      for (int64_t piece : {1, 3, 16}) {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::atomic<int> misaligned{0};
        pool.parallel_for_balanced(n, piece, [&](int64_t b, int64_t e) {
          if (b % piece != 0 || (e != n && e - b != piece)) misaligned.fetch_add(1);
          for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
        });
        INFO("threads " << nth << " n " << n << " piece " << piece);
        REQUIRE(misaligned.load() == 0);
        for (auto& s : seen) REQUIRE(s.load() == 1);
      }
  }
}

TEST_CASE("parallel_for_balanced: a thread done with its share takes the back half of the slow thread's", "[kernels]") {
  ThreadPool pool(2);
  const std::thread::id caller = std::this_thread::get_id();
  constexpr int64_t n = 64;  // share 0 (the caller's): pieces 0-31; share 1: 32-63
  std::vector<std::atomic<int>> seen(n);
  std::atomic<int> stolen{0};
  std::vector<int64_t> caller_order, other_order;  // each written by one thread only
  pool.parallel_for_balanced(n, 1, [&](int64_t b, int64_t) {
    seen[static_cast<size_t>(b)].fetch_add(1);
    if (std::this_thread::get_id() == caller) {
      caller_order.push_back(b);
      // The caller is the slow one: its first piece waits until the other thread has taken one
      // of the caller's pieces (bounded, so a broken pool fails instead of hanging).
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (b == 0 && stolen.load() == 0 && std::chrono::steady_clock::now() < give_up)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } else {
      other_order.push_back(b);
      if (b < n / 2) stolen.fetch_add(1);
    }
  });
  for (auto& s : seen) REQUIRE(s.load() == 1);
  REQUIRE(stolen.load() > 0);
  // The other thread ran its own share, then took the back half of what the caller had left
  // (16-31 of 0-31, or 17-31 of 1-31 once the caller holds piece 0) and walked it forward;
  // the caller walked forward from 0.
  REQUIRE(other_order.size() >= 32 + 15);
  for (size_t i = 0; i < 32; ++i) REQUIRE(other_order[i] == static_cast<int64_t>(32 + i));
  const int64_t first_taken = other_order[32];
  REQUIRE((first_taken == 16 || first_taken == 17));
  for (int64_t p = first_taken; p < 32; ++p) REQUIRE(other_order[static_cast<size_t>(32 + p - first_taken)] == p);
  REQUIRE(caller_order.front() == 0);
  for (size_t i = 1; i < caller_order.size(); ++i) REQUIRE(caller_order[i] > caller_order[i - 1]);
}

namespace {

// Which threads ran one job, and with which nth (checked after the job: Catch's assertions are
// not thread-safe).
struct JobTrace {
  explicit JobTrace(int n_threads) : hits(static_cast<size_t>(n_threads)) {}
  std::vector<std::atomic<int>> hits;
  std::atomic<int> other_nth{0};
};

void run_traced(ThreadPool& pool, int expect_nth, JobTrace& t) {
  pool.run([&](int ith, int nth) {
    if (nth != expect_nth) t.other_nth.fetch_add(1);
    t.hits[static_cast<size_t>(ith)].fetch_add(1);
  });
}

// CPU time of this process's thread named `name` (/proc/self/task/*/schedstat), ns; -1 if none.
int64_t thread_cpu_ns(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream comm(task.path() / "comm");
    std::string c;
    if (!std::getline(comm, c) || c != name) continue;
    std::ifstream stat(task.path() / "schedstat");
    int64_t ns = -1;
    stat >> ns;
    return ns;
  }
  return -1;
}

}  // namespace

TEST_CASE("a core lent away narrows every pool's jobs by one thread until it returns", "[kernels]") {
  ThreadPool pool(4);
  REQUIRE(cores_lent() == 0);
  REQUIRE(pool.width() == 4);
  {
    CoreLoan loan;
    REQUIRE(cores_lent() == 1);
    REQUIRE(pool.width() == 3);
    for (int rep = 0; rep < 200; ++rep) {
      JobTrace t(4);
      run_traced(pool, 3, t);
      REQUIRE(t.other_nth.load() == 0);
      for (int i = 0; i < 3; ++i) REQUIRE(t.hits[static_cast<size_t>(i)].load() == 1);
      REQUIRE(t.hits[3].load() == 0);  // the thread the loan left out
    }
    // The ranges are still covered exactly once, on three threads.
    for (int64_t n : {1, 7, 1000}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n)), seen_b(static_cast<size_t>(n));
      std::mutex mu;
      std::set<std::thread::id> threads;
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard lock(mu);
        threads.insert(std::this_thread::get_id());
      });
      pool.parallel_for_balanced(n, 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) seen_b[static_cast<size_t>(i)].fetch_add(1);
      });
      for (auto& v : seen) REQUIRE(v.load() == 1);
      for (auto& v : seen_b) REQUIRE(v.load() == 1);
      REQUIRE(threads.size() <= 3);
    }
    {
      // Loans nest; more of them than the pool has workers leave the caller alone.
      CoreLoan a, b, c;
      REQUIRE(cores_lent() == 4);
      REQUIRE(pool.width() == 1);
      const std::thread::id caller = std::this_thread::get_id();
      std::atomic<int> elsewhere{0};
      pool.run([&](int, int nth) {
        if (nth != 1 || std::this_thread::get_id() != caller) elsewhere.fetch_add(1);
      });
      REQUIRE(elsewhere.load() == 0);
    }
    REQUIRE(pool.width() == 3);
  }
  // Returned: the worker that slept through the loan takes its share of every job again.
  REQUIRE(pool.width() == 4);
  for (int rep = 0; rep < 200; ++rep) {
    JobTrace t(4);
    run_traced(pool, 4, t);
    REQUIRE(t.other_nth.load() == 0);
    for (auto& h : t.hits) REQUIRE(h.load() == 1);
  }
}

TEST_CASE("the worker a loan leaves out sleeps instead of spinning, and a pool still ends with it asleep",
          "[kernels]") {
  if (thread_cpu_ns("kvc-compute-2") != -1 || !std::filesystem::exists("/proc/self/task")) {
    KVC_SKIP("needs /proc/self/task/*/schedstat and no other pool's threads of these names");
  }
  CoreLoan loan;
  {
    ThreadPool pool(3);   // the caller and kvc-compute-1 run the jobs; kvc-compute-2 is lent away
    int64_t before = -1;  // the worker names itself once it runs
    for (int i = 0; i < 1000 && (before = thread_cpu_ns("kvc-compute-2")) < 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(before >= 0);
    // 100 ms of jobs back to back, as in decode: a worker spinning for each would burn most of it.
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    std::atomic<int64_t> sum{0};
    int64_t n_jobs = 0;
    while (std::chrono::steady_clock::now() < end) {
      pool.run([&](int ith, int) { sum.fetch_add(ith + 1, std::memory_order_relaxed); });
      ++n_jobs;
    }
    REQUIRE(sum.load() == 3 * n_jobs);  // threads 0 and 1 in every job, 2 in none
    const int64_t spent_ns = thread_cpu_ns("kvc-compute-2") - before;
    INFO("the lent-away worker ran " << spent_ns / 1000 << " us of 100 ms");
    REQUIRE(spent_ns < 5'000'000);
  }  // joins kvc-compute-2 while the loan still holds it asleep
  SUCCEED("the pool ended");
}

TEST_CASE("dtype geometry matches the GGUF definitions", "[kernels]") {
  REQUIRE(row_bytes(DType::q4_0, 4096) == 4096 / 32 * 18);
  REQUIRE(row_bytes(DType::q8_0, 4096) == 4096 / 32 * 34);
  REQUIRE(row_bytes(DType::q4_k, 4096) == 4096 / 256 * 144);
  REQUIRE(row_bytes(DType::q6_k, 4096) == 4096 / 256 * 210);
  REQUIRE(row_bytes(DType::q4_1, 4096) == 4096 / 32 * 20);
  REQUIRE(row_bytes(DType::q5_0, 4096) == 4096 / 32 * 22);
  REQUIRE(row_bytes(DType::q5_1, 4096) == 4096 / 32 * 24);
  REQUIRE(row_bytes(DType::iq4_nl, 4096) == 4096 / 32 * 18);
  REQUIRE(row_bytes(DType::q2_k, 4096) == 4096 / 256 * 84);
  REQUIRE(row_bytes(DType::q3_k, 4096) == 4096 / 256 * 110);
  REQUIRE(row_bytes(DType::q5_k, 4096) == 4096 / 256 * 176);
  REQUIRE(row_bytes(DType::f16, 10) == 20);
  REQUIRE(dtype_info(9u) == nullptr);   // Q8_1 is not implemented
  REQUIRE(dtype_info(23u) == nullptr);  // nor IQ4_XS
}

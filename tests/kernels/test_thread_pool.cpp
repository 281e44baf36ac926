// Thread pool: every thread runs each job once; parallel_for and parallel_for_balanced cover
// [0, n) exactly once, and a thread done early takes the back half of a slow one's share.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/thread_pool.h"

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

// Thread pool: every thread runs each job once; parallel_for covers [0, n) exactly once.
#include <catch2/catch.hpp>

#include <atomic>
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

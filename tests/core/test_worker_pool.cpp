// WorkerPool: tasks run off the caller's thread, on at most n threads, all before the pool is gone.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "core/util/worker_pool.h"

using namespace kvc;

TEST_CASE("worker pool: runs every task on at most n threads, and the rest before it is destroyed", "[core]") {
  std::atomic<int> n_done{0};
  std::mutex mu;
  std::set<std::thread::id> threads;
  size_t n_started = 0;
  {
    WorkerPool pool(2);
    CHECK(pool.n_started() == 0);  // threads start on demand
    for (int i = 0; i < 50; ++i) {
      pool.post([&] {
        {
          std::lock_guard lock(mu);
          threads.insert(std::this_thread::get_id());
        }
        ++n_done;
      });
    }
    n_started = pool.n_started();
  }  // the destructor runs what is still queued, then joins
  CHECK(n_done.load() == 50);
  CHECK(n_started >= 1);
  CHECK(n_started <= 2);
  CHECK(threads.size() <= 2);
  CHECK(threads.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("worker pool: a blocked task does not hold up the next one while a thread is free", "[core]") {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false, second_ran = false;
  WorkerPool pool(2);
  pool.post([&] {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });  // a slow disk read
  });
  pool.post([&] {
    std::lock_guard lock(mu);
    second_ran = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    CHECK(cv.wait_for(lock, std::chrono::seconds(10), [&] { return second_ran; }));
    open = true;
  }
  cv.notify_all();
}

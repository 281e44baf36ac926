// WorkerPool: a few threads that run queued tasks in order of submission (blocking work off a caller's thread).
//
// Threads start on demand, up to n_threads, and live until the pool is destroyed; the
// destructor runs every task already posted, then joins. post() is thread-safe. A task must
// not post to or destroy its own pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvc {

class WorkerPool {
 public:
  explicit WorkerPool(size_t n_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void post(std::function<void()> task);
  size_t n_started() const;

 private:
  void work();

  const size_t n_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  size_t n_idle_ = 0;                        // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;         // guarded by mu_
};

}  // namespace kvc

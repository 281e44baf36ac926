// WorkerPool: on-demand threads draining a FIFO of tasks.
#include "core/util/worker_pool.h"

#include <utility>

#include "core/util/assert.h"
#include "core/util/thread_name.h"

namespace kvc {

WorkerPool::WorkerPool(size_t n_threads) : n_threads_(n_threads) { KVC_ASSERT(n_threads > 0); }

WorkerPool::~WorkerPool() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

void WorkerPool::post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    KVC_ASSERT(!stopping_);
    tasks_.push_back(std::move(task));
    if (n_idle_ < tasks_.size() && threads_.size() < n_threads_) {
      threads_.emplace_back([this] {
        set_thread_name("kvc-pool");
        work();
      });
    }
  }
  cv_.notify_one();
}

size_t WorkerPool::n_started() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

void WorkerPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++n_idle_;
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    --n_idle_;
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace kvc

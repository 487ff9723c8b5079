#include "ops/deferral.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <string>
#include <system_error>
#include <utility>

#include "core/quote.h"

namespace flurry::ops {

Pools::Pools(std::size_t store_threads) : store_(std::max<std::size_t>(1, store_threads)) {}

Pools::~Pools() {
  stop();
}

void Pools::run_one(std::function<void()>& job) noexcept {
  try {
    job();
  } catch (const std::exception& e) {
    spdlog::error("event=deferred_job_failed message={}", internal::quote(e.what()));
  } catch (...) {
    spdlog::error("event=deferred_job_failed message=\"unknown exception\"");
  }
}

void Pools::run(Queue& queue) {
  for (;;) {
    std::function<void()> job;
    {
      MutexLock lock(queue.mu);
      lock.wait(queue.cv, [&queue]() FLURRY_REQUIRES(queue.mu) {
        return queue.stopping || !queue.jobs.empty();
      });
      if (queue.jobs.empty()) return;  // stopping, and nothing left to run
      job = std::move(queue.jobs.front());
      queue.jobs.pop_front();
    }
    run_one(job);
  }
}

void Pools::post(Pool pool, std::function<void()> job) {
  Queue& queue = pool == Pool::kGenerator ? generator_ : store_;
  if (pool == Pool::kGenerator) {
    generator_waiting_.fetch_add(1, std::memory_order_acq_rel);
    job = [this, inner = std::move(job)]() mutable {
      run_one(inner);
      generator_waiting_.fetch_sub(1, std::memory_order_acq_rel);
    };
  }
  {
    MutexLock lock(queue.mu);
    if (!queue.stopping && start_locked(queue)) {
      queue.jobs.push_back(std::move(job));
      queue.cv.notify_one();
      return;
    }
  }
  // Stopping (the workers may be gone), or no worker could start: the job still runs, here, so
  // its request is answered.
  run_one(job);
}

bool Pools::start_locked(Queue& queue) {
  if (!queue.threads.empty()) return true;
  try {
    for (std::size_t i = 0; i < queue.wanted; ++i) {
      queue.threads.emplace_back([&queue] { run(queue); });
    }
  } catch (const std::system_error& e) {
    spdlog::error("event=pool_thread_not_started threads={} wanted={} message={}",
                  queue.threads.size(), queue.wanted, internal::quote(e.what()));
  }
  return !queue.threads.empty();
}

std::size_t Pools::threads_started() const {
  std::size_t n = 0;
  for (const Queue* queue : {&generator_, &store_}) {
    MutexLock lock(queue->mu);
    n += queue->threads.size();
  }
  return n;
}

void Pools::stop() {
  std::call_once(stopped_, [this] {
    for (Queue* queue : {&generator_, &store_}) {
      // Joined outside the lock, which the workers need to finish.
      std::vector<std::thread> threads;
      {
        MutexLock lock(queue->mu);
        queue->stopping = true;
        threads.swap(queue->threads);
      }
      queue->cv.notify_all();
      for (std::thread& t : threads) t.join();
    }
  });
}

}  // namespace flurry::ops

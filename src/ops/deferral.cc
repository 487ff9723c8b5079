#include "flurry/ops/deferral.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "core/quote.h"

namespace flurry::ops {

Pools::Pools(std::size_t store_threads) {
  for (std::size_t i = 0; i < kGeneratorThreads; ++i) {
    generator_.threads.emplace_back([this] { run(generator_); });
  }
  for (std::size_t i = 0; i < std::max<std::size_t>(1, store_threads); ++i) {
    store_.threads.emplace_back([this] { run(store_); });
  }
}

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
      std::unique_lock lock(queue.mu);
      queue.cv.wait(lock, [&queue] { return queue.stopping || !queue.jobs.empty(); });
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
    std::lock_guard lock(queue.mu);
    if (!queue.stopping) {
      queue.jobs.push_back(std::move(job));
      queue.cv.notify_one();
      return;
    }
  }
  // Stopping: the workers may be gone. The job still runs, here, so its request is answered.
  run_one(job);
}

void Pools::stop() {
  std::call_once(stopped_, [this] {
    for (Queue* queue : {&generator_, &store_}) {
      {
        std::lock_guard lock(queue->mu);
        queue->stopping = true;
      }
      queue->cv.notify_all();
      for (std::thread& t : queue->threads) t.join();
      queue->threads.clear();
    }
  });
}

}  // namespace flurry::ops

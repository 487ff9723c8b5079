// One way to defer work that would block, for every transport.
//
// Transports call operations from threads that must not block (event loops, completion queues)
// with Blocking::kNever. Such a call either completes, or fails with UNAVAILABLE / WOULD_BLOCK
// having filled a Deferral: nothing was issued, nothing was answered. The transport then runs
// the SAME operation with the same typed request, Blocking::kAllowed and that Deferral, on
// the pool the Deferral names (Pools::post), and answers what that call returns. An operation
// run after the Deferral's deadline answers UNAVAILABLE at once (only what memory holds is
// still served), so a pool backed up behind a slow store never leaves a request hanging.
//
// A call with Blocking::kAllowed that was not deferred first passes a default Deferral.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>  // std::once_flag
#include <thread>
#include <vector>

#include "flurry/clock.h"
#include "flurry/mutex.h"
#include "flurry/status.h"

namespace flurry::ops {

enum class Pool {
  // The one blocking thread of the snowflake generator: clock waits, throttling at the layout's
  // rate limit, horizon writes. One thread, so requests waiting for it are answered in order.
  kGenerator,
  // The few threads that wait for segment stores (reads, writes, a tag's first range) and hold
  // back the answer to an unknown token.
  kStore,
};

struct Deferral {
  Pool pool = Pool::kGenerator;
  // A deferred call run after this answers UNAVAILABLE at once. MonoTime::max(): no deadline
  // (the generator bounds its own waits by max_wait).
  MonoTime deadline = MonoTime::max();
  // Set by the authorizer (authorizer.h): the credential was accepted before the call was
  // deferred, so the deferred call does not compare it again.
  bool admitted = false;
  // Set by the authorizer: an unknown token, refused with `refusal` no sooner than
  // `not_before` (the deferred call waits for it on the pool, never on the transport's thread).
  Status refusal;
  MonoTime not_before{};
};

// The blocking threads, owned by the composition root (`flurry serve`) and handed to every
// transport: plain std::thread workers running jobs in the order they were posted (per pool).
// A pool's threads start with the first job posted to it: a server that never defers (no
// segment tags, no throttling) runs none of them. Thread-safe.
class Pools {
 public:
  // One keeps the generator's waiting requests in arrival order: with several, throttled
  // requests raced for the rate budget and the p99 at saturation (count=1000, 50 connections)
  // doubled.
  static constexpr std::size_t kGeneratorThreads = 1;
  // Separate from the generator's, so that a store outage never delays snowflake IDs; several,
  // so that one slow store call does not hold the others.
  static constexpr std::size_t kDefaultStoreThreads = 4;

  // Starts no thread: each pool starts its threads at its first post().
  explicit Pools(std::size_t store_threads = kDefaultStoreThreads);
  ~Pools();  // stop()
  Pools(const Pools&) = delete;
  Pools& operator=(const Pools&) = delete;

  // Runs `job` on a thread of `pool` (starting the pool's threads the first time). A job must
  // not throw (what it throws is logged and dropped). After stop() began, jobs still run (on the
  // stopping thread if the workers are gone), and so does a job when no thread of its pool could
  // be started (logged), so a deferred request is always answered.
  void post(Pool pool, std::function<void()> job);

  // Jobs posted to the generator pool and not finished. While any wait, new snowflake ID
  // requests with Blocking::kNever are deferred without trying (Operations::next_ids), so they
  // queue behind the waiting ones instead of taking the rate budget from them: under throttling
  // requests are served first come, first served.
  [[nodiscard]] std::size_t generator_waiting() const noexcept {
    return generator_waiting_.load(std::memory_order_acquire);
  }

  // Threads running now, both pools together (for tests: none before the first post()).
  [[nodiscard]] std::size_t threads_started() const;

  // Runs every job posted so far, then joins the threads. Idempotent. Call after the transports
  // stopped posting.
  void stop();

 private:
  struct Queue {
    explicit Queue(std::size_t n) : wanted(n) {}
    const std::size_t wanted;  // threads started at the first post()
    mutable Mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> jobs FLURRY_GUARDED_BY(mu);
    bool stopping FLURRY_GUARDED_BY(mu) = false;
    std::vector<std::thread> threads FLURRY_GUARDED_BY(mu);
  };
  static void run(Queue& queue) FLURRY_EXCLUDES(queue.mu);
  // Starts the queue's threads unless they run. False when none could start.
  static bool start_locked(Queue& queue) FLURRY_REQUIRES(queue.mu);
  static void run_one(std::function<void()>& job) noexcept;

  Queue generator_{kGeneratorThreads};
  Queue store_;
  std::atomic<std::size_t> generator_waiting_{0};
  std::once_flag stopped_;
};

}  // namespace flurry::ops

// Clocks for tests: they stand still until told to move, so a test decides exactly when time
// passes and never sleeps.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <vector>

#include "flurry/clock.h"

namespace flurry::testing {

// Wall time: sleeping advances it to the deadline at once. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start) : now_(start.time_since_epoch().count()) {}

  [[nodiscard]] TimePoint now() const noexcept override {
    return TimePoint(Nanos(now_.load(std::memory_order_acquire)));
  }
  // Advances to the deadline (never backwards) and returns at once.
  void sleep_until(TimePoint deadline) noexcept override {
    const std::int64_t target = deadline.time_since_epoch().count();
    std::int64_t cur = now_.load(std::memory_order_acquire);
    while (cur < target && !now_.compare_exchange_weak(cur, target, std::memory_order_acq_rel)) {
    }
    sleeps_.fetch_add(1, std::memory_order_relaxed);
  }

  void set(TimePoint t) noexcept {
    now_.store(t.time_since_epoch().count(), std::memory_order_release);
  }
  // Moves the clock by `d`, which may be negative (a step backwards).
  void advance(Nanos d) noexcept { now_.fetch_add(d.count(), std::memory_order_acq_rel); }
  [[nodiscard]] long sleeps() const noexcept { return sleeps_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> now_;
  std::atomic<long> sleeps_{0};
};

// Monotonic time that moves only when the test moves it (advance, set). wait_until blocks until
// the fake time reaches the deadline or a stop is requested; it never looks at real time.
//
// Synchronisation, so that tests need no sleeps and no polling: a thread counts as *blocked*
// from the moment wait_until decides to wait (the deadline is ahead, no stop requested) until
// it is released. Releases happen synchronously: advance() and set() release every waiter whose
// deadline they reach before they return, and a waiter whose stop token is stopped is released
// before request_stop() returns. So after
//
//   clock.advance(100ms);
//   ASSERT_TRUE(clock.await_waiters(1));
//
// the one thread under test has woken, done its work and is blocked again (the count never
// includes a thread that is about to wake). await_waiters(n, ready) also waits for a condition
// that the code under test establishes before it blocks (e.g. "the renewal was counted"), to
// tell one wait from another.
//
// Thread safety: every member may be called from any thread at any time. The clock must outlive
// every wait_until call on it. Real time is read only by await_waiters, as a safety net against
// a test that would otherwise hang.
class FakeMonotonicClock final : public MonotonicClock {
 public:
  // Far from zero so that "now - something" never needs a negative time point.
  explicit FakeMonotonicClock(MonoTime start = MonoTime(std::chrono::hours(1000)))
      : now_(start.time_since_epoch().count()) {}
  ~FakeMonotonicClock() override = default;
  FakeMonotonicClock(const FakeMonotonicClock&) = delete;
  FakeMonotonicClock& operator=(const FakeMonotonicClock&) = delete;

  [[nodiscard]] MonoTime now() const noexcept override {
    return MonoTime(Nanos(now_.load(std::memory_order_acquire)));
  }

  // Returns false at once if a stop was requested, true at once if the deadline has been
  // reached; otherwise blocks until advance()/set() reaches the deadline (true) or the stop is
  // requested (false), whichever happens first.
  bool wait_until(MonoTime deadline, std::stop_token stop) noexcept override {
    Waiter w{deadline};
    {
      std::lock_guard lock(mu_);
      if (stop.stop_requested() || now() >= deadline) {
        ++completed_;
        ++version_;
        cv_.notify_all();
        return !stop.stop_requested();
      }
      blocked_.push_back(&w);
      ++version_;
    }
    cv_.notify_all();
    {
      // Runs inline if the stop was requested meanwhile. Never called with mu_ held: its
      // destructor waits for a callback running on another thread, which takes mu_.
      std::stop_callback on_stop(stop, [this, &w] {
        {
          std::lock_guard lock(mu_);
          release_locked(w, false);
        }
        cv_.notify_all();
      });
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&w] { return w.released; });
    }
    std::lock_guard lock(mu_);
    ++completed_;
    ++version_;
    cv_.notify_all();
    return w.reached;
  }

  // Moves the clock forward by `d` (>= 0: monotonic time never steps back) and releases the
  // waiters whose deadline it reaches.
  void advance(Nanos d) {
    if (d < Nanos(0)) throw std::invalid_argument("FakeMonotonicClock::advance: negative step");
    set(now() + d);
  }
  // Moves the clock forward to `t` (not before now()) and releases the waiters it reaches.
  void set(MonoTime t) {
    {
      std::lock_guard lock(mu_);
      if (t < now()) throw std::invalid_argument("FakeMonotonicClock::set: time went backwards");
      now_.store(t.time_since_epoch().count(), std::memory_order_release);
      for (Waiter* w : std::vector<Waiter*>(blocked_)) {
        if (w->deadline <= t) release_locked(*w, true);
      }
    }
    cv_.notify_all();
  }

  // Threads blocked in wait_until now.
  [[nodiscard]] std::size_t waiters() const {
    std::lock_guard lock(mu_);
    return blocked_.size();
  }
  // The earliest deadline of the blocked threads (MonoTime::max() for "no deadline"), or none.
  [[nodiscard]] std::optional<MonoTime> next_deadline() const {
    std::lock_guard lock(mu_);
    if (blocked_.empty()) return std::nullopt;
    MonoTime earliest = MonoTime::max();
    for (const Waiter* w : blocked_) earliest = std::min(earliest, w->deadline);
    return earliest;
  }
  // wait_until calls that have returned (for any reason).
  [[nodiscard]] std::uint64_t completed_waits() const {
    std::lock_guard lock(mu_);
    return completed_;
  }

  // Blocks until at least `n` threads are blocked in wait_until. False if that did not happen
  // within `real_timeout` of real time (the test has gone wrong: fail it rather than hang).
  [[nodiscard]] bool await_waiters(
      std::size_t n, std::chrono::milliseconds real_timeout = std::chrono::seconds(10)) const {
    return await_waiters(
        n, [] { return true; }, real_timeout);
  }
  // Blocks until `ready()` holds and, after it, at least `n` threads are blocked in wait_until.
  // ready() is called without the clock's lock (it may call anything, the clock included) and
  // evaluated again whenever a thread blocks, is released or returns from wait_until, so it
  // must become true before the thread under test blocks. False after `real_timeout`.
  [[nodiscard]] bool await_waiters(
      std::size_t n, const std::function<bool()>& ready,
      std::chrono::milliseconds real_timeout = std::chrono::seconds(10)) const {
    const auto give_up = std::chrono::steady_clock::now() + real_timeout;
    std::unique_lock lock(mu_);
    for (;;) {
      const std::uint64_t seen = version_;
      lock.unlock();
      const bool is_ready = ready();
      lock.lock();
      if (is_ready && blocked_.size() >= n) return true;
      if (!cv_.wait_until(lock, give_up, [&] { return version_ != seen; })) return false;
    }
  }

 private:
  struct Waiter {
    MonoTime deadline;
    bool released = false;
    bool reached = false;  // released by the clock reaching the deadline, not by a stop
  };

  // Requires mu_.
  void release_locked(Waiter& w, bool reached) {
    if (w.released) return;
    w.released = true;
    w.reached = reached;
    blocked_.erase(std::find(blocked_.begin(), blocked_.end(), &w));
    ++version_;
  }

  std::atomic<std::int64_t> now_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Waiter*> blocked_;  // guarded by mu_
  std::uint64_t completed_ = 0;   // guarded by mu_
  std::uint64_t version_ = 0;     // guarded by mu_; changes with blocked_ and completed_
};

}  // namespace flurry::testing

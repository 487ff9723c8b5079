// A clock for tests: it stands still until told to move, and sleeping advances it to the
// deadline at once. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>

#include "flurry/clock.h"

namespace flurry::testing {

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

}  // namespace flurry::testing

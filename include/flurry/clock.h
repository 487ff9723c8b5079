// Time as interfaces. Library code reads neither the system's wall clock nor its monotonic
// clock itself: it asks the Clock (wall time, which IDs carry) and the MonotonicClock (intervals:
// lease validity, timeouts, backoffs) it was given, so tests drive both with fakes
// (tests/testing/fake_clock.h) instead of sleeping. Two waits stay on real time, and neither
// decides anything: the generator's background thread wakes every horizon_window/4 to extend the
// horizon early (when it runs changes only how soon a write happens, never which IDs are issued;
// a call that reaches the horizon extends it itself), and the PostgreSQL session's poll() on its
// socket waits at most 50 ms before it reads the injected clock again (its deadline is that
// clock's).
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <stop_token>

namespace flurry {

// A point in wall-clock (UTC, Unix) time with nanosecond precision.
using TimePoint = std::chrono::sys_time<std::chrono::nanoseconds>;
using Nanos = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;

  // The current wall time. May step backwards (NTP, manual changes, VM migration).
  // Thread-safe. Must be cheap: the generator calls it on every reservation.
  [[nodiscard]] virtual TimePoint now() const noexcept = 0;

  // Blocks the calling thread until now() >= deadline (returns at once if already so).
  // Thread-safe.
  virtual void sleep_until(TimePoint deadline) noexcept = 0;
};

// The operating system's realtime clock.
//
// kCoarse reads CLOCK_REALTIME_COARSE (about 5 ns a read, a few milliseconds' resolution);
// kFine reads CLOCK_REALTIME (about 23 ns a read, nanosecond resolution). The generator's time
// field never runs ahead of the clock it reads by more than max_lead, so with the coarse clock
// it lags the true time by at most the coarse resolution and is never ahead of it by more than
// max_lead.
//
// Final, with now() inline, so that code holding a SystemClock (the generator finds out once,
// when it is created) reads the clock without an indirect call.
class SystemClock final : public Clock {
 public:
  enum class Kind { kCoarse, kFine };

  explicit SystemClock(Kind kind = Kind::kCoarse) noexcept;

  [[nodiscard]] TimePoint now() const noexcept override {
    timespec ts{};
    clock_gettime(clock_id_, &ts);
    return TimePoint(Nanos(static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec));
  }
  void sleep_until(TimePoint deadline) noexcept override;

  // A process-wide coarse system clock (never destroyed).
  [[nodiscard]] static SystemClock& coarse() noexcept;

 private:
  Kind kind_;
  int clock_id_;
};

// A point on a monotonic time line that only means something relative to other points of the
// same clock (nanoseconds since an arbitrary origin).
using MonoTime = std::chrono::time_point<std::chrono::steady_clock, Nanos>;

// Monotonic time: never steps back and does not follow changes of the wall clock. For measuring
// intervals only, never for the time inside IDs.
class MonotonicClock {
 public:
  virtual ~MonotonicClock() = default;

  // Thread-safe; cheap.
  [[nodiscard]] virtual MonoTime now() const noexcept = 0;

  // Blocks the calling thread until now() >= deadline or a stop is requested on `stop`,
  // whichever comes first. Returns true when the deadline was reached, false when stopped
  // (a stop requested before the call returns false at once). Thread-safe.
  virtual bool wait_until(MonoTime deadline, std::stop_token stop) noexcept = 0;

  // wait_until(now() + d, stop).
  bool wait_for(Nanos d, std::stop_token stop) noexcept {
    return wait_until(now() + d, std::move(stop));
  }
};

// The operating system's monotonic clock (CLOCK_MONOTONIC, via std::chrono::steady_clock).
class SteadyClock final : public MonotonicClock {
 public:
  [[nodiscard]] MonoTime now() const noexcept override;
  bool wait_until(MonoTime deadline, std::stop_token stop) noexcept override;

  // A process-wide instance (never destroyed).
  [[nodiscard]] static SteadyClock& instance() noexcept;
};

// The two clocks a component reads, passed together.
struct Clocks {
  Clock& wall;
  MonotonicClock& monotonic;

  // The coarse system wall clock and the steady clock.
  [[nodiscard]] static Clocks system() noexcept {
    return {SystemClock::coarse(), SteadyClock::instance()};
  }
};

}  // namespace flurry

// The wall clock as an interface. Library code never reads the system clock itself: it asks
// the Clock it was given, so tests can drive time with a fake.
#pragma once

#include <chrono>
#include <cstdint>

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

  // How far now() may lag the true time: the clock's reading granularity.
  [[nodiscard]] virtual Nanos resolution() const noexcept = 0;
};

// The operating system's realtime clock.
//
// kCoarse reads CLOCK_REALTIME_COARSE (about 5 ns a read, a few milliseconds' resolution);
// kFine reads CLOCK_REALTIME (about 23 ns a read, nanosecond resolution). The generator's time
// field never runs ahead of the clock it reads by more than max_lead, so with the coarse clock
// it lags the true time by at most resolution() and is never ahead of it by more than max_lead.
class SystemClock final : public Clock {
 public:
  enum class Kind { kCoarse, kFine };

  explicit SystemClock(Kind kind = Kind::kCoarse) noexcept;

  [[nodiscard]] TimePoint now() const noexcept override;
  void sleep_until(TimePoint deadline) noexcept override;
  [[nodiscard]] Nanos resolution() const noexcept override { return resolution_; }
  [[nodiscard]] Kind kind() const noexcept { return kind_; }

  // A process-wide coarse system clock (never destroyed).
  [[nodiscard]] static SystemClock& coarse() noexcept;

 private:
  Kind kind_;
  int clock_id_;
  Nanos resolution_;
};

}  // namespace flurry

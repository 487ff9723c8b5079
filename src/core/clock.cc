#include "flurry/clock.h"

#include <cerrno>
#include <condition_variable>
#include <ctime>

#include "flurry/mutex.h"

namespace flurry {
namespace {

TimePoint read(int clock_id) noexcept {
  timespec ts{};
  clock_gettime(clock_id, &ts);
  return TimePoint(Nanos(static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec));
}

timespec to_timespec(TimePoint t) noexcept {
  const std::int64_t ns = t.time_since_epoch().count();
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  if (ts.tv_nsec < 0) {
    ts.tv_nsec += 1'000'000'000;
    ts.tv_sec -= 1;
  }
  return ts;
}

}  // namespace

SystemClock::SystemClock(Kind kind) noexcept
    : kind_(kind), clock_id_(kind == Kind::kCoarse ? CLOCK_REALTIME_COARSE : CLOCK_REALTIME) {}

void SystemClock::sleep_until(TimePoint deadline) noexcept {
  // Sleep on the fine realtime clock (the only one clock_nanosleep takes), then, for the coarse
  // clock, in short steps until its next update reaches the deadline too.
  for (;;) {
    const TimePoint current = now();
    if (current >= deadline) return;
    if (kind_ == Kind::kFine || read(CLOCK_REALTIME) < deadline) {
      const timespec ts = to_timespec(deadline);
      while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
      }
    } else {
      const timespec step{0, 200'000};  // a fraction of a coarse tick
      nanosleep(&step, nullptr);
    }
  }
}

SystemClock& SystemClock::coarse() noexcept {
  static auto* clock = new SystemClock(Kind::kCoarse);
  return *clock;
}

MonoTime SteadyClock::now() const noexcept {
  return std::chrono::time_point_cast<Nanos>(std::chrono::steady_clock::now());
}

bool SteadyClock::wait_until(MonoTime deadline, std::stop_token stop) noexcept {
  // condition_variable_any wakes on a stop request; nothing else notifies it. It waits on the
  // Mutex itself (a BasicLockable), which `lock` holds on entry and again on return.
  Mutex mu;
  std::condition_variable_any cv;
  MutexLock lock(mu);
  cv.wait_until(mu, stop, deadline, [] { return false; });
  return !stop.stop_requested();
}

SteadyClock& SteadyClock::instance() noexcept {
  static auto* clock = new SteadyClock();
  return *clock;
}

}  // namespace flurry

// The activity history of GET /v1/status: how many IDs were issued in each of the last
// kIntervals seconds, per series (snowflake IDs, segment IDs, order numbers). It has no thread of
// its own: a periodic thread calls tick() (the composition root hangs it on the service's
// monitor, which looks every 250 ms), and tick() samples the counters once kInterval passed on
// the injected monotonic clock; the differences between two samples are kept in a ring per
// series.
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/mutex.h"

namespace flurry::ops {

// Running totals, read by the sampler (Operations::activity_counts).
struct ActivityCounts {
  std::uint64_t snowflake = 0;
  std::uint64_t segment = 0;
  std::uint64_t order_numbers = 0;
};

struct ActivitySeries {
  std::string_view name;           // "snowflake", "segment", "order_numbers"
  std::vector<std::uint64_t> ids;  // per interval, oldest first
};

struct ActivitySnapshot {
  std::chrono::milliseconds interval{1000};
  std::int64_t end_unix_ms = 0;  // wall clock at the end of the newest interval (0: none yet)
  std::array<ActivitySeries, 3> series;
};

class ActivityHistory {
 public:
  static constexpr std::size_t kIntervals = 300;
  static constexpr std::chrono::seconds kInterval{1};

  // `counts` is called by sample(), under the history's lock (it must be quick); the clocks
  // must outlive this.
  ActivityHistory(std::function<ActivityCounts()> counts, Clocks clocks);
  ActivityHistory(const ActivityHistory&) = delete;
  ActivityHistory& operator=(const ActivityHistory&) = delete;

  // The first call samples (remembering the counts); later ones sample when kInterval has
  // passed since the last sample was due. After a longer pause (no tick for several intervals)
  // the IDs of the whole pause count in one interval and the grid starts over.
  void tick();

  // One sample now: appends (counts now - counts at the last sample) to each series; the first
  // call only remembers the counts.
  void sample();

  [[nodiscard]] ActivitySnapshot read() const;

 private:
  void sample_locked() FLURRY_REQUIRES(mu_);

  std::function<ActivityCounts()> counts_;
  Clocks clocks_;
  mutable Mutex mu_;
  bool have_last_ FLURRY_GUARDED_BY(mu_) = false;
  MonoTime next_due_ FLURRY_GUARDED_BY(mu_) = {};
  ActivityCounts last_ FLURRY_GUARDED_BY(mu_) = {};
  std::int64_t end_unix_ms_ FLURRY_GUARDED_BY(mu_) = 0;
  std::array<std::deque<std::uint64_t>, 3> rings_ FLURRY_GUARDED_BY(mu_);
};

}  // namespace flurry::ops

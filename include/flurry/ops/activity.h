// The activity history of GET /v1/status: how many IDs were issued in each of the last
// kIntervals seconds, per series (snowflake IDs, segment IDs, order numbers). A thread of its
// own samples the counters once a second on the injected monotonic clock; the differences
// between two samples are kept in a ring per series.
//
// Thread-safe: read() may be called from any thread, concurrently with the sampling thread.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string_view>
#include <thread>
#include <vector>

#include "flurry/clock.h"
#include "flurry/status.h"

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

  // `counts` is called on the sampling thread (and by sample()); the clocks must outlive this.
  ActivityHistory(std::function<ActivityCounts()> counts, Clocks clocks);
  ~ActivityHistory();  // stop()
  ActivityHistory(const ActivityHistory&) = delete;
  ActivityHistory& operator=(const ActivityHistory&) = delete;

  // Takes the first sample and starts the thread that samples every kInterval.
  // RESOURCE_EXHAUSTED when the thread cannot be created.
  [[nodiscard]] Status start();
  // Joins the thread. Idempotent.
  void stop();

  // One sample: appends (counts now - counts at the last sample) to each series; the first call
  // only remembers the counts. The thread calls it; tests may call it without start().
  void sample();

  [[nodiscard]] ActivitySnapshot read() const;

 private:
  std::function<ActivityCounts()> counts_;
  Clocks clocks_;
  mutable std::mutex mu_;
  bool have_last_ = false;
  ActivityCounts last_{};
  std::int64_t end_unix_ms_ = 0;
  std::array<std::deque<std::uint64_t>, 3> rings_;
  std::jthread thread_;
};

}  // namespace flurry::ops

#include "ops/activity.h"

#include <utility>

namespace flurry::ops {

ActivityHistory::ActivityHistory(std::function<ActivityCounts()> counts, Clocks clocks)
    : counts_(std::move(counts)), clocks_(clocks) {}

void ActivityHistory::tick() {
  const MonoTime now = clocks_.monotonic.now();
  MutexLock lock(mu_);
  if (have_last_ && now < next_due_) return;
  sample_locked();
  // On a fixed grid, so that the looks' jitter does not shift the intervals; after a pause, a
  // new grid from now.
  next_due_ = now - next_due_ < kInterval ? next_due_ + kInterval : now + kInterval;
}

void ActivityHistory::sample() {
  MutexLock lock(mu_);
  sample_locked();
}

void ActivityHistory::sample_locked() {
  const ActivityCounts now = counts_();
  const std::int64_t unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clocks_.wall.now().time_since_epoch())
          .count();
  if (have_last_) {
    const std::array<std::uint64_t, 3> deltas = {now.snowflake - last_.snowflake,
                                                 now.segment - last_.segment,
                                                 now.order_numbers - last_.order_numbers};
    for (std::size_t i = 0; i < rings_.size(); ++i) {
      if (rings_[i].size() == kIntervals) rings_[i].pop_front();
      rings_[i].push_back(deltas[i]);
    }
    end_unix_ms_ = unix_ms;
  }
  have_last_ = true;
  last_ = now;
}

ActivitySnapshot ActivityHistory::read() const {
  ActivitySnapshot out;
  out.interval = kInterval;
  constexpr std::array<std::string_view, 3> kNames = {"snowflake", "segment", "order_numbers"};
  MutexLock lock(mu_);
  out.end_unix_ms = end_unix_ms_;
  for (std::size_t i = 0; i < rings_.size(); ++i) {
    out.series[i].name = kNames[i];
    out.series[i].ids.assign(rings_[i].begin(), rings_[i].end());
  }
  return out;
}

}  // namespace flurry::ops

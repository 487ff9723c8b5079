#include "flurry/ops/activity.h"

#include <system_error>
#include <utility>

namespace flurry::ops {

ActivityHistory::ActivityHistory(std::function<ActivityCounts()> counts, Clocks clocks)
    : counts_(std::move(counts)), clocks_(clocks) {}

ActivityHistory::~ActivityHistory() {
  stop();
}

Status ActivityHistory::start() {
  sample();
  try {
    thread_ = std::jthread([this](std::stop_token stop) {
      // Deadlines on a fixed grid, so that a slow sample does not shift the ones after it.
      MonoTime next = clocks_.monotonic.now() + kInterval;
      while (clocks_.monotonic.wait_until(next, stop)) {
        sample();
        next += kInterval;
      }
    });
  } catch (const std::system_error& e) {
    return Status(StatusCode::kResourceExhausted,
                  std::string("cannot start the activity sampler: ") + e.what());
  }
  return OkStatus();
}

void ActivityHistory::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void ActivityHistory::sample() {
  const ActivityCounts now = counts_();
  const std::int64_t unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clocks_.wall.now().time_since_epoch())
          .count();
  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  out.end_unix_ms = end_unix_ms_;
  for (std::size_t i = 0; i < rings_.size(); ++i) {
    out.series[i].name = kNames[i];
    out.series[i].ids.assign(rings_[i].begin(), rings_[i].end());
  }
  return out;
}

}  // namespace flurry::ops

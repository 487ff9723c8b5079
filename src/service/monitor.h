// Internal: the service's monitor. A thread of its own looks at the current node session every
// 250 ms (on the monotonic clock): it logs what changed (lease suspended, recovered or lost,
// failed renewals and horizon writes, clock rollbacks and steps, throttling, readiness) and
// records it in the service's event ring (flurry/server/event_log.h), and when the lease is lost
// for good, or the registry went backwards under it, it has the service retire the session and
// claims a node ID again, retrying with a backoff (1 s doubling, at most the lease TTL) until it
// succeeds or the service stops.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <thread>

#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/lease_keeper.h"
#include "flurry/node_session.h"
#include "flurry/status.h"
#include "service/event_log.h"

namespace flurry::service {

// What the monitor needs from the service that owns the sessions. Called from the monitor thread
// only.
class SessionOwner {
 public:
  virtual ~SessionOwner() = default;
  // The session requests use now (valid until the owner is stopped).
  [[nodiscard]] virtual NodeSession& current_session() = 0;
  // Stops issuing under `lost` and lets go of it, because of `why` (LEASE_LOST: another owner
  // has the node ID; REGISTRY_REGRESSED: the registry went backwards); from now on readiness says
  // a node ID is being claimed again. A lease the registry still knows as ours is released.
  virtual void retire(NodeSession& lost, const Status& why) = 0;
  // One attempt to claim a node ID and start a session (published on success). A stop request
  // on `stop` interrupts it.
  [[nodiscard]] virtual Status claim_again(std::stop_token stop) = 0;
  // Why the service is not ready while claiming again.
  virtual void set_reclaim_status(Status status) = 0;
  // The registry was found behind what this host remembered (counted once per event).
  virtual void count_regression() = 0;
  // Hands the service's readiness to whoever follows it (Service::set_readiness_listener): after
  // every look and each step of a re-claim.
  virtual void report_readiness() = 0;
};

// Logs the changes of one session's state, rate-limiting repeated failures to a line a second
// on the monotonic clock, and records them in `events` (event_log.h). It also detects steps of
// the wall clock: at each look it compares how far the wall clock and the monotonic clock moved
// since the last one; a difference of kClockStep or more (plus how long reading the clocks took,
// so that a preempted read is no step) is a clock_step event. Not thread-safe
// (the monitor thread's), except clock_steps() and throttling(), which any thread may read.
class SessionLog {
 public:
  // The smallest difference between the wall and monotonic clocks' moves counted as a step.
  static constexpr std::chrono::milliseconds kClockStep{50};
  // Throttling ends after this long without a throttle wait.
  static constexpr std::chrono::seconds kThrottleQuiet{1};

  SessionLog(Clocks clocks, const Layout& layout, std::chrono::milliseconds max_lead,
             EventLog& events)
      : clock_(clocks.monotonic),
        wall_(clocks.wall),
        layout_(layout),
        max_lead_(max_lead),
        events_(events) {}

  // Starts over with `session` (after a start or a re-claim).
  void reset(const NodeSession& session);
  // Logs what changed since the last call. Returns true when the session must be replaced: its
  // lease is lost for good (the keeper's renewal or a horizon write found it gone), or the
  // registry went backwards under it. Calls
  // owner.count_regression() for a lost lease whose reason is REGISTRY_REGRESSED.
  [[nodiscard]] bool observe(const NodeSession& session, SessionOwner& owner,
                             std::string_view registry);

  // Wall-clock steps seen so far.
  [[nodiscard]] std::uint64_t clock_steps() const noexcept {
    return clock_steps_.load(std::memory_order_relaxed);
  }
  // Throttle waits grew within the last kThrottleQuiet.
  [[nodiscard]] bool throttling() const noexcept {
    return throttling_.load(std::memory_order_relaxed);
  }

 private:
  void log_lease(const NodeSession& session, SessionOwner& owner, std::string_view registry);
  void log_generator(const NodeSession& session);
  void look_at_clocks(const NodeSession& session);
  void follow_throttling(const NodeSession& session, const GeneratorStats& s, MonoTime now);

  MonotonicClock& clock_;
  Clock& wall_;
  const Layout& layout_;
  const std::chrono::milliseconds max_lead_;
  EventLog& events_;
  TimePoint last_wall_{};
  MonoTime last_mono_{};
  Nanos last_uncertainty_{0};  // how far apart the last look's two monotonic reads were
  std::atomic<std::uint64_t> clock_steps_{0};
  std::atomic<bool> throttling_{false};
  MonoTime throttling_since_{};
  MonoTime last_throttle_wait_{};
  std::uint64_t throttle_waits_at_start_ = 0;
  std::string last_lease_state_;
  std::string last_health_state_;
  GeneratorStats last_stats_{};
  std::uint64_t logged_failures_ = 0;
  std::uint64_t logged_horizon_failures_ = 0;
  MonoTime last_failure_log_{};
  MonoTime last_horizon_log_{};
};

class Monitor {
 public:
  // `owner`, `clocks`, `layout` and `events` outlive the monitor. `lease_ttl` caps the re-claim
  // backoff; `max_lead` tells a clock step absorbed from one beyond it.
  Monitor(SessionOwner& owner, Clocks clocks, const Layout& layout,
          std::chrono::milliseconds max_lead, std::chrono::milliseconds lease_ttl,
          std::string registry, EventLog& events)
      : owner_(owner),
        clock_(clocks.monotonic),
        events_(events),
        log_(clocks, layout, max_lead, events),
        lease_ttl_(lease_ttl),
        registry_(std::move(registry)) {}
  ~Monitor();  // stop()
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // Starts the thread. RESOURCE_EXHAUSTED when it cannot be created.
  [[nodiscard]] Status start();
  // Interrupts a re-claim in progress and joins the thread. Idempotent.
  void stop();

  // SessionLog's, readable from any thread.
  [[nodiscard]] std::uint64_t clock_steps() const noexcept { return log_.clock_steps(); }
  [[nodiscard]] bool throttling() const noexcept { return log_.throttling(); }

 private:
  void loop(std::stop_token stop);
  // Retires `lost` and claims a node ID again until it succeeds or `stop` is requested.
  void reclaim(NodeSession& lost, std::stop_token stop);

  SessionOwner& owner_;
  MonotonicClock& clock_;
  EventLog& events_;
  SessionLog log_;
  const std::chrono::milliseconds lease_ttl_;
  const std::string registry_;
  std::jthread thread_;
};

// The status readiness and issue() report while a node ID is claimed again after `node`'s lease
// was lost: UNAVAILABLE / RECLAIMING_NODE (retryable); `why` (LEASE_LOST or REGISTRY_REGRESSED)
// picks the words.
[[nodiscard]] Status reclaiming(std::uint64_t node, std::string_view detail,
                                Reason why = Reason::kLeaseLost);

}  // namespace flurry::service

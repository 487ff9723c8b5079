#include "monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <system_error>
#include <utility>

#include "core/quote.h"

namespace flurry::service {

using internal::quote;
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kPeriod{250};
constexpr std::chrono::seconds kLogEvery{1};

// What a change of state is judged by: code and reason (messages carry changing numbers).
std::string state_key(const Status& st) {
  if (st.ok()) return "";
  return std::string(to_string(st.code())) + "/" + std::string(to_string(st.reason()));
}

std::int64_t ms_of(Nanos d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

std::int64_t as_int(std::uint64_t v) {
  return static_cast<std::int64_t>(v);
}

}  // namespace

Status reclaiming(std::uint64_t node, std::string_view detail, Reason why) {
  return Status(Reason::kReclaimingNode,
                "the lease on node " + std::to_string(node) +
                    (why == Reason::kRegistryRegressed ? " was lost: the registry went backwards"
                                                       : " was lost to another owner") +
                    "; claiming a node ID again" +
                    (detail.empty() ? std::string() : ": " + std::string(detail)));
}

void SessionLog::reset(const NodeSession& session) {
  last_lease_state_.clear();
  last_stats_ = session.generator().stats();
  logged_failures_ = session.keeper().stats().renewal_failures;
  logged_horizon_failures_ = last_stats_.horizon_failures;
  last_mono_ = clock_.now();
  last_wall_ = wall_.now();
  last_uncertainty_ = clock_.now() - last_mono_;
}

void SessionLog::look_at_clocks(const NodeSession& session) {
  // The wall clock read between two monotonic reads: a thread preempted between the reads (a
  // loaded host) would otherwise see a step of the preemption's length. What the two reads are
  // apart bounds the error of this look, and the last look's bounds that of the previous one.
  const MonoTime before = clock_.now();
  const TimePoint wall = wall_.now();
  const MonoTime after = clock_.now();
  const MonoTime mono = before + (after - before) / 2;
  const Nanos uncertainty = after - before;
  const Nanos step = (wall - last_wall_) - (mono - last_mono_);
  const Nanos threshold = Nanos(kClockStep) + uncertainty + last_uncertainty_;
  last_wall_ = wall;
  last_mono_ = mono;
  last_uncertainty_ = uncertainty;
  if (step < threshold && step > -threshold) return;
  clock_steps_.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t step_ms = ms_of(step);
  const double lead_ms = std::chrono::duration<double, std::milli>(
                             layout_.unit() * session.generator().stats().lead_ticks)
                             .count();
  std::string outcome;
  std::string message;
  if (step_ms > 0) {
    outcome = "forward";
    message = "the wall clock stepped forward " + std::to_string(step_ms) +
              " ms; IDs follow it (their time field jumps ahead)";
  } else if (-step <= max_lead_) {
    outcome = "absorbed";
    message = "the wall clock stepped back " + std::to_string(-step_ms) +
              " ms; absorbed: IDs run up to that far ahead of it (max_lead " +
              std::to_string(max_lead_.count()) + " ms)";
  } else {
    outcome = "beyond_max_lead";
    message = "the wall clock stepped back " + std::to_string(-step_ms) + " ms, beyond max_lead " +
              std::to_string(max_lead_.count()) + " ms: the rollback policy acts";
  }
  events_.record(EventLevel::kWarning, "clock_step", session.node(), std::move(message),
                 {{"step_ms", step_ms},
                  {"lead_ms", lead_ms},
                  {"max_lead_ms", static_cast<std::int64_t>(max_lead_.count())},
                  {"outcome", outcome}});
}

void SessionLog::follow_throttling(const NodeSession& session, const GeneratorStats& s,
                                   MonoTime now) {
  const bool waited = s.throttle_waits > last_stats_.throttle_waits;
  if (waited) last_throttle_wait_ = now;
  if (waited && !throttling_.load(std::memory_order_relaxed)) {
    throttling_.store(true, std::memory_order_relaxed);
    throttling_since_ = now;
    throttle_waits_at_start_ = last_stats_.throttle_waits;
    const std::uint64_t waits = s.throttle_waits - last_stats_.throttle_waits;
    events_.record(EventLevel::kInfo, "throttling_started", session.node(),
                   "requests wait for the next tick: demand is above the layout's rate",
                   {{"waits", as_int(waits)}});
  } else if (!waited && throttling_.load(std::memory_order_relaxed) &&
             now - last_throttle_wait_ >= kThrottleQuiet) {
    throttling_.store(false, std::memory_order_relaxed);
    const std::int64_t duration_ms = ms_of(last_throttle_wait_ - throttling_since_);
    const std::uint64_t waits = s.throttle_waits - throttle_waits_at_start_;
    events_.record(EventLevel::kInfo, "throttling_ended", session.node(),
                   "no throttle wait for 1 s; throttling lasted " + std::to_string(duration_ms) +
                       " ms with " + std::to_string(waits) + " waits",
                   {{"duration_ms", duration_ms}, {"waits", as_int(waits)}});
  }
}

bool SessionLog::observe(const NodeSession& session, SessionOwner& owner,
                         std::string_view registry) {
  look_at_clocks(session);
  log_lease(session, owner, registry);
  log_generator(session);
  const Status health = session.generator().health();
  const std::string health_state = state_key(health);
  if (health_state != last_health_state_) {
    if (health.ok()) {
      spdlog::info("event=ready node={}", session.node());
      events_.record(EventLevel::kInfo, "ready", session.node(), "ready: IDs can be issued",
                     {{"reason", std::string()}, {"message", std::string()}},
                     EventLog::Line::kAlreadyLogged);
    } else {
      spdlog::warn("event=not_ready node={} {}", session.node(), describe(health));
      events_.record(
          EventLevel::kWarning, "not_ready", session.node(), "not ready: " + health.message(),
          {{"reason", std::string(to_string(health.reason()))}, {"message", health.message()}},
          EventLog::Line::kAlreadyLogged);
    }
    last_health_state_ = health_state;
  }
  // A horizon write may learn first that the lease is gone (the registry named another owner,
  // or went backwards under the same token while renewals still succeed): that is proof enough,
  // the node ID is claimed again without waiting for the keeper's next renewal.
  return session.keeper().stats().lost || is_lease_gone(health);
}

void SessionLog::log_lease(const NodeSession& session, SessionOwner& owner,
                           std::string_view registry) {
  const std::uint64_t node = session.node();
  const LeaseKeeperStats k = session.keeper().stats();
  const Status lease = session.keeper().status();
  const MonoTime now = clock_.now();
  // Failed renewals are retried quickly: one line a second at most, with the count.
  if (k.renewal_failures > logged_failures_ && now - last_failure_log_ >= kLogEvery) {
    spdlog::warn("event=lease_renewal_failed node={} failures={} total_failures={} remaining_ms={}",
                 node, k.renewal_failures - logged_failures_, k.renewal_failures,
                 k.remaining.count());
    logged_failures_ = k.renewal_failures;
    last_failure_log_ = now;
  }
  const std::string lease_state = state_key(lease);
  if (lease_state == last_lease_state_) return;
  last_lease_state_ = lease_state;
  constexpr EventLog::Line kLogged = EventLog::Line::kAlreadyLogged;
  const std::string reason(to_string(lease.reason()));
  if (lease.ok()) {
    spdlog::info("event=lease_recovered node={} remaining_ms={}", node, k.remaining.count());
    events_.record(EventLevel::kInfo, "lease_recovered", node,
                   "the lease was renewed again; issuing resumes",
                   {{"remaining_ms", static_cast<std::int64_t>(k.remaining.count())}}, kLogged);
  } else if (k.lost && lease.reason() == Reason::kRegistryRegressed) {
    owner.count_regression();
    spdlog::error("event=registry_regressed node={} token={} registry={} {}", node,
                  session.lease().token, quote(registry, 1024), describe(lease));
    events_.record(EventLevel::kError, "registry_regressed", node, lease.message(),
                   {{"token", as_int(session.lease().token)}, {"registry", std::string(registry)}},
                   kLogged);
  } else if (k.lost) {
    spdlog::error("event=lease_lost node={} {}", node, describe(lease));
    events_.record(EventLevel::kError, "lease_lost", node, lease.message(), {{"reason", reason}},
                   kLogged);
  } else {
    spdlog::warn("event=lease_suspended node={} {}", node, describe(lease));
    events_.record(
        EventLevel::kWarning, "lease_suspended", node, lease.message(),
        {{"remaining_ms", static_cast<std::int64_t>(k.remaining.count())}, {"reason", reason}},
        kLogged);
  }
}

void SessionLog::log_generator(const NodeSession& session) {
  const std::uint64_t node = session.node();
  const GeneratorStats s = session.generator().stats();
  const MonoTime now = clock_.now();
  if (s.horizon_failures > logged_horizon_failures_ && now - last_horizon_log_ >= kLogEvery) {
    spdlog::warn("event=horizon_save_failed node={} failures={} total_failures={}", node,
                 s.horizon_failures - logged_horizon_failures_, s.horizon_failures);
    events_.record(EventLevel::kWarning, "horizon_save_failed", node,
                   "horizon writes to the registry are failing",
                   {{"failures", as_int(s.horizon_failures - logged_horizon_failures_)}},
                   EventLog::Line::kAlreadyLogged);
    logged_horizon_failures_ = s.horizon_failures;
    last_horizon_log_ = now;
  }
  if (s.rollback_waits > last_stats_.rollback_waits) {
    const std::uint64_t count = s.rollback_waits - last_stats_.rollback_waits;
    spdlog::warn("event=clock_rollback node={} outcome=wait count={}", node, count);
    events_.record(EventLevel::kWarning, "clock_rollback_waited", node,
                   std::to_string(count) + " request(s) waited for a clock that stepped back",
                   {{"count", as_int(count)}}, EventLog::Line::kAlreadyLogged);
  }
  if (s.rollback_failures > last_stats_.rollback_failures) {
    const std::uint64_t count = s.rollback_failures - last_stats_.rollback_failures;
    spdlog::warn("event=clock_rollback node={} outcome=fail count={}", node, count);
    events_.record(EventLevel::kError, "clock_rollback_refused", node,
                   std::to_string(count) +
                       " request(s) refused CLOCK_BEHIND: the clock stepped back beyond what the "
                       "rollback policy waits for",
                   {{"count", as_int(count)}}, EventLog::Line::kAlreadyLogged);
  }
  if (s.clock_switches > last_stats_.clock_switches) {
    spdlog::warn("event=clock_rollback node={} outcome=clock_switch generation={}", node,
                 s.generation);
    events_.record(
        EventLevel::kWarning, "clock_generation_switched", node,
        "the clock stepped back: switched to clock generation " + std::to_string(s.generation),
        {{"generation", as_int(s.generation)}}, EventLog::Line::kAlreadyLogged);
  }
  follow_throttling(session, s, now);
  if (s.throttle_waits > last_stats_.throttle_waits) {
    spdlog::debug("event=throttled node={} count={}", node,
                  s.throttle_waits - last_stats_.throttle_waits);
  }
  if (s.horizon_saves > last_stats_.horizon_saves) {
    spdlog::debug(
        "event=horizon_saved node={} saves={} ahead_ms={}", node,
        s.horizon_saves - last_stats_.horizon_saves,
        std::chrono::duration_cast<milliseconds>(layout_.unit() * s.horizon_ahead_ticks).count());
  }
  last_stats_ = s;
}

Monitor::~Monitor() {
  stop();
}

Status Monitor::start() {
  log_.reset(owner_.current_session());
  try {
    thread_ = std::jthread([this](std::stop_token stop) { loop(std::move(stop)); });
  } catch (const std::system_error& e) {
    return Status(StatusCode::kResourceExhausted,
                  std::string("cannot start the monitor thread: ") + e.what());
  }
  return OkStatus();
}

void Monitor::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void Monitor::loop(std::stop_token stop) {
  while (clock_.wait_for(kPeriod, stop)) {
    try {
      NodeSession& session = owner_.current_session();
      if (log_.observe(session, owner_, registry_)) reclaim(session, stop);
      owner_.report_readiness();
    } catch (const std::exception& e) {
      spdlog::error("event=monitor_error message={}", quote(e.what()));
    }
  }
}

void Monitor::reclaim(NodeSession& lost, std::stop_token stop) {
  const std::uint64_t old_node = lost.node();
  const bool keeper_lost = lost.keeper().stats().lost;
  const Status why = keeper_lost ? lost.keeper().status() : lost.generator().health();
  if (!keeper_lost) {
    // A horizon write learnt it first: SessionLog saw no lost lease, so the event is recorded
    // here (the log line is the service's event=lease_reclaiming).
    if (why.reason() == Reason::kRegistryRegressed) {
      events_.record(
          EventLevel::kError, "registry_regressed", old_node, why.message(),
          {{"token", static_cast<std::int64_t>(lost.lease().token)}, {"registry", registry_}},
          EventLog::Line::kAlreadyLogged);
    } else {
      events_.record(EventLevel::kError, "lease_lost", old_node, why.message(),
                     {{"reason", std::string(to_string(why.reason()))}},
                     EventLog::Line::kAlreadyLogged);
    }
  }
  owner_.retire(lost, why);
  owner_.report_readiness();

  const milliseconds cap = std::max(lease_ttl_, milliseconds(1));
  milliseconds backoff = std::min(milliseconds(1000), cap);
  std::string last_failure;
  for (std::uint64_t attempt = 1; !stop.stop_requested(); ++attempt) {
    const Status st = owner_.claim_again(stop);
    if (st.ok()) {
      NodeSession& session = owner_.current_session();
      log_.reset(session);
      spdlog::info("event=lease_reclaimed old_node={} new_node={} token={} attempts={}", old_node,
                   session.node(), session.lease().token, attempt);
      events_.record(EventLevel::kInfo, "lease_reclaimed", session.node(),
                     "claimed node " + std::to_string(session.node()) + " after losing node " +
                         std::to_string(old_node),
                     {{"old_node", as_int(old_node)},
                      {"new_node", as_int(session.node())},
                      {"token", as_int(session.lease().token)},
                      {"attempts", as_int(attempt)}},
                     EventLog::Line::kAlreadyLogged);
      return;
    }
    // One line per kind of failure, not one per attempt.
    const std::string key = state_key(st);
    const auto level = key != last_failure ? spdlog::level::warn : spdlog::level::debug;
    spdlog::log(level, "event=lease_reclaim_failed old_node={} attempt={} retry_ms={} {}", old_node,
                attempt, backoff.count(), describe(st));
    if (key != last_failure) {
      events_.record(
          EventLevel::kWarning, "lease_reclaim_failed", old_node, st.message(),
          {{"attempt", as_int(attempt)}, {"reason", std::string(to_string(st.reason()))}},
          EventLog::Line::kAlreadyLogged);
    }
    last_failure = key;
    owner_.set_reclaim_status(reclaiming(
        old_node, "attempt " + std::to_string(attempt) + " failed: " + st.message(), why.reason()));
    if (!clock_.wait_for(backoff, stop)) return;
    backoff = std::min(backoff * 2, cap);
  }
}

}  // namespace flurry::service

#include "flurry/node_session.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/numbers.h"
#include "core/quote.h"
#include "flurry/timefmt.h"

namespace flurry {
namespace {

using internal::quote;
using std::chrono::milliseconds;
using Level = SessionEventLevel;

}  // namespace

void NodeSession::log(SessionEventLevel level, const std::string& line) const {
  if (context_.log) context_.log(level, line);
}

Result<std::unique_ptr<NodeSession>> NodeSession::open(const SessionContext& context,
                                                       std::stop_token stop) {
  HostNodeGuard guard;
  const MonoTime claiming = context.clocks.monotonic.now();
  Result<Claim> claim =
      context.host_guard
          ? claim_with_host_guard(
                context.registry, context.owner, context.floor.host(), context.layout, guard, 8,
                [&context](const Status& st) {
                  if (context.log)
                    context.log(Level::kWarning, "event=node_in_use " + describe(st));
                })
          : context.registry.claim(context.owner, context.layout.node_count());
  if (!claim.ok()) return claim.status();
  std::unique_ptr<NodeSession> session(new NodeSession(context));
  session->lease_ = claim->lease;
  session->guard_ = std::move(guard);
  // How long the registry took to hand out a node ID (the fleet harness's claim latency; the wait
  // for the clock that may follow is reported by its own events).
  const auto claim_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      context.clocks.monotonic.now() - claiming);
  session->log(Level::kInfo, "event=lease_claimed node=" + std::to_string(claim->lease.node) +
                                 " token=" + std::to_string(claim->lease.token) +
                                 " owner=" + quote(context.owner) +
                                 " inherited=" + (claim->inherited.has_value() ? "true" : "false") +
                                 " claim_ms=" + std::to_string(claim_ms.count()));
  if (Status st = session->start(std::move(claim).value(), std::move(stop)); !st.ok()) {
    session->shut_down(false, "start");
    return st;
  }
  return session;
}

NodeSession::~NodeSession() {
  shut_down(false, "destroy");
}

Status NodeSession::start(Claim claim, std::stop_token stop) {
  const std::uint64_t node = lease_.node;
  // Never below what this process or host saved for the node, whatever the registry says.
  Result<std::optional<HorizonRegression>> regression = context_.floor.raise(claim);
  if (!regression.ok()) {
    return regression.status().with_prefix("cannot start node " + std::to_string(node));
  }
  if (*regression && context_.on_regression) context_.on_regression(**regression);
  inherited_ = claim.inherited;
  store_ =
      std::make_unique<LeasedHorizonStore>(context_.registry, std::move(claim), &context_.floor);

  GeneratorOptions generator_options = context_.generator;
  generator_options.node = node;
  Result<std::unique_ptr<Generator>> g =
      Generator::create(context_.layout, generator_options, context_.clocks.wall, *store_);
  if (!g.ok()) {
    return g.status().with_prefix("cannot start the generator for node " + std::to_string(node));
  }
  generator_ = std::move(g).value();

  // The lease keeper runs while the start may still wait for the clock.
  keeper_ = std::make_unique<LeaseKeeper>(context_.registry, lease_, *generator_,
                                          context_.clocks.monotonic, context_.keeper);
  if (Status st = keeper_->start(); !st.ok()) return st;

  const MonoTime wait_began = context_.clocks.monotonic.now();
  if (Status st = wait_for_clock(std::move(stop)); !st.ok()) return st;
  waited_ = context_.clocks.monotonic.now() - wait_began;
  (void)generator_->maintain();  // extend the horizon now rather than on the first request
  return OkStatus();
}

Status NodeSession::wait_for_clock(std::stop_token stop) {
  const GeneratorOptions& options = context_.generator;
  const std::uint64_t node = lease_.node;
  const Nanos unit = context_.layout.unit();
  const Nanos crash_cost = options.horizon_window + options.max_lead + unit;
  const Nanos wait_limit = crash_cost + options.max_wait;
  const std::string policy(to_string(options.rollback));
  bool announced = false;
  bool switched = false;
  for (;;) {
    Status health = generator_->health();
    if (health.ok()) {
      if (announced) {
        log(Level::kInfo,
            "event=start_resumed node=" + std::to_string(node) + " reason=clock_caught_up");
      }
      return OkStatus();
    }
    if (health.reason() != Reason::kClockBehind) {
      return health.with_prefix("cannot start node " + std::to_string(node));
    }
    const Nanos gap = unit * generator_->stats().lead_ticks;
    const std::string why = "the horizon node " + std::to_string(node) + " inherited lies " +
                            internal::millis_text(gap) + " ahead of the clock";
    if (gap > crash_cost && options.rollback == RollbackPolicy::kClock && !switched) {
      // Switch clock generation now (one ID is spent on it), so the node is ready at once.
      switched = true;
      Result<std::uint64_t> id = generator_->next();
      if (!id.ok()) return id.status().with_prefix("cannot start: " + why);
      log(Level::kWarning, "event=clock_switch node=" + std::to_string(node) +
                               " generation=" + std::to_string(generator_->stats().generation) +
                               " reason=" + quote(why, 1024));
      continue;
    }
    if (gap > crash_cost && options.rollback == RollbackPolicy::kFail) {
      return Status(Reason::kClockBehind,
                    "refusing to start: " + why +
                        ", more than a crash explains (horizon_window_ms + max_lead_ms); "
                        "rollback = fail. Wait until the clock has caught up, or use "
                        "rollback = wait or clock");
    }
    if (gap > wait_limit || switched) {
      return Status(Reason::kClockBehind,
                    "refusing to start: " + why + "; rollback = " + policy + " waits at most " +
                        internal::millis_text(wait_limit) +
                        " (horizon_window_ms + max_lead_ms + max_wait_ms) at start");
    }
    const Nanos wait = gap - options.max_lead;
    if (!announced) {
      announced = true;
      log(Level::kWarning, "event=start_delayed node=" + std::to_string(node) +
                               " wait_ms=" + std::to_string(internal::to_millis(wait)) +
                               " rollback=" + policy + " reason=" + quote(why, 1024));
    }
    // The wall clock catches up with the horizon; re-check often, the monotonic clock paces it.
    if (!context_.clocks.monotonic.wait_for(
            std::clamp<Nanos>(wait, milliseconds(1), milliseconds(100)), stop)) {
      return Status(StatusCode::kCancelled,
                    "the start was interrupted while waiting for the clock");
    }
  }
}

void NodeSession::shut_down(bool lease_lost, std::string_view when) {
  if (retired_) return;
  retired_ = true;
  const std::uint64_t node = lease_.node;
  if (lease_lost && keeper_) keeper_->stop();
  if (generator_) {
    if (Status st = generator_->close(); !st.ok()) {
      if (lease_lost || st.reason() == Reason::kRegistryRegressed) {
        log(Level::kInfo, "event=generator_closed node=" + std::to_string(node) +
                              " horizon_saved=false note=\"expected: the lease is lost or the "
                              "registry went backwards\" " +
                              describe(st));
      } else {
        log(Level::kError, "event=horizon_save_failed node=" + std::to_string(node) +
                               " when=" + std::string(when) + " " + describe(st));
      }
    }
  }
  if (keeper_) keeper_->stop();
  guard_.release();  // nothing issues as the node from here on
  if (lease_lost) return;
  if (Status st = context_.registry.release(lease_); !st.ok()) {
    log(Level::kError,
        "event=lease_release_failed node=" + std::to_string(node) + " " + describe(st));
  } else if (when == "stop") {
    log(Level::kInfo, "event=lease_released node=" + std::to_string(node));
  }
}

}  // namespace flurry

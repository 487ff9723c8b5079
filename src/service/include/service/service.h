// The ID service without a transport: the node registry, the node's lease, the leased horizon
// store, the generator and the lease keeper, wired together from typed ServiceOptions. The HTTP
// server (and later gRPC) only translate requests into calls on it.
//
// Life cycle: Service::create(), start(), serve calls from any number of threads, stop(),
// destroy.
//
// start():  opens the registry (open_registry.h), claims a node ID (owner "<hostname>:<pid>")
//           and starts a node session on it (flurry/node_session.h): the generator above the
//           inherited horizon, raised to this host's memory of the node, and the lease keeper.
//           When the clock is behind the inherited horizon the start is delayed or refused,
//           never silently continued: a gap a crash explains (horizon_window + max_lead) is
//           waited out; a larger one is a clock step back, handled by the rollback policy
//           (wait up to max_wait more, fail, or switch clock generation). Every delay is logged.
// Lease lost: when the lease cannot be renewed in time the keeper suspends the generator before
//           the lease could be given to anyone else (issue() and readiness() fail with
//           UNAVAILABLE / LEASE_EXPIRING). When the registry says the node ID now belongs to
//           another owner, or went backwards under it, the monitor thread (src/service/monitor.h)
//           retires the session and claims a node ID again with the same owner string, retrying
//           with a backoff; meanwhile issue() and readiness() fail with UNAVAILABLE /
//           RECLAIMING_NODE (retryable: HTTP 503 with Retry-After). Retired sessions stay alive
//           until the service is destroyed, so a request still holding the old generator never
//           touches freed memory.
// stop():   stops issuing, stops the monitor, closes the generator (saving the horizon tightly
//           at the last issued ID), stops the keeper and releases the lease, in that order; logs
//           each failure. A re-claim in progress is abandoned promptly.
//
// Thread-safe after start(): issue(), node(), readiness(), write_metrics(), state(), list_nodes()
// and events() may be called concurrently with each other, with a re-claim and with stop().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>

#include "event_log.h"
#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/lease_keeper.h"
#include "flurry/node_session.h"
#include "flurry/open_registry.h"
#include "flurry/registry.h"
#include "flurry/status.h"
#include "prometheus.h"

namespace flurry::service {

// The layout `flurry serve` uses unless told otherwise: the "flurry" preset.
[[nodiscard]] Layout default_layout();

struct ServiceOptions {
  // Which registry leases the node IDs, and where it keeps its files (data_dir).
  RegistryOptions registry;
  Layout layout = default_layout();
  // When the clock is behind the last issued time by more than max_lead.
  RollbackPolicy rollback = RollbackPolicy::kWait;
  // How far the time field of an ID may run ahead of the clock.
  std::chrono::milliseconds max_lead{1000};
  // Longest a request waits for a clock that stepped back (rollback = wait).
  std::chrono::milliseconds max_wait{3000};
  // How far ahead of now the durable horizon is kept; must exceed max_lead by a layout unit. A
  // crash costs a restart at most about this much waiting.
  std::chrono::milliseconds horizon_window{2000};
  // Most IDs per request (lowered at start to what the layout can issue within max_lead).
  std::uint64_t max_batch = 100000;
};

// A node session's report (SessionContext::log), to the server's log at its level.
void log_session_event(SessionEventLevel level, const std::string& line);

// The generator's options for `options` (node 0; each session sets its own).
[[nodiscard]] GeneratorOptions generator_options_of(const ServiceOptions& options);

// Checks the options against each other without touching the disk: the registry options
// (check_registry_options) and the generator options (Generator::check_options). INVALID_ARGUMENT
// naming the setting.
[[nodiscard]] Status check_service_options(const ServiceOptions& options);

// What the process knows of its node now (Service::state): nothing here reads the registry.
struct ServiceState {
  enum class Lease { kHeld, kSuspended, kReclaiming };
  std::uint64_t node = 0;
  std::uint64_t token = 0;
  std::string owner;                    // "host:pid"
  std::int64_t started_unix_ms = 0;     // wall clock when start() began
  std::chrono::milliseconds uptime{0};  // monotonic time since start() began
  // The counters summed over every session so far; the gauges (lead, horizon ahead,
  // generation, remaining) of the current one.
  GeneratorStats generator;
  LeaseKeeperStats keeper;
  std::chrono::milliseconds lease_ttl{0};  // 0: never expires (static)
  Lease lease = Lease::kHeld;
  // Wall-clock steps the monitor saw (>= 50 ms against the monotonic clock between two looks).
  std::uint64_t clock_steps = 0;
  // Throttle waits grew within the last second.
  bool throttling = false;
};

class Service {
 public:
  // Validates `options` (check_service_options) and creates a service that is not started.
  // `clocks` must outlive the service.
  [[nodiscard]] static Result<std::unique_ptr<Service>> create(ServiceOptions options,
                                                               Clocks clocks = Clocks::system());
  ~Service();  // stop()
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // See the top of this file. A stop request on `stop` interrupts a delayed start (CANCELLED).
  // On error everything acquired is released again. Call once.
  [[nodiscard]] Status start(std::stop_token stop = {});

  // See the top of this file. Idempotent; safe to call without or after a failed start().
  void stop();

  // Fills `out` with fresh IDs: 1 <= out.size() <= max_batch(). The generator's errors (see
  // generator.h) pass through, except that a lease lost for good is UNAVAILABLE / RECLAIMING_NODE
  // (a node ID is being claimed again); UNAVAILABLE / SHUT_DOWN before start() and once stop()
  // began. Nothing is issued on error. Lock-free unless the generator takes a slow path. Counts
  // the IDs in the metrics. With Blocking::kNever (event-loop threads) a slow path that would
  // sleep or wait for the registry fails with UNAVAILABLE / WOULD_BLOCK instead: call again with
  // kAllowed on a thread that may block.
  [[nodiscard]] Status issue(std::span<std::uint64_t> out, Blocking blocking = Blocking::kAllowed);

  // The largest count issue() accepts: max_batch from the options, lowered to what the layout
  // can issue within max_lead.
  [[nodiscard]] std::uint64_t max_batch() const noexcept;

  // OK while IDs can be issued with proof of uniqueness: started and not stopping (UNAVAILABLE /
  // SHUT_DOWN otherwise, as issue()), not claiming
  // a node ID again after a lost lease (UNAVAILABLE / RECLAIMING_NODE), the lease
  // held (the keeper's status), then the generator's health (horizon persisted, clock within
  // max_lead).
  [[nodiscard]] Status readiness() const;

  // Receives the node ID and readiness() (see set_readiness_listener).
  using ReadinessListener = std::function<void(std::uint64_t node, const Status& readiness)>;
  // `listener` is called with node() and readiness() on the monitor thread after each of its looks
  // (every 250 ms) and each step of a re-claim, from start() until stop(): how the composition
  // root follows readiness changes without a thread or a poll of its own. It must return quickly
  // (the monitor waits for it). Set before start().
  void set_readiness_listener(ReadinessListener listener);

  // Appends the service's metrics: IDs issued (ids_issued()), clock lead, rollback events,
  // throttle waits, horizon saves, lease renewals, lease time left, registry regressions,
  // readiness, node ID and build info. The transports add their own (requests, calls).
  void write_metrics(PrometheusWriter& out) const;

  // The IDs issue() handed out since create(), summed over every node ID claimed. Lock-free.
  [[nodiscard]] std::uint64_t ids_issued() const noexcept;
  [[nodiscard]] const ServiceOptions& options() const noexcept;
  [[nodiscard]] const Layout& layout() const noexcept { return options().layout; }
  // The current node ID (it changes when a lost lease is replaced). Valid after a successful
  // start().
  [[nodiscard]] std::uint64_t node() const noexcept;
  [[nodiscard]] std::string registry_description() const;

  // The process's recent notable events (lease, clock, throttling, readiness; the composition
  // root adds the segment service's). Valid for the service's life, also before start().
  [[nodiscard]] EventLog& events() noexcept;

  // Every node ID the registry knows (NodeRegistry::list()). Reads the registry: may block.
  // UNAVAILABLE / SHUT_DOWN before start(); the registry's errors pass through.
  [[nodiscard]] Result<RegistryListing> list_nodes() const;

  // See ServiceState. Valid after a successful start(); cheap, never blocks on the registry.
  [[nodiscard]] ServiceState state() const;
  [[nodiscard]] static std::string_view version() noexcept;

  class Impl;  // src/service/service.cc

 private:
  explicit Service(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry::service

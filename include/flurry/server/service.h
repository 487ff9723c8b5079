// The ID service without a transport: the node registry, the node's lease, the leased horizon
// store, the generator and the lease keeper, wired together from a Config. The HTTP server (and
// later gRPC) only translate requests into calls on it.
//
// Life cycle: construct, start(), serve calls from any number of threads, stop(), destroy.
//
// start():  opens the registry (sqlite: <data_dir>/registry.db; static: the horizon file in
//           data_dir), claims a node ID (owner "<hostname>:<pid>"), creates the generator above
//           the inherited horizon and starts the lease keeper. When the clock is behind the
//           inherited horizon the start is delayed or refused, never silently continued:
//             * a gap no larger than horizon_window_ms + max_lead_ms is what a crash costs (the
//               horizon was kept that far ahead): every policy waits it out, so that IDs keep
//               increasing across the restart;
//             * a larger gap is a clock step back: `wait` waits while the gap is at most
//               horizon_window_ms + max_lead_ms + max_wait_ms and refuses beyond, `fail`
//               refuses, `clock` switches clock generation at once.
//           Either way the start is logged with the reason and how long it waits.
// Lease lost: when the lease cannot be renewed in time the keeper suspends the generator before
//           the lease could be given to anyone else (issue() and readiness() fail with
//           UNAVAILABLE / LEASE_LOST) and resumes it when a renewal succeeds again. When the
//           registry says the node ID now belongs to another owner, the lease is lost for good:
//           the monitor thread retires that node's keeper and generator (the generator's tight
//           horizon save fails with LEASE_LOST, as expected) and claims a node ID again with the
//           same owner string (the registry hands out the lowest free one), retrying with a
//           backoff (1 s doubling, at most the lease TTL) while the claim fails. The new
//           generator starts above the new node's inherited horizon under the same rules as
//           start() (a refused start is retried like a failed claim). Meanwhile issue() and
//           readiness() fail with UNAVAILABLE / LEASE_LOST (retryable: HTTP 503 with
//           Retry-After). Retired objects stay alive until the service is destroyed, so a
//           request still holding the old generator never touches freed memory; the old node's
//           lease is not released (it is not ours any more).
// stop():   stops issuing, closes the generator (saving the horizon tightly at the last issued
//           ID), stops the keeper and releases the lease, in that order; logs each failure. A
//           re-claim in progress is abandoned promptly.
//
// Thread-safe after start(): issue(), decode(), node(), readiness() and metrics_text() may be
// called concurrently with each other, with a re-claim and with stop().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/generator.h"
#include "flurry/horizon_floor.h"
#include "flurry/layout.h"
#include "flurry/lease_keeper.h"
#include "flurry/registry.h"
#include "flurry/server/config.h"
#include "flurry/server/metrics.h"
#include "flurry/status.h"

namespace flurry::server {

// One ID taken apart.
struct DecodedId {
  std::uint64_t id = 0;
  IdParts parts;
  TimePoint time;
  std::int64_t unix_ms = 0;
};

class Service {
 public:
  // `config` must be valid (load_config() or validate_config()). `clock` must outlive the service.
  explicit Service(Config config, Clock& clock = SystemClock::coarse());
  ~Service();  // stop()
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // See the top of this file. A stop request on `stop` interrupts a delayed start (CANCELLED).
  // On error everything acquired is released again. Call once.
  [[nodiscard]] Status start(std::stop_token stop = {});

  // See the top of this file. Idempotent; safe to call without or after a failed start().
  void stop();

  // Fills `out` with fresh IDs: 1 <= out.size() <= max_batch(). The generator's errors (see
  // generator.h) pass through, except that a lost lease is UNAVAILABLE / LEASE_LOST (a node ID
  // is being claimed again); UNAVAILABLE / SHUT_DOWN once stop() began. Nothing is issued on
  // error. Lock-free unless the generator takes a slow path. Counts the IDs in the metrics.
  // With Blocking::kNever (event-loop threads) a slow path that would sleep or wait for the
  // registry fails with UNAVAILABLE / WOULD_BLOCK instead: call again with kAllowed on a thread
  // that may block.
  [[nodiscard]] Status issue(std::span<std::uint64_t> out, Blocking blocking = Blocking::kAllowed);

  // The largest count issue() accepts: max_batch from the config, lowered to what the layout can
  // issue within max_lead.
  [[nodiscard]] std::uint64_t max_batch() const noexcept { return max_batch_; }

  // Parses `text` in `encoding` and takes it apart with this service's layout. INVALID_ARGUMENT
  // (bad text, or an ID this layout could not have produced) with a message.
  [[nodiscard]] Result<DecodedId> decode(std::string_view text, Encoding encoding) const;

  // OK while IDs can be issued with proof of uniqueness: started and not stopping, not claiming
  // a node ID again after a lost lease (UNAVAILABLE / LEASE_LOST with the reason), the lease
  // held (the keeper's status), then the generator's health (horizon persisted, clock within
  // max_lead).
  [[nodiscard]] Status readiness() const;

  // The Prometheus text (format 0.0.4) of the service: request metrics, IDs, clock lead,
  // rollback events, throttle waits, lease renewals, lease time left, horizon ahead, readiness,
  // node ID and build info.
  [[nodiscard]] std::string metrics_text() const;

  [[nodiscard]] RequestMetrics& request_metrics() noexcept { return metrics_; }
  [[nodiscard]] const Layout& layout() const noexcept { return layout_; }
  [[nodiscard]] const Config& config() const noexcept { return config_; }
  // The current node ID (it changes when a lost lease is replaced). Valid after a successful
  // start().
  [[nodiscard]] std::uint64_t node() const noexcept {
    return node_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::string registry_description() const;
  [[nodiscard]] std::string_view version() const noexcept;

 private:
  // One claimed node ID and what issues under it. Immutable once published; kept alive until
  // the service is destroyed, even after its lease was lost.
  struct Incarnation {
    Lease lease;
    std::unique_ptr<LeasedHorizonStore> store;
    std::unique_ptr<Generator> generator;
    std::unique_ptr<LeaseKeeper> keeper;
    bool retired = false;  // shut down (start/stop or monitor thread only)
  };

  [[nodiscard]] Status start_locked(std::stop_token stop);
  // Claims a node ID, creates its store, generator and keeper, and waits for the clock as
  // start() describes. On error releases whatever it acquired (the lease too).
  [[nodiscard]] Result<std::unique_ptr<Incarnation>> incarnate(std::stop_token stop);
  [[nodiscard]] Status wait_for_clock(Generator& generator, std::uint64_t node,
                                      std::stop_token stop);
  // Makes `inc` the current one (request threads see it from now on).
  void publish(std::unique_ptr<Incarnation> inc);
  void monitor_loop();
  // Returns whether the lease is lost for good.
  bool log_changes(const Incarnation& inc);
  // Monitor thread: after a lease lost for good, retires the incarnation and claims a node ID
  // again until it succeeds or the service stops.
  void reclaim(Incarnation& lost);
  void reset_monitor_state(const Incarnation& inc);
  // Logs a registry found behind this host's memory of a node, counts it, and shows it in
  // readiness while a node ID is being claimed again.
  void note_regression(const HorizonRegression& regression);
  // Stops issuing under `inc` and lets go of it: closes the generator (saving the horizon),
  // stops the keeper and releases the lease; with `lease_lost`, stops the keeper first, expects
  // the horizon save to fail and keeps the lease (it is another owner's). Idempotent.
  void shut_down(Incarnation& inc, bool lease_lost, std::string_view when);

  const Config config_;
  Clock& clock_;
  Layout layout_;
  RollbackPolicy rollback_ = RollbackPolicy::kWait;
  std::uint64_t max_batch_ = 0;
  std::string owner_;
  std::atomic<std::uint64_t> node_{0};

  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<HorizonFloor> floor_;
  std::atomic<std::uint64_t> regressions_{0};
  // The regression behind the re-claim in progress is counted already (start and monitor
  // thread only): the claims that find it again do not count it twice.
  bool regression_counted_ = false;
  // Every incarnation so far, the current one last. Written by start() and the monitor thread
  // (stop() joins the monitor before it reads them); request threads use the atomics below.
  std::vector<std::unique_ptr<Incarnation>> incarnations_;
  // The latest incarnation (also while its lease is lost and another is being claimed).
  std::atomic<Incarnation*> current_{nullptr};
  // Counters of the incarnations already replaced, so that /metrics counters never go back when
  // a node ID is claimed again. Guarded by totals_mu_, which publish() holds while it switches
  // current_, so a reader sees either the old incarnation or its counters here, never both.
  mutable std::mutex totals_mu_;
  GeneratorStats retired_generators_{};  // counter fields only
  LeaseKeeperStats retired_keepers_{};   // counter fields only
  // The generator issue() uses; nullptr while a node ID is being claimed again.
  std::atomic<Generator*> generator_{nullptr};

  std::atomic<bool> serving_{false};  // started and not stopping
  std::atomic<bool> stopping_{false};
  std::atomic<bool> reclaiming_{false};
  std::mutex stop_mu_;  // serializes start() and stop()
  bool stopped_ = false;

  // The monitor thread: logs lease and horizon events as they happen, and replaces a lost lease.
  mutable std::mutex monitor_mu_;  // also guards reclaim_status_
  std::condition_variable monitor_cv_;
  bool monitor_stop_ = false;
  std::stop_source monitor_stop_source_;  // interrupts a delayed start during a re-claim
  std::thread monitor_;
  Status reclaim_status_;  // why not ready while reclaiming_
  // Last seen by the monitor (monitor thread only).
  std::string last_lease_state_;
  std::string last_health_state_;
  GeneratorStats last_stats_{};
  LeaseKeeperStats last_keeper_{};
  std::uint64_t logged_failures_ = 0;
  std::uint64_t logged_horizon_failures_ = 0;
  std::chrono::steady_clock::time_point last_failure_log_{};
  std::chrono::steady_clock::time_point last_horizon_log_{};

  mutable RequestMetrics metrics_;
};

}  // namespace flurry::server

// The timestamp oracle: values strictly greater than every value handed out before, anywhere in
// the cluster (linearizable), from one fenced leader (docs/design.md, "The timestamp oracle").
//
// Every process that runs the oracle campaigns for the one node ID of the `tso` layout in its own
// registry scope (open_registry.h, RegistryScope::kTimestampOracle). The process that holds that
// lease leads: it runs a NodeSession over the `tso` layout, so everything the node IDs rely on
// holds here too:
//   * the durable window: the generator never issues above the horizon it saved in the registry
//     (horizon_window ahead of the clock, extended in the background), saved with the lease's
//     fencing token, so a leader cut off from the registry cannot raise it any more;
//   * a new leader starts above the last saved window (and above this host's memory of it), and
//     only once the registry gave it the lease, that is after the old lease expired there; a
//     clock behind that window is waited out or refused by the rollback policy, never guessed;
//   * the gate: a grant is answered only if, read AFTER its values were taken, the monotonic
//     clock is still before the moment the leader's lease keeper can prove the lease (the start
//     of the last successful renewal + ttl - safety margin). A leader that was frozen (SIGSTOP, a
//     long pause) past its lease and resumes never answers from its stale window, even before its
//     keeper thread has run again.
// Together: every value a new leader grants is above every value an earlier leader granted, and
// an earlier leader answers nothing once the new one may have begun.
//
// Followers do not forward: they answer NOT_LEADER naming the leader's advertised addresses (the
// owner string of its lease), and the transports redirect the client there (one hop, not two; the
// leader is the bottleneck either way).
//
// Thread-safe: every method may be called from any thread after create(); start() and stop()
// once each, from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/horizon_floor.h"
#include "flurry/layout.h"
#include "flurry/mutex.h"
#include "flurry/node_session.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

// Where a leader can be reached: "HOST:PORT" of its HTTP and gRPC listeners (empty: that listener
// is off), and the owner name of its lease ("host:pid").
struct TsoLeaderAddress {
  std::string http;
  std::string grpc;
  std::string owner;
  friend bool operator==(const TsoLeaderAddress&, const TsoLeaderAddress&) = default;
};

// The owner string a leader's lease carries: "<owner> http=<H:P> grpc=<H:P>" (either address
// left out when empty), and its inverse. parse_tso_owner() of a string without addresses gives
// the owner alone (a lease written by something else): a follower then cannot redirect.
[[nodiscard]] std::string format_tso_owner(const TsoLeaderAddress& address);
[[nodiscard]] TsoLeaderAddress parse_tso_owner(std::string_view owner);

// One answer: the `count` consecutive values first..first+count-1, and the leadership term (the
// lease's fencing token) it was granted in.
struct TsoGrant {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  std::uint64_t term = 0;
};

enum class TsoRole { kElecting, kLeader, kFollower };
[[nodiscard]] std::string_view to_string(TsoRole role) noexcept;

struct TsoStats {
  TsoRole role = TsoRole::kElecting;
  std::uint64_t term = 0;            // this process's term while it leads, else 0
  std::uint64_t leader_changes = 0;  // terms this process began leading
  std::uint64_t window_saves = 0;    // durable-window writes, over every term
  std::uint64_t window_failures = 0;
  std::uint64_t requests = 0;           // grant() calls
  std::uint64_t timestamps = 0;         // values granted
  std::uint64_t not_leader = 0;         // grants refused because this process does not lead
  std::uint64_t gate_refusals = 0;      // grants whose values were taken past the lease, dropped
  Nanos wait_total{0};                  // time grants spent in the generator (clock, window)
  std::int64_t window_ahead_ticks = 0;  // the current term's durable window minus the clock
};

struct TsoOptions {
  // The window and the clock rules (horizon_window, max_lead, max_wait, rollback); node 0 and a
  // background horizon thread are set by the oracle.
  GeneratorOptions generator;
  // How often a follower looks at the registry for a free lease (and the leader's address), and
  // how often the leader checks its own lease. 0: min(lease ttl / 4, 500 ms).
  std::chrono::milliseconds poll_interval{0};
  // TEST ONLY, unsafe (FLURRY_TEST_TSO_FAULT=skip-gate): answer without the gate and never
  // suspend on a lease that ran out by the clock; the negative control the linearizability
  // checker must catch.
  bool unsafe_skip_gate = false;
  // Where the oracle reports what it does (logfmt line). Optional.
  std::function<void(SessionEventLevel, const std::string&)> log;
};

class TimestampOracle {
 public:
  // `registry` is the oracle's scope of the registry; `floor` this host's memory for that scope
  // (open_horizon_floor with RegistryScope::kTimestampOracle). Both and the clocks outlive the
  // oracle. `layout`: only time and seq, seq lowest (Layout::parse("tso")). INVALID_ARGUMENT
  // for a layout with a node or clock field or options the generator refuses.
  [[nodiscard]] static Result<std::unique_ptr<TimestampOracle>> create(NodeRegistry& registry,
                                                                       HorizonFloor& floor,
                                                                       Layout layout,
                                                                       TsoOptions options,
                                                                       Clocks clocks);
  ~TimestampOracle();  // stop()
  TimestampOracle(const TimestampOracle&) = delete;
  TimestampOracle& operator=(const TimestampOracle&) = delete;

  // Starts campaigning on a thread of its own as `self` (its lease's owner, "host:pid", and where
  // clients reach it: known once the listeners are bound); returns at once. Until then grants
  // answer NO_LEADER. RESOURCE_EXHAUSTED when the thread cannot be created.
  [[nodiscard]] Status start(TsoLeaderAddress self);
  // Stops campaigning; a leader closes its window tightly and releases the lease, so a follower
  // takes over at its next look rather than after the lease's TTL. Idempotent.
  void stop();

  // `count` (1..max_batch()) consecutive values, each strictly greater than every value any
  // leader of this oracle granted before this call began. Errors: UNAVAILABLE / NOT_LEADER
  // (leader() says where; nothing was taken), NO_LEADER (no leader known now), LEASE_EXPIRING
  // (this leader's lease ran out while the values were taken: they are dropped, never
  // answered), the generator's (CLOCK_BEHIND, HORIZON_NOT_PERSISTED, WOULD_BLOCK with
  // Blocking::kNever, SHUT_DOWN while a term ends, BATCH_TOO_LARGE).
  [[nodiscard]] Result<TsoGrant> grant(std::uint64_t count, Blocking blocking = Blocking::kAllowed);
  // The most values one grant takes: the generator's max_batch for the layout and max_lead.
  [[nodiscard]] std::uint64_t max_batch() const noexcept { return max_batch_; }

  // The term this process leads in now (its lease's fencing token), 0 when it does not lead.
  [[nodiscard]] std::uint64_t term() const;
  // OK iff this process still leads in `term` and its lease is proven at this moment (the
  // monotonic clock is read now). The gate a leader-only answer (a strict segment tag's) passes
  // after taking its numbers. UNAVAILABLE / NOT_LEADER or NO_LEADER otherwise.
  [[nodiscard]] Status check_term(std::uint64_t term) const;
  // The last known leader (this process while it leads); nullopt when none is known.
  [[nodiscard]] std::optional<TsoLeaderAddress> leader() const;
  // The refusal a process that does not lead gives: NOT_LEADER naming the leader, or NO_LEADER.
  [[nodiscard]] Status not_leader() const;
  // OK iff this process leads and can grant now (lease proven, generator healthy); otherwise why.
  [[nodiscard]] Status readiness() const;
  [[nodiscard]] TsoStats stats() const;
  [[nodiscard]] const Layout& layout() const noexcept { return layout_; }

 private:
  struct Term;  // one leadership: its session and token

  TimestampOracle(NodeRegistry& registry, HorizonFloor& floor, Layout layout, TsoOptions options,
                  Clocks clocks, std::uint64_t max_batch);
  void campaign(std::stop_token stop);
  // One look as a follower: the leader's address from the registry, or a claim when the lease is
  // free. Returns the new term when this process now leads.
  [[nodiscard]] std::shared_ptr<Term> try_to_lead(std::stop_token stop);
  // Ends the current term (`lease_lost`: the lease is another's, keep it).
  void end_term(bool lease_lost, std::string_view why);
  [[nodiscard]] std::shared_ptr<Term> current() const FLURRY_EXCLUDES(mu_);
  [[nodiscard]] bool proven(const Term& term) const;
  void log(SessionEventLevel level, const std::string& line) const;

  NodeRegistry& registry_;
  HorizonFloor& floor_;
  const Layout layout_;
  const TsoOptions options_;
  const Clocks clocks_;
  const std::uint64_t max_batch_;
  const std::chrono::milliseconds poll_;
  // What each term's NodeSession is opened with (its owner set by start(), before the thread).
  SessionContext context_;

  mutable Mutex mu_;
  std::shared_ptr<Term> term_ FLURRY_GUARDED_BY(mu_);
  std::optional<TsoLeaderAddress> leader_ FLURRY_GUARDED_BY(mu_);
  TsoLeaderAddress self_ FLURRY_GUARDED_BY(mu_);
  TsoRole role_ FLURRY_GUARDED_BY(mu_) = TsoRole::kElecting;
  std::uint64_t leader_changes_ FLURRY_GUARDED_BY(mu_) = 0;
  std::uint64_t saves_before_ FLURRY_GUARDED_BY(mu_) = 0;     // window saves of ended terms
  std::uint64_t failures_before_ FLURRY_GUARDED_BY(mu_) = 0;  // and failures

  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> timestamps_{0};
  std::atomic<std::uint64_t> not_leader_{0};
  std::atomic<std::uint64_t> gate_refusals_{0};
  std::atomic<std::int64_t> wait_ns_{0};

  std::stop_source stop_;
  std::thread thread_;
};

}  // namespace flurry

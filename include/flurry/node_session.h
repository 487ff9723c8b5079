// One claimed node ID and what issues under it, as `flurry serve` and `flurry next` assemble it. A
// session claims a node ID from the registry, raises the claim to this host's memory of the node
// (HorizonFloor), builds the leased horizon store, the generator above the inherited horizon and
// the lease keeper, and waits for the clock as the start rules below say. shut_down() lets go of it
// all again.
//
// Start rules, when the clock is behind the inherited horizon:
//   * a gap no larger than horizon_window + max_lead (+ one unit) is what a crash costs (the
//     horizon was kept that far ahead): every policy waits it out, so IDs keep increasing across
//     the restart;
//   * a larger gap is a clock step back: `wait` waits while the gap is at most
//     horizon_window + max_lead + max_wait and refuses beyond, `fail` refuses, `clock` switches
//     clock generation at once (one ID is spent on it).
// Every delay and refusal is reported (SessionContext::log) with its reason.
//
// Host guard: a session issues only while it holds the host-wide guard of (layout, node ID)
// (flurry/host_guard.h), so that two processes on one host never issue as one node ID, whatever
// registry each uses. A leased node ID whose guard another process holds is kept while the next
// one is claimed (so the registry offers another), then released; a static node is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/horizon_floor.h"
#include "flurry/host_guard.h"
#include "flurry/layout.h"
#include "flurry/lease_keeper.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

// How bad a session event is, for the caller's log.
enum class SessionEventLevel { kDebug, kInfo, kWarning, kError };

// What every session of a process shares. All references outlive the sessions.
struct SessionContext {
  NodeRegistry& registry;
  HorizonFloor& floor;
  const Layout& layout;
  // The generator's options (each session sets the node); horizon_window, max_lead, max_wait and
  // rollback also make the start rules above.
  GeneratorOptions generator;
  Clocks clocks;
  std::string owner;  // "<hostname>:<pid>"
  // Called when the registry was found behind this host's memory of the node.
  std::function<void(const HorizonRegression&)> on_regression;
  // Where the session reports what it does: one logfmt line ("event=start_delayed node=0 ...").
  // Optional.
  std::function<void(SessionEventLevel, const std::string&)> log;
  // Take the host-wide guard of (layout, node ID) with each claim (see the top of this file). The
  // timestamp oracle does not: its one node ID belongs to one oracle cluster (its registry scope),
  // whose lease and fenced window already keep two leaders apart, and a guard held by a frozen
  // leader would keep the other servers of its host from taking over.
  bool host_guard = true;
  // The lease keeper's options.
  LeaseKeeperOptions keeper;
};

class NodeSession {
 public:
  // Claims a node ID and starts issuing under it (see the top of this file). A stop request on
  // `stop` interrupts the wait for the clock (CANCELLED / SHUT_DOWN). On error everything
  // acquired is released again, the lease too.
  [[nodiscard]] static Result<std::unique_ptr<NodeSession>> open(const SessionContext& context,
                                                                 std::stop_token stop);
  ~NodeSession();  // shut_down(false, "destroy")
  NodeSession(const NodeSession&) = delete;
  NodeSession& operator=(const NodeSession&) = delete;

  // Stops issuing and lets go: closes the generator (saving the horizon tightly), stops the
  // keeper and releases the lease. With `lease_lost` the keeper stops first, a failing horizon
  // save is expected and the lease is kept (it is another owner's). Idempotent; not thread-safe
  // (the service's start, stop and monitor paths call it, one at a time).
  void shut_down(bool lease_lost, std::string_view when);

  [[nodiscard]] const Lease& lease() const noexcept { return lease_; }
  [[nodiscard]] std::uint64_t node() const noexcept { return lease_.node; }
  // Thread-safe, as the objects themselves.
  [[nodiscard]] Generator& generator() const noexcept { return *generator_; }
  [[nodiscard]] LeaseKeeper& keeper() const noexcept { return *keeper_; }
  // The horizon record the claim inherited (raised to this host's memory), if the node ID was
  // used before.
  [[nodiscard]] const std::optional<HorizonRecord>& inherited() const noexcept {
    return inherited_;
  }
  // How long the start waited for the clock (0 when it did not wait), on the monotonic clock.
  [[nodiscard]] Nanos waited() const noexcept { return waited_; }

 private:
  explicit NodeSession(const SessionContext& context) : context_(context) {}
  void log(SessionEventLevel level, const std::string& line) const;
  [[nodiscard]] Status start(Claim claim, std::stop_token stop);
  [[nodiscard]] Status wait_for_clock(std::stop_token stop);

  const SessionContext& context_;
  Lease lease_;
  std::unique_ptr<LeasedHorizonStore> store_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<LeaseKeeper> keeper_;
  HostNodeGuard guard_;  // held from the claim until shut_down()
  bool retired_ = false;
  std::optional<HorizonRecord> inherited_;
  Nanos waited_{0};
};

}  // namespace flurry

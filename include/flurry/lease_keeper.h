// Keeps a node ID's lease alive and the generator honest about it.
//
// A background thread renews the lease every renew_interval. Lease validity is measured on the
// MonotonicClock the keeper was given (never on the wall clock), from the start of the last
// successful renewal: once `ttl - safety_margin` has passed without one, the generator is
// suspended (its calls fail with UNAVAILABLE / LEASE_EXPIRING, the registry's error in the
// message) before another process could be given the node ID. A later successful renewal resumes
// it. If the registry says the lease is gone (FAILED_PRECONDITION / LEASE_LOST: another owner has
// it; or REGISTRY_REGRESSED: the registry went backwards), the generator stays suspended for good
// with that reason. Where the registry can watch (NodeRegistry::watch_lease: etcd), news of the
// loss suspends the generator as soon as the registry learns it, not at the next renewal. Every
// wait (for the next renewal, for a renewal in progress) goes through the clock, so tests drive the
// keeper with a fake one (tests/testing/fake_clock.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/mutex.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

struct LeaseKeeperOptions {
  // 0: ttl / 3.
  std::chrono::milliseconds renew_interval{0};
  // 0: ttl / 3. Suspends issuing this long before the lease would expire.
  std::chrono::milliseconds safety_margin{0};
  // TEST ONLY, unsafe: never suspend because the lease ran out by the clock; only a renewal or a
  // watch that says the lease is gone suspends. The timestamp oracle's negative control
  // (FLURRY_TEST_TSO_FAULT=skip-gate) uses it to show that the checker catches a leader that
  // answers past its lease.
  bool unsafe_ignore_expiry = false;
};

struct LeaseKeeperStats {
  std::uint64_t renewals = 0;              // successful renewals
  std::uint64_t renewal_failures = 0;      // failed renewals
  std::chrono::milliseconds remaining{0};  // until the lease expires, as far as we know (>= 0)
  bool lost = false;                       // the registry gave the node ID to another owner
  bool watched = false;                    // the registry pushes news of a loss (watch_lease)
};

// Thread-safe. The registry, generator and clock must outlive the keeper.
class LeaseKeeper {
 public:
  LeaseKeeper(NodeRegistry& registry, Lease lease, Generator& generator, MonotonicClock& clock,
              LeaseKeeperOptions options = {});
  ~LeaseKeeper();  // stop()
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts the renewal thread and, where the registry can, the watch of the lease (a watch that
  // cannot be set up leaves the renewals to notice a loss). The lease counts as renewed at this
  // moment (it was just claimed).
  // OK also when already started. FAILED_PRECONDITION after stop(). When the thread cannot be
  // created (std::system_error: no memory or thread limit), RESOURCE_EXHAUSTED / SUSPENDED, and
  // the generator is suspended with that status, since nothing would keep the lease.
  [[nodiscard]] Status start();
  // Stops the watch and the thread (does not release the lease). Waits for a renewal in progress
  // to return. Idempotent.
  void stop();

  // OK while the lease is known valid; otherwise why not (what the generator was suspended with).
  [[nodiscard]] Status status() const;
  [[nodiscard]] LeaseKeeperStats stats() const;
  [[nodiscard]] const Lease& lease() const noexcept { return lease_; }
  // Until when (on the keeper's clock) the lease is proven this process's: the start of the last
  // successful renewal (or of start()) + ttl - safety_margin. MonoTime::max() for a lease that
  // never expires; MonoTime::min() once the lease is lost. A caller that must not act past the
  // lease (the timestamp oracle's gate) compares it with a clock reading taken after its action.
  [[nodiscard]] MonoTime valid_until() const;

 private:
  // The keeper thread. `started`: when the lease was last known renewed (start()).
  void loop(MonoTime started, std::stop_token stop) FLURRY_EXCLUDES(mu_);
  // Runs one renewal on a worker thread, suspending the generator at the deadline if the
  // registry (described by `registry`) has not answered by then; returns its answer.
  [[nodiscard]] Status renew(MonoTime started, const std::string& registry) FLURRY_EXCLUDES(mu_);
  // Records the outcome of a renewal begun at `started`; suspends or resumes the generator.
  void apply(const Status& renewed, MonoTime started) FLURRY_EXCLUDES(mu_);
  // The lease is gone for good (`why`: is_lease_gone): suspends the generator with it.
  void lose(const Status& why) FLURRY_REQUIRES(mu_);

  NodeRegistry& registry_;
  const Lease lease_;
  Generator& generator_;
  MonotonicClock& clock_;
  const std::chrono::milliseconds renew_interval_;
  const std::chrono::milliseconds safety_margin_;
  const bool ignore_expiry_;

  mutable Mutex mu_;
  std::stop_source stop_;  // stop() requests it; the thread's waits end on it
  bool lost_ FLURRY_GUARDED_BY(mu_) = false;
  MonoTime valid_until_ FLURRY_GUARDED_BY(mu_) = {};  // lease expiry as far as we know
  Status status_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t renewals_ FLURRY_GUARDED_BY(mu_) = 0;
  std::uint64_t failures_ FLURRY_GUARDED_BY(mu_) = 0;
  std::thread thread_ FLURRY_GUARDED_BY(mu_);
  // Destroyed by stop() outside mu_ (its callback takes mu_).
  std::unique_ptr<NodeRegistry::LeaseWatch> watch_ FLURRY_GUARDED_BY(mu_);
};

}  // namespace flurry

// Keeps a node ID's lease alive and the generator honest about it.
//
// A background thread renews the lease every renew_interval. Lease validity is measured on the
// monotonic clock (std::chrono::steady_clock), from the start of the last successful renewal:
// once `ttl - safety_margin` has passed without one, the generator is suspended (its calls fail
// with UNAVAILABLE / LEASE_LOST or the registry's error), before another process could be given
// the node ID. A later successful renewal resumes it. If the registry says the lease is gone
// (FAILED_PRECONDITION / LEASE_LOST: another owner has it; or REGISTRY_REGRESSED: the registry
// went backwards), the generator stays suspended for good with that reason.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "flurry/generator.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

struct LeaseKeeperOptions {
  // 0: ttl / 3.
  std::chrono::milliseconds renew_interval{0};
  // 0: ttl / 3. Suspends issuing this long before the lease would expire.
  std::chrono::milliseconds safety_margin{0};
};

struct LeaseKeeperStats {
  std::uint64_t renewals = 0;              // successful renewals
  std::uint64_t renewal_failures = 0;      // failed renewals
  std::chrono::milliseconds remaining{0};  // until the lease expires, as far as we know (>= 0)
  bool lost = false;                       // the registry gave the node ID to another owner
};

// Thread-safe. The registry and generator must outlive the keeper.
class LeaseKeeper {
 public:
  LeaseKeeper(NodeRegistry& registry, Lease lease, Generator& generator,
              LeaseKeeperOptions options = {});
  ~LeaseKeeper();  // stop()
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts the renewal thread. The lease counts as renewed at this moment (it was just claimed).
  void start();
  // Stops the thread (does not release the lease). Idempotent.
  void stop();

  // OK while the lease is known valid; otherwise why not (what the generator was suspended with).
  [[nodiscard]] Status status() const;
  [[nodiscard]] LeaseKeeperStats stats() const;
  [[nodiscard]] const Lease& lease() const noexcept { return lease_; }

 private:
  void loop();
  void renew_once();

  NodeRegistry& registry_;
  const Lease lease_;
  Generator& generator_;
  const std::chrono::milliseconds renew_interval_;
  const std::chrono::milliseconds safety_margin_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool lost_ = false;
  std::chrono::steady_clock::time_point valid_until_{};  // lease expiry as far as we know
  Status status_;
  std::uint64_t renewals_ = 0;
  std::uint64_t failures_ = 0;
  std::thread thread_;
};

}  // namespace flurry

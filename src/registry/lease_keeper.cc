// LeaseKeeper: renews a node ID's lease and suspends the generator before the lease could lapse.
//
// The keeper thread schedules renewals; each renewal runs on a short-lived worker thread so that
// a registry that does not answer (a hung disk, a black-holed connection) cannot stop the keeper
// from suspending the generator on time: the keeper waits for the worker only until the
// suspension deadline. Every generator suspend/resume happens under mu_, so they are applied in
// the order the keeper decided them.
#include "flurry/lease_keeper.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>

#include "core/numbers.h"

namespace flurry {
namespace {

using SteadyTime = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds or_third_of(milliseconds value, milliseconds ttl) {
  return value > milliseconds(0) ? value : ttl / 3;
}

}  // namespace

LeaseKeeper::LeaseKeeper(NodeRegistry& registry, Lease lease, Generator& generator,
                         LeaseKeeperOptions options)
    : registry_(registry),
      lease_(std::move(lease)),
      generator_(generator),
      renew_interval_(or_third_of(options.renew_interval, lease_.ttl)),
      safety_margin_(or_third_of(options.safety_margin, lease_.ttl)) {}

LeaseKeeper::~LeaseKeeper() {
  stop();
}

void LeaseKeeper::start() {
  std::lock_guard lock(mu_);
  if (stop_ || thread_.joinable()) return;
  valid_until_ = SteadyTime::now() + lease_.ttl;
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::system_error& e) {
    status_ = Status(
        StatusCode::kUnavailable, Reason::kSuspended,
        "cannot start the lease keeper for node " + std::to_string(lease_.node) + ": " + e.what());
    generator_.suspend(status_);
  }
}

void LeaseKeeper::stop() {
  std::thread thread;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    thread = std::move(thread_);
  }
  cv_.notify_all();
  if (thread.joinable()) thread.join();
}

Status LeaseKeeper::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

LeaseKeeperStats LeaseKeeper::stats() const {
  std::lock_guard lock(mu_);
  LeaseKeeperStats s;
  s.renewals = renewals_;
  s.renewal_failures = failures_;
  s.lost = lost_;
  const auto left = valid_until_ - SteadyTime::now();
  if (!lost_ && lease_.ttl > milliseconds(0) && left > SteadyTime::duration::zero()) {
    s.remaining = std::chrono::duration_cast<milliseconds>(left);
  }
  return s;
}

// One renewal, run on a worker thread: records the outcome and suspends or resumes the
// generator accordingly.
void LeaseKeeper::renew_once() {
  const auto started = SteadyTime::now();
  Status st = registry_.renew(lease_);
  std::lock_guard lock(mu_);
  const auto now = SteadyTime::now();
  if (st.ok()) {
    ++renewals_;
    valid_until_ = std::max(valid_until_, started + lease_.ttl);
  } else {
    ++failures_;
  }
  const std::string node = "node " + std::to_string(lease_.node);
  if (lost_) {
    // Lost for good: nothing brings the node ID back.
  } else if (is_lease_gone(st)) {
    lost_ = true;
    // LEASE_LOST, or REGISTRY_REGRESSED when the registry went backwards.
    status_ = Status(StatusCode::kFailedPrecondition, st.reason(),
                     "the lease on " + node + " is lost: " + st.message());
    generator_.suspend(status_);
  } else if (lease_.ttl <= milliseconds(0) || now < valid_until_ - safety_margin_) {
    if (!status_.ok()) {
      status_ = OkStatus();
      generator_.resume();
    }
  } else {
    status_ = Status(StatusCode::kUnavailable, Reason::kLeaseLost,
                     "lease on " + node + " not renewed for " +
                         internal::millis_text(now - (valid_until_ - lease_.ttl)) + ": " +
                         (st.ok() ? "the last renewal took " + internal::millis_text(now - started)
                                  : st.message()));
    generator_.suspend(status_);
  }
  cv_.notify_all();
}

void LeaseKeeper::loop() {
  const bool expires = lease_.ttl > milliseconds(0);
  const milliseconds retry = std::min(std::max(renew_interval_ / 4, milliseconds(100)),
                                      std::max(renew_interval_, milliseconds(1)));
  const std::string node = "node " + std::to_string(lease_.node);
  const std::string registry = registry_.describe();  // not under mu_: it is the registry's

  std::unique_lock lock(mu_);
  if (renew_interval_ <= milliseconds(0)) {  // a lease without expiry and no interval given
    cv_.wait(lock, [this] { return stop_; });
    return;
  }
  auto next_renewal = SteadyTime::now() + renew_interval_;
  while (!stop_ && !lost_) {
    // Wake for the next renewal, or at the suspension deadline if that comes first: then one
    // last renewal is tried, and the generator suspended if it fails.
    auto wake = next_renewal;
    if (expires && status_.ok()) wake = std::min(wake, valid_until_ - safety_margin_);
    if (cv_.wait_until(lock, wake, [this] { return stop_; })) break;

    const auto started = SteadyTime::now();
    const std::uint64_t renewals = renewals_;
    const std::uint64_t failures = failures_;
    const auto done = [&] { return renewals_ != renewals || failures_ != failures; };
    std::thread worker;
    lock.unlock();
    try {
      worker = std::thread([this] { renew_once(); });
    } catch (const std::system_error&) {
      renew_once();  // no thread to spare: renew here and accept that it may block
    }
    lock.lock();
    // A registry that hangs must not keep the generator issuing past the deadline.
    while (!done()) {
      const auto deadline = valid_until_ - safety_margin_;
      const auto now = SteadyTime::now();
      if (expires && status_.ok() && now >= deadline) {
        status_ = Status(StatusCode::kUnavailable, Reason::kLeaseLost,
                         "lease on " + node + " not renewed for " +
                             internal::millis_text(now - (valid_until_ - lease_.ttl)) + ": " +
                             registry + " has not answered a renewal sent " +
                             internal::millis_text(now - started) + " ago");
        generator_.suspend(status_);
      }
      if (expires && status_.ok()) {
        cv_.wait_until(lock, deadline, done);
      } else {
        cv_.wait(lock, done);
      }
    }
    lock.unlock();
    if (worker.joinable()) worker.join();
    lock.lock();
    next_renewal = renewals_ != renewals ? started + renew_interval_ : SteadyTime::now() + retry;
  }
}

}  // namespace flurry

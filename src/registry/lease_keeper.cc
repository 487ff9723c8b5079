// LeaseKeeper: renews a node ID's lease and suspends the generator before the lease could lapse.
//
// The keeper thread schedules renewals; each renewal runs on a short-lived worker thread so that
// a registry that does not answer (a hung disk, a black-holed connection) cannot stop the keeper
// from suspending the generator on time: the keeper waits for the worker only until the
// suspension deadline. The worker only calls the registry; the keeper thread applies the answer.
// Every generator suspend/resume happens under mu_ on the keeper thread (or in start()), so they
// are applied in the order the keeper decided them.
//
// Time: every reading and every wait goes through clock_. The keeper's waits end early on stop_
// (stop()) or, while a renewal is in progress, on the worker's own stop source, which it
// requests when the registry has answered.
#include "flurry/lease_keeper.h"

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>

#include "core/numbers.h"

namespace flurry {
namespace {

using std::chrono::milliseconds;

milliseconds or_third_of(milliseconds value, milliseconds ttl) {
  return value > milliseconds(0) ? value : ttl / 3;
}

}  // namespace

LeaseKeeper::LeaseKeeper(NodeRegistry& registry, Lease lease, Generator& generator,
                         MonotonicClock& clock, LeaseKeeperOptions options)
    : registry_(registry),
      lease_(std::move(lease)),
      generator_(generator),
      clock_(clock),
      renew_interval_(or_third_of(options.renew_interval, lease_.ttl)),
      safety_margin_(or_third_of(options.safety_margin, lease_.ttl)),
      ignore_expiry_(options.unsafe_ignore_expiry) {}

LeaseKeeper::~LeaseKeeper() {
  stop();
}

Status LeaseKeeper::start() {
  MutexLock lock(mu_);
  if (stop_.stop_requested()) {
    return Status(StatusCode::kFailedPrecondition, "the lease keeper for node " +
                                                       std::to_string(lease_.node) +
                                                       " was stopped; it cannot be started again");
  }
  if (thread_.joinable()) return OkStatus();
  const MonoTime now = clock_.now();
  valid_until_ = now + lease_.ttl;
  // The callback runs on the registry's thread and takes mu_; stop() destroys the watch before
  // the keeper goes, and never under mu_.
  Result<std::unique_ptr<NodeRegistry::LeaseWatch>> watch =
      registry_.watch_lease(lease_, [this](const Status& why) {
        MutexLock lock(mu_);
        lose(why);
      });
  if (watch.ok()) watch_ = std::move(watch).value();
  try {
    thread_ = std::thread([this, now, stop = stop_.get_token()] { loop(now, stop); });
  } catch (const std::system_error& e) {
    status_ =
        Status(Reason::kSuspended, "cannot start the lease keeper for node " +
                                       std::to_string(lease_.node) + ": no thread: " + e.what());
    generator_.suspend(status_);
    return status_;
  }
  return OkStatus();
}

void LeaseKeeper::stop() {
  std::thread thread;
  std::unique_ptr<NodeRegistry::LeaseWatch> watch;
  {
    MutexLock lock(mu_);
    thread = std::move(thread_);
    watch = std::move(watch_);
  }
  watch.reset();  // outside mu_: its destructor waits for a callback in progress, which takes mu_
  // Outside mu_: the stop wakes the keeper's wait, whose clock may run callbacks.
  stop_.request_stop();
  if (thread.joinable()) thread.join();
}

Status LeaseKeeper::status() const {
  MutexLock lock(mu_);
  return status_;
}

MonoTime LeaseKeeper::valid_until() const {
  MutexLock lock(mu_);
  if (lost_) return MonoTime::min();
  if (lease_.ttl <= milliseconds(0) || ignore_expiry_) return MonoTime::max();
  return valid_until_ - safety_margin_;
}

LeaseKeeperStats LeaseKeeper::stats() const {
  MutexLock lock(mu_);
  LeaseKeeperStats s;
  s.renewals = renewals_;
  s.renewal_failures = failures_;
  s.lost = lost_;
  s.watched = watch_ != nullptr;
  const Nanos left = valid_until_ - clock_.now();
  if (!lost_ && lease_.ttl > milliseconds(0) && left > Nanos::zero()) {
    s.remaining = std::chrono::duration_cast<milliseconds>(left);
  }
  return s;
}

Status LeaseKeeper::renew(MonoTime started, const std::string& registry) {
  const bool expires = lease_.ttl > milliseconds(0);
  Status answer;
  std::stop_source answered;
  std::thread worker;
  try {
    worker = std::thread([this, &answer, answered]() mutable {
      answer = registry_.renew(lease_);
      answered.request_stop();
    });
  } catch (const std::system_error&) {
    return registry_.renew(lease_);  // no thread to spare: renew here and accept that it may block
  }
  // A registry that hangs must not keep the generator issuing past the deadline.
  for (;;) {
    MonoTime wake = MonoTime::max();
    if (expires) {
      MutexLock lock(mu_);
      if (answered.stop_requested()) break;
      const MonoTime deadline = valid_until_ - safety_margin_;
      const MonoTime now = clock_.now();
      if (status_.ok() && now >= deadline && !ignore_expiry_) {
        status_ = Status(Reason::kLeaseExpiring,
                         "lease on node " + std::to_string(lease_.node) + " not renewed for " +
                             internal::millis_text(now - (valid_until_ - lease_.ttl)) + ": " +
                             registry + " has not answered a renewal sent " +
                             internal::millis_text(now - started) + " ago");
        generator_.suspend(status_);
      }
      if (status_.ok()) wake = deadline;
    }
    if (!clock_.wait_until(wake, answered.get_token())) break;
  }
  worker.join();
  return answer;
}

void LeaseKeeper::apply(const Status& renewed, MonoTime started) {
  MutexLock lock(mu_);
  const MonoTime now = clock_.now();
  if (renewed.ok()) {
    ++renewals_;
    valid_until_ = std::max(valid_until_, started + lease_.ttl);
  } else {
    ++failures_;
  }
  const std::string node = "node " + std::to_string(lease_.node);
  if (lost_) {
    // Lost for good: nothing brings the node ID back.
  } else if (is_lease_gone(renewed)) {
    lose(renewed);
  } else if (lease_.ttl <= milliseconds(0) || ignore_expiry_ ||
             now < valid_until_ - safety_margin_) {
    if (!status_.ok()) {
      status_ = OkStatus();
      generator_.resume();
    }
  } else {
    status_ =
        Status(Reason::kLeaseExpiring,
               "lease on " + node + " not renewed for " +
                   internal::millis_text(now - (valid_until_ - lease_.ttl)) + ": " +
                   (renewed.ok() ? "the last renewal took " + internal::millis_text(now - started)
                                 : renewed.message()));
    generator_.suspend(status_);
  }
}

void LeaseKeeper::lose(const Status& why) {
  if (lost_) return;  // told already (by a renewal or by the watch)
  lost_ = true;
  // LEASE_LOST, or REGISTRY_REGRESSED when the registry went backwards.
  status_ = Status(why.reason(), "the lease on node " + std::to_string(lease_.node) +
                                     " is lost: " + why.message());
  generator_.suspend(status_);
}

void LeaseKeeper::loop(MonoTime started, std::stop_token stop) {
  const bool expires = lease_.ttl > milliseconds(0);
  const milliseconds retry = std::min(std::max(renew_interval_ / 4, milliseconds(100)),
                                      std::max(renew_interval_, milliseconds(1)));
  const std::string registry = registry_.describe();  // not under mu_: it is the registry's
  if (renew_interval_ <= milliseconds(0)) {  // a lease without expiry and no interval given
    (void)clock_.wait_until(MonoTime::max(), stop);
    return;
  }
  MonoTime next_renewal = started + renew_interval_;
  for (;;) {
    // Wake for the next renewal, or at the suspension deadline if that comes first: then one
    // last renewal is tried, and the generator suspended unless it succeeds at once. A lost
    // lease is never renewed again: then only wait for stop().
    MonoTime wake = next_renewal;
    {
      MutexLock lock(mu_);
      if (lost_) {
        wake = MonoTime::max();
      } else if (expires && status_.ok()) {
        wake = std::min(wake, valid_until_ - safety_margin_);
      }
    }
    if (!clock_.wait_until(wake, stop)) return;

    started = clock_.now();
    const Status renewed = renew(started, registry);
    apply(renewed, started);
    next_renewal = renewed.ok() ? started + renew_interval_ : clock_.now() + retry;
  }
}

}  // namespace flurry

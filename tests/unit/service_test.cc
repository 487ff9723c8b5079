// The Service's node session and monitor on fake clocks: a real SQLite registry in a temporary
// directory, shared with a second registry that plays another process on the same host (it
// steals the service's node ID once its lease has expired, holds every node ID, frees one).
//
// Wall time (the registry's lease expiry, the IDs' time field) is a FakeClock that moves only
// when a test moves it. Monotonic time (the lease keeper's renewals, the monitor's 250 ms
// period, the re-claim backoff) is a FakeMonotonicClock: after each move the test waits
// (await_waiters) until the keeper and the monitor are asleep again, with a condition that tells
// which wake-up it waits for. Nothing sleeps or polls; real time is only the safety net of those
// waits.
//
// Timing of a session with lease TTL T: the keeper renews every T/3 and suspends the generator
// T/3 before the lease would lapse; the monitor looks every 250 ms after its previous look; a
// re-claim that fails waits 1 s, 2 s, 4 s, ... at most T. Each step below moves the monotonic
// clock so that exactly one of the two threads wakes.
#include "service/service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "app/notifier.h"
#include "fake_clock.h"
#include "flurry/clock.h"
#include "flurry/horizon.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/status.h"
#include "flurry/timefmt.h"
#include "host_guard_scope.h"
#include "service/event_log.h"
#include "service/prometheus.h"
#include "test_store.h"

namespace flurry::service {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using testing::FakeClock;
using testing::FakeMonotonicClock;
using testing::TempDir;

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// Two node IDs: the service and the other owner can hold every one of them.
Layout two_nodes() {
  return Layout::parse("time:41@1ms,node:1,seq:12;epoch=2025-01-01Z;bits=54").value();
}

// Four node IDs: enough for a re-claim to find a free one while the old one is taken.
Layout four_nodes() {
  return Layout::parse("time:41@1ms,node:2,seq:12;epoch=2025-01-01Z;bits=55").value();
}

class ServiceTest : public ::testing::Test {
 protected:
  ServiceTest() : wall_(parse_time("2026-01-01T00:00:00Z").value()), t0_(mono_.now()) {
    testing::use_own_host_guard_scope();
  }

  ~ServiceTest() override {
    // Before the clocks and the directory go: stops the monitor and the keeper.
    if (service_) service_->stop();
  }

  // Creates and starts the service with `layout` and a lease TTL of `ttl` at t0_, waits until
  // its keeper and monitor sleep, and opens the other owner's registry on the same file.
  void start_service(const Layout& layout, milliseconds ttl,
                     const std::function<void(ServiceOptions&)>& tweak = {}) {
    ServiceOptions options;
    options.registry.data_dir = dir_.path() / "data";
    options.registry.host_dir = dir_.path();  // this test's own host
    options.registry.lease_ttl = ttl;
    options.layout = layout;
    if (tweak) tweak(options);
    Result<std::unique_ptr<Service>> created = Service::create(options, Clocks{wall_, mono_});
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    service_ = std::move(created).value();
    if (listener_) service_->set_readiness_listener(listener_);
    const Status st = service_->start();
    ASSERT_TRUE(st.ok()) << st.to_string();
    // The lease keeper and the monitor.
    ASSERT_TRUE(mono_.await_waiters(2));
    Result<std::unique_ptr<NodeRegistry>> other = open_sqlite_registry(
        (options.registry.data_dir / "registry.db").string(), ttl, wall_, layout.to_string());
    ASSERT_TRUE(other.ok()) << other.status().to_string();
    other_ = std::move(other).value();
  }

  // Moves the monotonic clock to t0_ + at and waits until `ready` holds and then `n` threads
  // sleep on it again.
  [[nodiscard]] bool step(Nanos at, std::size_t n, const std::function<bool()>& ready) {
    mono_.set(t0_ + at);
    return mono_.await_waiters(n, ready);
  }
  // A step that wakes exactly one waiter (the monitor's tick): done once that wait returned
  // and `n` threads sleep again.
  [[nodiscard]] bool tick(Nanos at, std::size_t n = 2) {
    const std::uint64_t before = mono_.completed_waits();
    return step(at, n, [&] { return mono_.completed_waits() > before; });
  }

  // When the earliest sleeper wakes, in ms after t0_ (-1: nobody sleeps).
  std::int64_t next_wake_ms() const {
    const std::optional<MonoTime> wake = mono_.next_deadline();
    if (!wake) return -1;
    return std::chrono::duration_cast<milliseconds>(*wake - t0_).count();
  }

  // The value of an unlabelled sample of the service's metrics (NaN-free: -1 when missing).
  double metric(std::string_view name) const {
    std::string text;
    PrometheusWriter out(text);
    service_->write_metrics(out);
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
          line[name.size()] == ' ') {
        return std::stod(line.substr(name.size() + 1));
      }
    }
    ADD_FAILURE() << "no sample " << name << " in\n" << text;
    return -1;
  }

  // Issues `count` IDs; their node fields.
  std::vector<std::uint64_t> issued_nodes(std::size_t count) {
    std::vector<std::uint64_t> ids(count);
    const Status st = service_->issue(ids);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return {};
    std::vector<std::uint64_t> nodes;
    for (std::uint64_t id : ids) {
      Result<IdParts> parts = service_->layout().decompose(id);
      EXPECT_TRUE(parts.ok()) << parts.status().to_string();
      if (parts.ok()) nodes.push_back(parts->node);
    }
    return nodes;
  }

  Status issue_one() {
    std::uint64_t id = 0;
    return service_->issue(std::span<std::uint64_t>(&id, 1));
  }

  // The readiness message says the re-claim attempt `n` failed (and no later one).
  bool failed_attempts_are(std::uint64_t n) const {
    const std::string message = service_->readiness().message();
    return message.find("attempt " + std::to_string(n) + " failed") != std::string::npos;
  }

  // Lets the lease of the service on node 0 expire on the wall clock and has the other owner
  // claim it (and, with `all`, every other node ID too).
  std::vector<Claim> steal(milliseconds ttl, bool all) {
    wall_.advance(ttl + 500ms);
    std::vector<Claim> claims;
    const std::uint64_t count = all ? service_->layout().node_count() : 1;
    for (std::uint64_t i = 0; i < count; ++i) {
      Result<Claim> c = other_->claim("other-host:1", service_->layout().node_count());
      EXPECT_TRUE(c.ok()) << c.status().to_string();
      if (!c.ok()) break;
      EXPECT_EQ(c->lease.node, i);
      claims.push_back(*c);
    }
    return claims;
  }

  // The kinds of the events recorded so far, oldest first.
  std::vector<std::string> event_kinds() const {
    std::vector<std::string> kinds;
    for (const Event& e : service_->events().read().events) kinds.push_back(e.kind);
    return kinds;
  }
  // The events of `kind`, oldest first.
  std::vector<Event> events_of(std::string_view kind) const {
    std::vector<Event> out;
    for (const Event& e : service_->events().read().events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }

  TempDir dir_;
  FakeClock wall_;
  FakeMonotonicClock mono_;
  const MonoTime t0_;
  std::unique_ptr<NodeRegistry> other_;
  Service::ReadinessListener listener_;  // handed to the service by start_service
  std::unique_ptr<Service> service_;
};

// The service manager's side of sd_notify: what it was sent, in order.
class RecordingSink final : public app::NotifySink {
 public:
  void send(const std::string& state) override {
    std::lock_guard lock(mu_);
    sent_.push_back(state);
  }
  std::vector<std::string> sent() const {
    std::lock_guard lock(mu_);
    return sent_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> sent_;
};

// Expects UNAVAILABLE / RECLAIMING_NODE (retryable) naming the lost node.
void expect_reclaiming(const Status& st, std::uint64_t node) {
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kReclaimingNode) << st.to_string();
  EXPECT_TRUE(st.retryable()) << st.to_string();
  EXPECT_HAS(st.message(), "the lease on node " + std::to_string(node) +
                               " was lost to another owner; claiming a node ID again");
}

// The value of detail `key` of `e` (a monostate when absent).
EventValue detail(const Event& e, std::string_view key) {
  for (const EventDetail& d : e.details) {
    if (d.key == key) return d.value;
  }
  return {};
}

// Before start() and after stop() issue() and readiness() give one reason: SHUT_DOWN.
TEST_F(ServiceTest, NotServingHasOneReasonForIssueAndReadiness) {
  ServiceOptions options;
  options.registry.data_dir = dir_.path() / "data";
  options.registry.host_dir = dir_.path();  // this test's own host
  options.layout = two_nodes();
  Result<std::unique_ptr<Service>> created = Service::create(options, Clocks{wall_, mono_});
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  std::uint64_t id = 0;
  const Status issued = (*created)->issue(std::span<std::uint64_t>(&id, 1));
  const Status ready = (*created)->readiness();
  EXPECT_EQ(issued.reason(), Reason::kShutDown) << issued.to_string();
  EXPECT_EQ(ready.reason(), Reason::kShutDown) << ready.to_string();
  EXPECT_EQ(ready.message(), issued.message());
  (*created)->stop();
  EXPECT_EQ((*created)->readiness().reason(), Reason::kShutDown);
  EXPECT_EQ((*created)->issue(std::span<std::uint64_t>(&id, 1)).reason(), Reason::kShutDown);
}

TEST_F(ServiceTest, StolenLeaseIsReplacedByAnotherNode) {
  constexpr milliseconds kTtl = 1000ms;  // keeper: renews every 333 ms, suspends 333 ms early
  ASSERT_NO_FATAL_FAILURE(start_service(four_nodes(), kTtl));
  ASSERT_EQ(service_->node(), 0u);
  ASSERT_TRUE(service_->readiness().ok()) << service_->readiness().to_string();
  EXPECT_EQ(issued_nodes(3), (std::vector<std::uint64_t>{0, 0, 0}));
  // Monitor at 250 ms, keeper at 333 ms.
  EXPECT_EQ(next_wake_ms(), 250);

  // The monitor looks (next at 550 ms), then the keeper renews (next at 673 ms).
  ASSERT_TRUE(tick(300ms));
  ASSERT_TRUE(step(340ms, 2, [&] { return metric("flurry_lease_renewals_total") == 1; }));
  EXPECT_EQ(metric("flurry_lease_renewal_failures_total"), 0);
  EXPECT_EQ(metric("flurry_node_id"), 0);
  EXPECT_EQ(metric("flurry_ready"), 1);
  const double ids_before = metric("flurry_ids_issued_total");

  // The wall clock passes the TTL without a renewal (the process was frozen, say) and another
  // owner claims node 0.
  const std::vector<Claim> stolen = steal(kTtl, false);
  ASSERT_EQ(stolen.size(), 1u);

  // The monitor looks before the keeper noticed: nothing to do yet (next at 850 ms).
  ASSERT_TRUE(tick(600ms));
  EXPECT_EQ(service_->node(), 0u);

  // The keeper's renewal finds the node ID taken: lost for good.
  ASSERT_TRUE(step(700ms, 2, [&] { return metric("flurry_lease_renewal_failures_total") == 1; }));
  const Status lost = service_->readiness();
  expect_reclaiming(lost, 0);
  EXPECT_HAS(lost.message(), "is lost");
  const Status refused = issue_one();
  expect_reclaiming(refused, 0);
  EXPECT_EQ(metric("flurry_ready"), 0);
  EXPECT_EQ(metric("flurry_lease_renewals_total"), 1);
  EXPECT_EQ(service_->node(), 0u);
  // The keeper waits for nothing but its stop now; the monitor looks next at 850 ms.
  EXPECT_EQ(next_wake_ms(), 850);

  // The monitor retires the session and claims node 1 (node 0 is the other owner's).
  ASSERT_TRUE(step(850ms, 2, [&] { return service_->node() == 1 && service_->readiness().ok(); }));
  EXPECT_EQ(issued_nodes(5), (std::vector<std::uint64_t>(5, 1)));
  EXPECT_EQ(metric("flurry_node_id"), 1);
  EXPECT_EQ(metric("flurry_ready"), 1);
  // The counters of the lost session are kept.
  EXPECT_EQ(metric("flurry_lease_renewals_total"), 1);
  EXPECT_EQ(metric("flurry_lease_renewal_failures_total"), 1);
  EXPECT_EQ(metric("flurry_ids_issued_total"), ids_before + 5);
  EXPECT_EQ(metric("flurry_registry_regressions_total"), 0);

  // The new keeper renews on its own schedule (the re-claim at 850 ms: next at 1183 ms), after
  // the monitor's look at 1100 ms; the counter goes on from the old session's.
  ASSERT_TRUE(tick(1100ms));
  ASSERT_TRUE(step(1190ms, 2, [&] { return metric("flurry_lease_renewals_total") == 2; }));
  EXPECT_TRUE(service_->readiness().ok()) << service_->readiness().to_string();

  // The other owner still holds node 0: the service never took it back.
  EXPECT_TRUE(other_->renew(stolen[0].lease).ok());
}

// The node ID is taken while the service is not looking, and a request needs a horizon write
// before the keeper's next renewal: the write finds the lease gone first. The IDs issued in
// between stay below the horizon the new owner inherited (so they cannot collide with its IDs);
// issue() and readiness() then both say a node ID is being claimed again, and the monitor
// re-claims at its next look, without waiting for the keeper's renewal.
TEST_F(ServiceTest, HorizonWriteFindsTheLeaseGoneBeforeTheKeeper) {
  constexpr milliseconds kTtl = 1000ms;
  ASSERT_NO_FATAL_FAILURE(start_service(four_nodes(), kTtl));
  const std::vector<Claim> stolen = steal(kTtl, false);
  ASSERT_EQ(stolen.size(), 1u);
  ASSERT_TRUE(stolen[0].inherited.has_value());
  const HorizonRecord& inherited = *stolen[0].inherited;
  const std::int64_t horizon = inherited.horizons.at(inherited.generation);
  const Layout& layout = service_->layout();
  ASSERT_GT(layout.time_of(static_cast<std::uint64_t>(horizon)), wall_.now());

  // Below the inherited horizon the service may still issue on node 0 (nothing tells it yet).
  std::vector<std::uint64_t> ids(3);
  if (const Status st = service_->issue(ids); st.ok()) {
    for (std::uint64_t id : ids) {
      const IdParts parts = layout.decompose(id).value();
      EXPECT_EQ(parts.node, 0u);
      EXPECT_LE(static_cast<std::int64_t>(parts.ticks), horizon);
    }
  } else {
    expect_reclaiming(st, 0);
  }

  // Past the inherited horizon an ID needs a horizon write, which the registry refuses.
  wall_.set(layout.time_of(static_cast<std::uint64_t>(horizon) + 1));
  {
    SCOPED_TRACE("issue() once the horizon write failed");
    expect_reclaiming(issue_one(), 0);
  }
  {
    SCOPED_TRACE("readiness() once the horizon write failed");
    expect_reclaiming(service_->readiness(), 0);
  }
  EXPECT_EQ(metric("flurry_ready"), 0);

  // The failed write is proof enough: the monitor's look at 250 ms re-claims node 1 without
  // waiting for the keeper's renewal at 333 ms (which never runs: the old keeper is stopped).
  ASSERT_TRUE(step(300ms, 2, [&] { return service_->node() == 1 && service_->readiness().ok(); }));
  EXPECT_EQ(metric("flurry_lease_renewal_failures_total"), 0);
  EXPECT_EQ(issued_nodes(2), (std::vector<std::uint64_t>(2, 1)));
  // The old lease was not released: node 0 is still the other owner's.
  EXPECT_EQ(other_->renew(stolen[0].lease).code(), StatusCode::kOk);
  // The keeper never said so, yet the loss is an event, before the re-claim's.
  const std::vector<Event> lost = events_of("lease_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node, 0u);
  EXPECT_EQ(std::get<std::string>(detail(lost[0], "reason")), "LEASE_LOST");
  const std::vector<Event> reclaimed = events_of("lease_reclaimed");
  ASSERT_EQ(reclaimed.size(), 1u);
  EXPECT_LT(lost[0].seq, reclaimed[0].seq);
}

TEST_F(ServiceTest, ReclaimBacksOffUntilANodeIdIsFree) {
  constexpr milliseconds kTtl = 5000ms;  // keeper: renews every 1666 ms; backoff cap 5 s
  ASSERT_NO_FATAL_FAILURE(start_service(two_nodes(), kTtl));
  ASSERT_EQ(service_->node(), 0u);
  const std::vector<Claim> held = steal(kTtl, true);
  ASSERT_EQ(held.size(), 2u);

  // The monitor looks at 1500 ms (next at 1750 ms), the keeper's renewal at 1666 ms finds the
  // lease lost.
  ASSERT_TRUE(tick(1500ms));
  ASSERT_TRUE(step(1700ms, 2, [&] { return metric("flurry_lease_renewal_failures_total") == 1; }));
  expect_reclaiming(service_->readiness(), 0);

  // The monitor retires the session and tries once at 1750 ms: no node ID is free. Only the
  // monitor sleeps now (the old keeper was stopped).
  ASSERT_TRUE(step(1750ms, 1, [&] { return failed_attempts_are(1); }));
  {
    const Status st = service_->readiness();
    expect_reclaiming(st, 0);
    EXPECT_HAS(st.message(), "attempt 1 failed: cannot claim a node ID from");
    EXPECT_EQ(mono_.waiters(), 1u);
    expect_reclaiming(issue_one(), 0);
    EXPECT_EQ(metric("flurry_ready"), 0);
    EXPECT_EQ(metric("flurry_node_id"), 0);
  }

  // Retries after 1 s, 2 s, 4 s, then every 5 s (the TTL). Never a moment early.
  std::int64_t at = 1750;
  const std::vector<std::int64_t> backoffs = {1000, 2000, 4000, 5000, 5000};
  for (std::size_t i = 0; i < backoffs.size(); ++i) {
    const std::uint64_t attempt = i + 1;
    SCOPED_TRACE("after attempt " + std::to_string(attempt));
    at += backoffs[i];
    ASSERT_EQ(next_wake_ms(), at);
    const std::uint64_t waits = mono_.completed_waits();
    mono_.set(t0_ + milliseconds(at - 1));
    // set() releases every waiter it reaches before it returns: nobody woke.
    EXPECT_EQ(mono_.completed_waits(), waits);
    EXPECT_EQ(mono_.waiters(), 1u);
    EXPECT_TRUE(failed_attempts_are(attempt)) << service_->readiness().to_string();
    ASSERT_TRUE(step(milliseconds(at), 1, [&] { return failed_attempts_are(attempt + 1); }));
    EXPECT_EQ(service_->node(), 0u);
  }
  EXPECT_EQ(next_wake_ms(), at + 5000);

  // The other owner lets go of node 1: the next attempt takes it.
  ASSERT_TRUE(other_->release(held[1].lease).ok());
  mono_.set(t0_ + milliseconds(at + 4999));
  EXPECT_FALSE(service_->readiness().ok());
  ASSERT_TRUE(step(milliseconds(at + 5000), 2,
                   [&] { return service_->node() == 1 && service_->readiness().ok(); }));
  EXPECT_EQ(issued_nodes(4), (std::vector<std::uint64_t>(4, 1)));
  EXPECT_EQ(metric("flurry_node_id"), 1);
  EXPECT_EQ(metric("flurry_ready"), 1);
  // Back to the monitor's period and the new keeper's schedule.
  EXPECT_EQ(next_wake_ms(), at + 5000 + 250);
  // Node 0 is still the other owner's.
  EXPECT_TRUE(other_->renew(held[0].lease).ok());
}

TEST_F(ServiceTest, StopInterruptsAReclaim) {
  constexpr milliseconds kTtl = 5000ms;
  ASSERT_NO_FATAL_FAILURE(start_service(two_nodes(), kTtl));
  const std::vector<Claim> held = steal(kTtl, true);
  ASSERT_EQ(held.size(), 2u);
  ASSERT_TRUE(tick(1500ms));
  ASSERT_TRUE(step(1700ms, 2, [&] { return metric("flurry_lease_renewal_failures_total") == 1; }));
  ASSERT_TRUE(step(1750ms, 1, [&] { return failed_attempts_are(1); }));
  // The monitor waits for its retry at 2750 ms, which never comes: stop() interrupts it.
  ASSERT_EQ(next_wake_ms(), 2750);

  const auto began = std::chrono::steady_clock::now();
  service_->stop();
  const auto took = std::chrono::steady_clock::now() - began;
  EXPECT_LT(took, 2s) << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  EXPECT_EQ(mono_.waiters(), 0u);
  EXPECT_EQ(mono_.now(), t0_ + 1750ms);  // nobody moved the clock

  const Status ready = service_->readiness();
  EXPECT_EQ(ready.code(), StatusCode::kUnavailable) << ready.to_string();
  EXPECT_EQ(ready.reason(), Reason::kShutDown) << ready.to_string();
  const Status issued = issue_one();
  EXPECT_EQ(issued.reason(), Reason::kShutDown) << issued.to_string();
  EXPECT_EQ(metric("flurry_ready"), 0);

  // No further attempt ran: the other owner's leases are untouched and a free node ID is not
  // taken by the stopped service.
  ASSERT_TRUE(other_->release(held[1].lease).ok());
  mono_.advance(10s);
  EXPECT_EQ(mono_.waiters(), 0u);
  EXPECT_TRUE(other_->renew(held[0].lease).ok());
  Result<Claim> again = other_->claim("other-host:1", 2);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->lease.node, 1u);
  service_->stop();  // idempotent
}

}  // namespace
}  // namespace flurry::service

namespace flurry::service {
namespace {

// The monitor hands its readiness to the listener `flurry serve` wires to the systemd notifier:
// READY=1 once, when the front ends serve and the service is ready; then one STATUS= line per
// change (the lease lost and a node ID claimed again, the new node ready), nothing while nothing
// changes; STOPPING=1 once, and nothing after it.
TEST_F(ServiceTest, ReadinessListenerFollowsALostLeaseAndItsReclaim) {
  constexpr milliseconds kTtl = 1000ms;
  RecordingSink sink;
  app::ReadinessNotifier notifier(&sink);
  listener_ = [&notifier](std::uint64_t node, const Status& readiness) {
    notifier.update(node, readiness);
  };
  notifier.starting("sqlite");
  ASSERT_NO_FATAL_FAILURE(start_service(four_nodes(), kTtl));
  const std::string registry = service_->registry_description();
  EXPECT_EQ(sink.sent(),
            (std::vector<std::string>{"STATUS=starting: claiming a node ID (registry sqlite)"}));
  notifier.serving(service_->node(), registry, service_->readiness());
  ASSERT_EQ(sink.sent().size(), 2u);
  EXPECT_EQ(sink.sent()[1], "READY=1\nSTATUS=node 0, registry " + registry + ": ready");

  // The monitor's looks while ready send nothing.
  ASSERT_TRUE(tick(300ms));
  ASSERT_TRUE(step(340ms, 2, [&] { return metric("flurry_lease_renewals_total") == 1; }));
  EXPECT_EQ(sink.sent().size(), 2u);

  // Node 0 is taken by another owner; the keeper finds out, the monitor claims node 1.
  ASSERT_EQ(steal(kTtl, false).size(), 1u);
  ASSERT_TRUE(tick(600ms));
  ASSERT_TRUE(step(700ms, 2, [&] { return metric("flurry_lease_renewal_failures_total") == 1; }));
  ASSERT_TRUE(step(850ms, 2, [&] { return service_->node() == 1 && sink.sent().size() >= 4; }));
  const std::vector<std::string> sent = sink.sent();
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_HAS(sent[2], "STATUS=node 0, registry " + registry +
                          ": not ready: RECLAIMING_NODE the lease on node 0");
  EXPECT_EQ(sent[3], "STATUS=node 1, registry " + registry + ": ready");  // no second READY=1
  ASSERT_TRUE(tick(1100ms));
  EXPECT_EQ(sink.sent().size(), 4u);

  notifier.stopping("SIGTERM");
  notifier.stopping("SIGINT");
  notifier.update(1, Status(Reason::kShutDown, "the service is shutting down"));
  ASSERT_EQ(sink.sent().size(), 5u);
  EXPECT_EQ(sink.sent()[4],
            "STOPPING=1\nSTATUS=stopping (SIGTERM): draining requests, then releasing node 1");
}

// A lost lease and its re-claim are events, besides the log lines: lease_claimed at start,
// lease_lost, lease_reclaimed with the old and new node.
TEST_F(ServiceTest, LostLeaseAndReclaimAreEvents) {
  constexpr milliseconds kTtl = 1000ms;
  ASSERT_NO_FATAL_FAILURE(start_service(four_nodes(), kTtl));
  ASSERT_EQ(event_kinds(), std::vector<std::string>{"lease_claimed"});
  const Event claimed = service_->events().read().events[0];
  EXPECT_EQ(claimed.seq, 1u);
  EXPECT_EQ(claimed.node, 0u);
  EXPECT_EQ(claimed.level, EventLevel::kInfo);
  EXPECT_EQ(std::get<std::int64_t>(detail(claimed, "token")), 1);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(detail(claimed, "horizon_time")));

  ASSERT_TRUE(tick(300ms));
  ASSERT_TRUE(step(340ms, 2, [&] { return metric("flurry_lease_renewals_total") == 1; }));
  ASSERT_EQ(steal(kTtl, false).size(), 1u);
  ASSERT_TRUE(tick(600ms));
  ASSERT_TRUE(step(700ms, 2, [&] { return metric("flurry_lease_renewal_failures_total") == 1; }));
  ASSERT_TRUE(step(850ms, 2, [&] { return service_->node() == 1; }));
  const std::vector<Event> lost = events_of("lease_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].level, EventLevel::kError);
  EXPECT_EQ(lost[0].node, 0u);
  EXPECT_EQ(std::get<std::string>(detail(lost[0], "reason")), "LEASE_LOST");
  const std::vector<Event> reclaimed = events_of("lease_reclaimed");
  ASSERT_EQ(reclaimed.size(), 1u);
  EXPECT_EQ(std::get<std::int64_t>(detail(reclaimed[0], "old_node")), 0);
  EXPECT_EQ(std::get<std::int64_t>(detail(reclaimed[0], "new_node")), 1);
  EXPECT_EQ(std::get<std::int64_t>(detail(reclaimed[0], "attempts")), 1);
  EXPECT_LT(lost[0].seq, reclaimed[0].seq);
  EXPECT_EQ(service_->state().lease, ServiceState::Lease::kHeld);
}

// The monitor compares how far the wall clock moved with the monotonic clock at each look: a
// step back within max_lead is absorbed, one beyond it is left to the rollback policy, a step
// forward is named so; clocks that move together make no event.
TEST_F(ServiceTest, WallClockStepsAreEvents) {
  ASSERT_NO_FATAL_FAILURE(start_service(four_nodes(), 6000ms));  // max_lead 1000 ms
  wall_.advance(250ms);
  ASSERT_TRUE(tick(250ms));
  EXPECT_TRUE(events_of("clock_step").empty());

  wall_.advance(250ms - 600ms);  // 600 ms back
  ASSERT_TRUE(tick(500ms));
  std::vector<Event> steps = events_of("clock_step");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].level, EventLevel::kWarning);
  EXPECT_EQ(std::get<std::int64_t>(detail(steps[0], "step_ms")), -600);
  EXPECT_EQ(std::get<std::int64_t>(detail(steps[0], "max_lead_ms")), 1000);
  EXPECT_EQ(std::get<std::string>(detail(steps[0], "outcome")), "absorbed");
  EXPECT_TRUE(std::holds_alternative<double>(detail(steps[0], "lead_ms")));
  EXPECT_HAS(steps[0].message, "stepped back 600 ms; absorbed");
  EXPECT_EQ(service_->state().clock_steps, 1u);

  wall_.advance(250ms - 2000ms);  // 2 s back: beyond max_lead
  ASSERT_TRUE(tick(750ms));
  steps = events_of("clock_step");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(std::get<std::int64_t>(detail(steps[1], "step_ms")), -2000);
  EXPECT_EQ(std::get<std::string>(detail(steps[1], "outcome")), "beyond_max_lead");

  wall_.advance(250ms + 49ms);  // below the threshold
  ASSERT_TRUE(tick(1000ms));
  EXPECT_EQ(events_of("clock_step").size(), 2u);
  wall_.advance(250ms + 700ms);
  ASSERT_TRUE(tick(1250ms));
  steps = events_of("clock_step");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(std::get<std::int64_t>(detail(steps[2], "step_ms")), 700);
  EXPECT_EQ(std::get<std::string>(detail(steps[2], "outcome")), "forward");
  EXPECT_EQ(service_->state().clock_steps, 3u);
}

// Demand above the layout's rate makes throttle waits: throttling_started at the next look,
// throttling_ended once a second passed without one, with the duration and the count.
TEST_F(ServiceTest, ThrottlingStartsAndEnds) {
  // Two IDs a millisecond, and no lead: the third ID of a millisecond waits for the next.
  const Layout slow = Layout::parse("time:41@1ms,node:2,seq:1;epoch=2025-01-01Z;bits=44").value();
  ASSERT_NO_FATAL_FAILURE(start_service(slow, 6000ms, [](ServiceOptions& o) { o.max_lead = 1ms; }));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(issue_one().ok());
  const std::uint64_t waits = service_->state().generator.throttle_waits;
  ASSERT_GT(waits, 0u);
  EXPECT_FALSE(service_->state().throttling);
  const auto both = [&](Nanos d) { wall_.advance(d); };
  both(250ms);
  ASSERT_TRUE(tick(250ms));
  std::vector<Event> started = events_of("throttling_started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(std::get<std::int64_t>(detail(started[0], "waits")), static_cast<std::int64_t>(waits));
  EXPECT_TRUE(service_->state().throttling);
  for (const Nanos at : {500ms, 750ms, 1000ms}) {
    both(250ms);
    ASSERT_TRUE(tick(at));
    EXPECT_TRUE(events_of("throttling_ended").empty()) << at.count();
    EXPECT_TRUE(service_->state().throttling);
  }
  both(250ms);
  ASSERT_TRUE(tick(1250ms));
  const std::vector<Event> ended = events_of("throttling_ended");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(std::get<std::int64_t>(detail(ended[0], "waits")), static_cast<std::int64_t>(waits));
  EXPECT_EQ(std::get<std::int64_t>(detail(ended[0], "duration_ms")), 0);
  EXPECT_FALSE(service_->state().throttling);
}

// The ring keeps the last `capacity` events: the oldest go first and are counted, seqs keep
// growing, since= picks the newer ones.
TEST(EventLogTest, RingDropsTheOldestAndReadsSince) {
  FakeClock wall(parse_time("2026-01-01T00:00:00Z").value());
  EventLog log(wall, 4);
  EXPECT_EQ(log.read().next_seq, 1u);
  EXPECT_TRUE(log.read().events.empty());
  for (int i = 1; i <= 6; ++i) {
    wall.advance(1ms);
    EXPECT_EQ(log.record(EventLevel::kInfo, "test", 7, "event " + std::to_string(i),
                         {{"i", std::int64_t{i}}, {"half", i / 2.0}, {"name", "x"}, {"none", {}}},
                         EventLog::Line::kAlreadyLogged),
              static_cast<std::uint64_t>(i));
  }
  const EventPage all = log.read();
  EXPECT_EQ(all.capacity, 4u);
  EXPECT_EQ(all.dropped, 2u);
  EXPECT_EQ(all.next_seq, 7u);
  ASSERT_EQ(all.events.size(), 4u);
  EXPECT_EQ(all.events[0].seq, 3u);
  EXPECT_EQ(all.events[0].message, "event 3");
  EXPECT_EQ(all.events[0].node, 7u);
  EXPECT_EQ(all.events[0].unix_ms, 1767225600000 + 3);
  ASSERT_EQ(all.events[0].details.size(), 4u);
  EXPECT_EQ(all.events[0].details[1].key, "half");
  EXPECT_EQ(std::get<double>(all.events[0].details[1].value), 1.5);
  EXPECT_EQ(all.events[3].seq, 6u);
  EXPECT_EQ(log.read(4).events.size(), 2u);
  EXPECT_EQ(log.read(4).events[0].seq, 5u);
  EXPECT_EQ(log.read(1).events.size(), 4u);  // older than the ring: all it holds
  EXPECT_TRUE(log.read(6).events.empty());
  EXPECT_TRUE(log.read(100).events.empty());
}

// Threads recording at once: every seq once, none lost, the ring in seq order.
TEST(EventLogTest, ConcurrentRecordsGetDistinctSeqs) {
  FakeClock wall(parse_time("2026-01-01T00:00:00Z").value());
  EventLog log(wall, 10000);
  constexpr int kThreads = 4;
  constexpr int kEach = 500;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&log] {
        for (int i = 0; i < kEach; ++i) {
          (void)log.record(EventLevel::kWarning, "test", 0, "m", {},
                           EventLog::Line::kAlreadyLogged);
        }
      });
    }
  }
  const EventPage page = log.read();
  ASSERT_EQ(page.events.size(), static_cast<std::size_t>(kThreads * kEach));
  for (std::size_t i = 0; i < page.events.size(); ++i) EXPECT_EQ(page.events[i].seq, i + 1);
  EXPECT_EQ(page.next_seq, static_cast<std::uint64_t>(kThreads * kEach + 1));
  EXPECT_EQ(page.dropped, 0u);
}

// A STATUS= line stays one short line whatever the message holds; a null sink sends nothing.
TEST(ReadinessNotifierTest, StatusIsOneShortLine) {
  const std::string text = app::ReadinessNotifier::status_text(
      7, "etcd:127.0.0.1:2379",
      Status(Reason::kClockBehind, "line one\nline two " + std::string(500, 'x')));
  EXPECT_EQ(text.find('\n'), std::string::npos) << text;
  EXPECT_HAS(text,
             "node 7, registry etcd:127.0.0.1:2379: not ready: CLOCK_BEHIND line one line two x");
  EXPECT_LE(text.size(), 240u) << text;
  app::ReadinessNotifier silent(nullptr);
  silent.starting("sqlite");
  silent.serving(1, "sqlite:x", OkStatus());
  silent.stopping("SIGTERM");  // nothing to send to: no crash, nothing else
}

}  // namespace
}  // namespace flurry::service

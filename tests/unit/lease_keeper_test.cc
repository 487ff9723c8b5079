// LeaseKeeper on a real SQLite registry, with faults injected by a wrapper (FaultyRegistry): it
// renews on schedule, suspends the generator exactly when the lease could lapse (failing or
// hung renewals), resumes it after a successful renewal, and stays suspended for good when
// another owner took the node ID or the registry went backwards.
//
// The keeper runs on a FakeMonotonicClock: nothing happens until a test moves the clock, and
// after a move the test waits (await_waiters) until the keeper is asleep again. No test sleeps
// or polls; real time is only the safety net of those waits. The registry's lease times run on a
// fake wall clock of their own.
#include "flurry/lease_keeper.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "fake_clock.h"
#include "faulty_registry.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "no_threads.h"
#include "test_store.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::FakeMonotonicClock;
using testing::FaultyRegistry;
using testing::TempDir;
using Op = FaultyRegistry::Op;

// The flurry preset's canonical text: the layout these tests' registries belong to.
constexpr std::string_view kFlurryLayout =
    "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";

// wake_ms() of a keeper that waits without a deadline.
constexpr std::int64_t kNoDeadline = std::numeric_limits<std::int64_t>::max();

// Ends a hang of renewals when it goes out of scope: declared after a keeper, it lets the keeper's
// stop() (which waits for a renewal in progress) return even when an assertion failed first.
class EndHangOnExit {
 public:
  explicit EndHangOnExit(FaultyRegistry& registry) : registry_(registry) {}
  ~EndHangOnExit() { registry_.hang(Op::kRenew, false); }
  EndHangOnExit(const EndHangOnExit&) = delete;
  EndHangOnExit& operator=(const EndHangOnExit&) = delete;

 private:
  FaultyRegistry& registry_;
};

// Renewal attempts the keeper has finished (their outcome applied).
std::uint64_t attempts(const LeaseKeeper& keeper) {
  const LeaseKeeperStats s = keeper.stats();
  return s.renewals + s.renewal_failures;
}

// In a death test's child: reports a failed expectation and exits with a failure.
void require(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "child: %.*s\n", static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  _exit(1);
}

class LeaseKeeperTest : public ::testing::Test {
 protected:
  LeaseKeeperTest()
      : registry_clock_(parse_time("2026-01-01T00:00:00Z").value()),
        gen_clock_(parse_time("2026-01-01T00:00:00Z").value()),
        t0_(mono_.now()) {}

  // Opens the registry with `ttl`, claims a node and builds a generator on it.
  void set_up(std::chrono::milliseconds ttl = 300ms) {
    auto r = open_sqlite_registry(db_path(), ttl, registry_clock_, kFlurryLayout);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    sqlite_ = std::move(r).value();
    faulty_ = std::make_unique<FaultyRegistry>(*sqlite_);
    Result<Claim> c = faulty_->claim("test:1", 1024);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    claim_ = *c;
    store_ = std::make_unique<LeasedHorizonStore>(*faulty_, claim_);
    GeneratorOptions o;
    o.node = claim_.lease.node;
    o.background_horizon = false;
    auto g = Generator::create(Layout::parse("flurry").value(), o, gen_clock_, *store_);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    gen_ = std::move(g).value();
  }

  std::string db_path() const { return (dir_.path() / "registry.db").string(); }
  bool issues() { return gen_->next().ok(); }

  // Moves the keeper's clock to `at` after t0_ and waits until the keeper has finished `n`
  // renewal attempts in all and is asleep again.
  [[nodiscard]] bool settle_at(Nanos at, const LeaseKeeper& keeper, std::uint64_t n) {
    mono_.set(t0_ + at);
    return mono_.await_waiters(1, [&] { return attempts(keeper) >= n; });
  }
  // When the sleeping keeper wakes next, in ms after t0_ (kNoDeadline: only when told; -1: it
  // does not sleep).
  std::int64_t wake_ms() const {
    const std::optional<MonoTime> wake = mono_.next_deadline();
    if (!wake) return -1;
    if (*wake == MonoTime::max()) return kNoDeadline;
    return std::chrono::duration_cast<std::chrono::milliseconds>(*wake - t0_).count();
  }

  TempDir dir_;
  FakeClock registry_clock_;
  FakeClock gen_clock_;
  FakeMonotonicClock mono_;
  const MonoTime t0_;  // the keepers start here
  std::unique_ptr<NodeRegistry> sqlite_;
  std::unique_ptr<FaultyRegistry> faulty_;
  Claim claim_;
  std::unique_ptr<LeasedHorizonStore> store_;
  std::unique_ptr<Generator> gen_;
};

// With the default options (TTL 300 ms): renew every 100 ms, suspend 200 ms after the start of
// the last successful renewal.
TEST_F(LeaseKeeperTest, RenewsOnScheduleWhileTheRegistryAnswers) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  EXPECT_EQ(keeper.lease().node, claim_.lease.node);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(keeper.start().ok());  // already running: no second thread
  ASSERT_TRUE(mono_.await_waiters(1));
  EXPECT_EQ(mono_.waiters(), 1u);
  EXPECT_EQ(wake_ms(), 100);
  EXPECT_EQ(keeper.stats().remaining, 300ms);  // the claim counts as a renewal

  mono_.set(t0_ + 99ms);  // not yet
  ASSERT_TRUE(mono_.await_waiters(1));
  EXPECT_EQ(faulty_->calls(Op::kRenew), 0u);
  EXPECT_EQ(keeper.stats().remaining, 201ms);

  for (std::uint64_t i = 1; i <= 3; ++i) {
    ASSERT_TRUE(settle_at(i * 100ms, keeper, i)) << i;
    EXPECT_EQ(keeper.stats().renewals, i);
    EXPECT_EQ(faulty_->calls(Op::kRenew), i);
    EXPECT_EQ(wake_ms(), static_cast<std::int64_t>(i + 1) * 100);
    EXPECT_EQ(keeper.stats().remaining, 300ms);  // renewed just now
  }
  mono_.set(t0_ + 350ms);
  ASSERT_TRUE(mono_.await_waiters(1));
  const LeaseKeeperStats stats = keeper.stats();
  EXPECT_EQ(stats.renewals, 3u);
  EXPECT_EQ(stats.renewal_failures, 0u);
  EXPECT_FALSE(stats.lost);
  EXPECT_EQ(stats.remaining, 250ms);
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(issues());
  keeper.stop();
  EXPECT_EQ(mono_.waiters(), 0u);
  keeper.stop();  // idempotent
  EXPECT_EQ(faulty_->calls(Op::kRenew), 3u);
}

TEST_F(LeaseKeeperTest, SuspendsWhenRenewalsFailPastTheMarginAndResumesAfterwards) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(settle_at(100ms, keeper, 1));  // valid until 400 ms: suspends at 300 ms
  faulty_->fail(Op::kRenew, FaultyRegistry::unreachable());

  // A failure before the deadline: still issuing; retried 100 ms later, at the deadline.
  ASSERT_TRUE(settle_at(200ms, keeper, 2));
  EXPECT_EQ(keeper.stats().renewal_failures, 1u);
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(issues());
  EXPECT_EQ(wake_ms(), 300);
  mono_.set(t0_ + 300ms - 1ns);
  ASSERT_TRUE(mono_.await_waiters(1));
  EXPECT_TRUE(issues());
  EXPECT_EQ(attempts(keeper), 2u);

  // At the deadline the last try fails too: suspended.
  ASSERT_TRUE(settle_at(300ms, keeper, 3));
  const Result<std::uint64_t> refused = gen_->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().to_string();
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseExpiring) << refused.status().to_string();
  EXPECT_TRUE(refused.status().retryable());
  const Status status = keeper.status();
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.reason(), Reason::kLeaseExpiring);
  EXPECT_EQ(status.message(),
            "lease on node 0 not renewed for 200 ms: injected failure: registry unreachable");
  EXPECT_FALSE(gen_->health().ok());
  EXPECT_EQ(keeper.stats().renewal_failures, 2u);
  EXPECT_FALSE(keeper.stats().lost);
  EXPECT_EQ(keeper.stats().remaining, 100ms);
  EXPECT_EQ(wake_ms(), 400);  // retries every 100 ms

  ASSERT_TRUE(settle_at(400ms, keeper, 4));
  EXPECT_FALSE(issues());
  EXPECT_EQ(keeper.stats().remaining, 0ms);
  EXPECT_EQ(keeper.status().message(),
            "lease on node 0 not renewed for 300 ms: injected failure: registry unreachable");

  // The registry answers again: the next renewal resumes the generator.
  faulty_->heal(Op::kRenew);
  ASSERT_TRUE(settle_at(500ms, keeper, 5));
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(gen_->health().ok()) << gen_->health().to_string();
  EXPECT_TRUE(issues());
  EXPECT_EQ(keeper.stats().renewals, 2u);
  EXPECT_EQ(keeper.stats().remaining, 300ms);
  EXPECT_EQ(wake_ms(), 600);
}

TEST_F(LeaseKeeperTest, ShortOutageDoesNotSuspend) {
  ASSERT_NO_FATAL_FAILURE(set_up(3s));
  LeaseKeeperOptions options;
  options.renew_interval = 100ms;
  options.safety_margin = 1s;  // suspends 2 s after the last successful renewal
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_, options);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(settle_at(100ms, keeper, 1));  // suspends at 2.1 s
  faulty_->fail(Op::kRenew, FaultyRegistry::unreachable());
  for (std::uint64_t i = 2; i <= 19; ++i) {  // fails every 100 ms up to 1.9 s
    ASSERT_TRUE(settle_at(i * 100ms, keeper, i)) << i;
    ASSERT_TRUE(issues()) << i;
    ASSERT_TRUE(keeper.status().ok()) << i << ": " << keeper.status().to_string();
  }
  EXPECT_EQ(keeper.stats().renewal_failures, 18u);
  EXPECT_EQ(keeper.stats().remaining, 1200ms);
  faulty_->heal(Op::kRenew);
  ASSERT_TRUE(settle_at(2s, keeper, 20));
  EXPECT_EQ(keeper.stats().renewals, 2u);
  EXPECT_EQ(keeper.stats().remaining, 3s);
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(issues());
}

TEST_F(LeaseKeeperTest, NodeClaimedByAnotherOwnerStaysSuspended) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(settle_at(100ms, keeper, 1));

  // The registry's clock jumps past the TTL and another process takes the node ID.
  registry_clock_.advance(1s);
  auto other = open_sqlite_registry(db_path(), 300ms, registry_clock_, kFlurryLayout);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  const Result<Claim> taken = (*other)->claim("other:2", 1024);
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  ASSERT_EQ(taken->lease.node, claim_.lease.node);

  mono_.set(t0_ + 200ms);  // the next renewal finds out
  ASSERT_TRUE(mono_.await_waiters(1, [&] { return keeper.stats().lost; }));
  const Result<std::uint64_t> refused = gen_->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition)
      << refused.status().to_string();
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseLost);
  EXPECT_NE(refused.status().message().find("claimed by another owner"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(keeper.status().reason(), Reason::kLeaseLost);
  EXPECT_EQ(keeper.stats().remaining, 0ms);

  // It stops renewing (it only waits for stop()), and nothing brings the generator back.
  EXPECT_EQ(wake_ms(), kNoDeadline);
  mono_.advance(1h);
  ASSERT_TRUE(mono_.await_waiters(1));
  EXPECT_EQ(faulty_->calls(Op::kRenew), 2u);
  EXPECT_FALSE(issues());
  keeper.stop();
  EXPECT_EQ(mono_.waiters(), 0u);
  EXPECT_TRUE((*other)->renew(taken->lease).ok());
}

// A registry that watches (etcd) tells of a loss between renewals: issuing stops at once, without
// the clock moving and without a renewal, and for good.
TEST_F(LeaseKeeperTest, LossPushedByTheRegistrysWatchSuspendsAtOnce) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(mono_.await_waiters(1));
  EXPECT_TRUE(keeper.stats().watched);
  EXPECT_TRUE(issues());

  ASSERT_EQ(faulty_->push_loss(FaultyRegistry::lease_gone()), 1u);
  const Result<std::uint64_t> refused = gen_->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseLost) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("claimed by another owner"), std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(keeper.stats().lost);
  EXPECT_EQ(faulty_->calls(Op::kRenew), 0u);  // no renewal was needed to find out

  // A renewal that succeeds afterwards (the registry answers late or wrongly) changes nothing.
  ASSERT_TRUE(settle_at(100ms, keeper, 1));
  EXPECT_EQ(keeper.stats().renewals, 1u);
  mono_.advance(1h);
  EXPECT_FALSE(issues());
  EXPECT_EQ(keeper.status().reason(), Reason::kLeaseLost);

  // stop() ends the watch: a later push reaches nobody.
  keeper.stop();
  EXPECT_EQ(faulty_->push_loss(FaultyRegistry::lease_gone()), 0u);
}

// Without a loss pushed, the watch changes nothing: renewals keep the lease as before.
TEST_F(LeaseKeeperTest, WatchedLeaseStillRenewsOnSchedule) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  ASSERT_TRUE(keeper.start().ok());
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(settle_at(i * 100ms, keeper, i));
  EXPECT_TRUE(issues());
  EXPECT_EQ(keeper.stats().renewals, 5u);
  EXPECT_FALSE(keeper.stats().lost);
}

TEST_F(LeaseKeeperTest, RegistryThatWentBackwardsStaysSuspended) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(settle_at(100ms, keeper, 1));
  faulty_->fail(Op::kRenew, FaultyRegistry::regressed());
  mono_.set(t0_ + 200ms);
  ASSERT_TRUE(mono_.await_waiters(1, [&] { return keeper.stats().lost; }));
  EXPECT_EQ(wake_ms(), kNoDeadline);
  const Result<std::uint64_t> refused = gen_->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), Reason::kRegistryRegressed);
  EXPECT_EQ(keeper.status().message(),
            "the lease on node 0 is lost: injected failure: the registry went backwards");
  faulty_->heal(Op::kRenew);  // too late: a regressed registry cannot be trusted again
  mono_.advance(1h);
  ASSERT_TRUE(mono_.await_waiters(1));
  EXPECT_EQ(faulty_->calls(Op::kRenew), 2u);
  EXPECT_FALSE(issues());
}

TEST_F(LeaseKeeperTest, RegistryThatHangsStillLeadsToSuspension) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(settle_at(100ms, keeper, 1));  // suspends at 300 ms unless renewed
  const EndHangOnExit end_hang(*faulty_);
  faulty_->hang(Op::kRenew, true);
  mono_.set(t0_ + 200ms);
  ASSERT_TRUE(faulty_->await_hung(Op::kRenew, 1));
  ASSERT_TRUE(mono_.await_waiters(1));  // the keeper waits for the answer until the deadline
  EXPECT_EQ(wake_ms(), 300);
  EXPECT_TRUE(issues());
  mono_.set(t0_ + 300ms - 1ns);
  ASSERT_TRUE(mono_.await_waiters(1));
  EXPECT_TRUE(issues());

  // The deadline passes with no answer: suspended, and the keeper waits for the answer only.
  mono_.set(t0_ + 300ms);
  ASSERT_TRUE(mono_.await_waiters(1, [&] { return !keeper.status().ok(); }));
  EXPECT_EQ(wake_ms(), kNoDeadline);
  EXPECT_FALSE(issues());
  const Status status = keeper.status();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.to_string();
  EXPECT_EQ(status.reason(), Reason::kLeaseExpiring) << status.to_string();
  EXPECT_EQ(status.message(), "lease on node 0 not renewed for 200 ms: " + sqlite_->describe() +
                                  " has not answered a renewal sent 100 ms ago");
  EXPECT_EQ(attempts(keeper), 1u);  // the hung one is still in progress

  // It answers (a success): resumed, and the overdue next renewal goes out at once.
  faulty_->hang(Op::kRenew, false);
  ASSERT_TRUE(mono_.await_waiters(1, [&] { return attempts(keeper) >= 3; }));
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(issues());
  EXPECT_EQ(keeper.stats().renewals, 3u);
  EXPECT_EQ(wake_ms(), 400);
}

// A renewal that succeeds, but only after the deadline, does not resume the generator: the lease
// it extended may already be close to its end.
TEST_F(LeaseKeeperTest, RenewalAnsweredTooLateKeepsTheGeneratorSuspended) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_TRUE(settle_at(100ms, keeper, 1));  // valid until 400 ms, suspends at 300 ms
  // The renewal sent at 200 ms takes 250 ms; the one after it hangs.
  const EndHangOnExit end_hang(*faulty_);
  faulty_->on_call(Op::kRenew, [this] {
    mono_.advance(250ms);
    faulty_->hang(Op::kRenew, true);
    faulty_->on_call(Op::kRenew, nullptr);
  });
  mono_.set(t0_ + 200ms);
  ASSERT_TRUE(faulty_->await_hung(Op::kRenew, 1));
  ASSERT_TRUE(mono_.await_waiters(1, [&] { return attempts(keeper) >= 2; }));
  EXPECT_EQ(keeper.stats().renewals, 2u);
  EXPECT_EQ(keeper.stats().remaining, 50ms);  // 200 + 300 - 450
  EXPECT_EQ(keeper.status().message(),
            "lease on node 0 not renewed for 250 ms: the last renewal took 250 ms");
  EXPECT_FALSE(issues());

  faulty_->hang(Op::kRenew, false);  // the renewal sent at 450 ms succeeds at once
  ASSERT_TRUE(mono_.await_waiters(1, [&] { return attempts(keeper) >= 3; }));
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(issues());
  EXPECT_EQ(wake_ms(), 550);
}

TEST_F(LeaseKeeperTest, StopIsPromptAndDoesNotRelease) {
  ASSERT_NO_FATAL_FAILURE(set_up(30s));  // renewals every 10 s
  {
    LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
    ASSERT_TRUE(keeper.start().ok());
    ASSERT_TRUE(mono_.await_waiters(1));
    EXPECT_EQ(wake_ms(), 10'000);
    // The fake clock does not move: only the stop can end the keeper's wait.
    const auto before = std::chrono::steady_clock::now();
    keeper.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - before, 500ms);
    EXPECT_EQ(mono_.waiters(), 0u);
    EXPECT_EQ(mono_.completed_waits(), 1u);
    const Status again = keeper.start();
    EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << again.to_string();
    EXPECT_EQ(mono_.waiters(), 0u);
  }
  EXPECT_EQ(faulty_->calls(Op::kRenew), 0u);
  EXPECT_EQ(faulty_->calls(Op::kRelease), 0u);
  EXPECT_TRUE(sqlite_->renew(claim_.lease).ok());  // still ours
  EXPECT_TRUE(issues());
  LeaseKeeper never_started(*faulty_, claim_.lease, *gen_, mono_);
}

TEST_F(LeaseKeeperTest, LeaseWithoutExpiryNeverSuspends) {
  auto registry = open_static_registry((dir_.path() / "state").string(), 5, kFlurryLayout);
  ASSERT_TRUE(registry.ok());
  FaultyRegistry faulty(**registry);
  Result<Claim> c = faulty.claim("a", 1024);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  ASSERT_EQ(c->lease.ttl, 0ms);
  LeasedHorizonStore store(faulty, *c);
  GeneratorOptions o;
  o.node = 5;
  o.background_horizon = false;
  auto gen = Generator::create(Layout::parse("flurry").value(), o, gen_clock_, store);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  {
    // No interval given: nothing to do but wait for the stop.
    LeaseKeeper keeper(faulty, c->lease, **gen, mono_);
    ASSERT_TRUE(keeper.start().ok());
    ASSERT_TRUE(mono_.await_waiters(1));
    EXPECT_EQ(wake_ms(), kNoDeadline);
    mono_.advance(24h * 365);
    ASSERT_TRUE(mono_.await_waiters(1));
    EXPECT_EQ(mono_.completed_waits(), 0u);
    EXPECT_EQ(faulty.calls(Op::kRenew), 0u);
    EXPECT_TRUE(keeper.status().ok());
    EXPECT_EQ(keeper.stats().remaining, 0ms);
    EXPECT_TRUE((*gen)->next().ok());
    keeper.stop();
    EXPECT_EQ(mono_.waiters(), 0u);
  }
  {
    // With an interval it renews, and even failures do not suspend a lease that never expires.
    LeaseKeeperOptions options;
    options.renew_interval = 1s;
    LeaseKeeper keeper(faulty, c->lease, **gen, mono_, options);
    faulty.fail(Op::kRenew, FaultyRegistry::unreachable());
    const MonoTime start = mono_.now();
    ASSERT_TRUE(keeper.start().ok());
    ASSERT_TRUE(mono_.await_waiters(1));
    EXPECT_EQ(mono_.next_deadline(), start + 1s);
    mono_.set(start + 1s);
    ASSERT_TRUE(mono_.await_waiters(1, [&] { return attempts(keeper) >= 1; }));
    EXPECT_EQ(keeper.stats().renewal_failures, 1u);
    EXPECT_EQ(mono_.next_deadline(), start + 1s + 250ms);  // retry: a quarter interval
    EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
    EXPECT_TRUE((*gen)->next().ok());
  }
}

// Thread creation failures are reported as a Status, never thrown. Each test runs in a freshly
// executed child process whose address space leaves no room for a new thread's stack.
using LeaseKeeperDeathTest = LeaseKeeperTest;

TEST_F(LeaseKeeperDeathTest, StartReportsThatNoThreadCanBeCreated) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  testing::expect_child_without_threads([this] {
    if (!testing::forbid_new_threads()) _exit(testing::kCannotForbidThreads);
    LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
    const Status st = keeper.start();
    require(st.code() == StatusCode::kUnavailable, "start(): " + st.to_string());
    require(st.reason() == Reason::kSuspended, "start(): " + st.to_string());
    require(st.message().starts_with("cannot start the lease keeper for node 0: "),
            "start(): " + st.to_string());
    // Nothing keeps the lease: the generator must not issue.
    require(keeper.status().message() == st.message(), "status(): " + keeper.status().to_string());
    const Result<std::uint64_t> refused = gen_->next();
    require(!refused.ok() && refused.status().message() == st.message(),
            "next(): " + refused.status().to_string());
    require(mono_.waiters() == 0 && faulty_->calls(Op::kRenew) == 0, "a keeper thread ran");
    keeper.stop();
    require(keeper.start().code() == StatusCode::kFailedPrecondition, "start() after stop()");
    _exit(0);
  });
}

TEST_F(LeaseKeeperDeathTest, RenewsOnTheKeeperThreadWhenNoWorkerCanBeCreated) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  testing::expect_child_without_threads([this] {
    LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, mono_);
    require(keeper.start().ok(), "start()");
    require(mono_.await_waiters(1), "the keeper does not wait");
    if (!testing::forbid_new_threads()) _exit(testing::kCannotForbidThreads);
    require(settle_at(100ms, keeper, 1), "no renewal");
    require(keeper.stats().renewals == 1 && keeper.status().ok(),
            "renewal: " + keeper.status().to_string());
    require(wake_ms() == 200, "next wake: " + std::to_string(wake_ms()));
    keeper.stop();
    _exit(0);
  });
}

}  // namespace
}  // namespace flurry

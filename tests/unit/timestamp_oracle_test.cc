// TimestampOracle on a real SQLite registry (its oracle scope), two oracles sharing the file as two
// processes would, faults injected by FaultyRegistry. The oracles' lease keepers and campaign
// threads run on a FakeMonotonicClock; the registry's lease times and the generators' time on a
// FakeClock. Real time only bounds the waits for a campaign thread to act.
#include "flurry/timestamp_oracle.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "fake_clock.h"
#include "faulty_registry.h"
#include "flurry/horizon_floor.h"
#include "flurry/layout.h"
#include "flurry/open_registry.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "test_store.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::FakeMonotonicClock;
using testing::FaultyRegistry;
using testing::TempDir;
using Op = FaultyRegistry::Op;

constexpr std::chrono::milliseconds kTtl = 9000ms;

Layout tso_layout() {
  Result<Layout> layout = Layout::parse("tso");
  if (!layout.ok()) std::abort();
  return *layout;
}

// Waits (real time, at most 20 s) until `done` holds; the oracle's thread acts on its own.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 2000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

// One process's oracle: its own registry handle over the shared file, its floor, the oracle.
struct Member {
  Member(const std::string& db, const std::filesystem::path& floor_dir, FakeClock& wall,
         FakeMonotonicClock& mono, bool skip_gate = false, std::chrono::milliseconds ttl = kTtl,
         std::chrono::milliseconds window = 2000ms)
      : layout(tso_layout()), floor(floor_dir, "sqlite:test;scope=tso", layout.to_string()) {
    Result<std::unique_ptr<NodeRegistry>> opened =
        open_sqlite_registry(db, ttl, wall, layout.to_string());
    if (!opened.ok()) std::abort();
    inner = std::move(opened).value();
    registry = std::make_unique<FaultyRegistry>(*inner);
    TsoOptions options;
    options.generator.max_lead = 1000ms;
    options.generator.horizon_window = window;
    options.generator.rollback = RollbackPolicy::kFail;
    options.poll_interval = 100ms;
    options.unsafe_skip_gate = skip_gate;
    Result<std::unique_ptr<TimestampOracle>> made =
        TimestampOracle::create(*registry, floor, layout, options, Clocks{wall, mono});
    if (!made.ok()) std::abort();
    oracle = std::move(made).value();
  }
  Layout layout;
  HorizonFloor floor;
  std::unique_ptr<NodeRegistry> inner;
  std::unique_ptr<FaultyRegistry> registry;
  std::unique_ptr<TimestampOracle> oracle;
};

class TimestampOracleTest : public ::testing::Test {
 protected:
  TimestampOracleTest() : wall(parse_time("2026-06-01T00:00:00Z").value()) {}
  std::string db() const { return (dir.path() / "tso-registry.db").string(); }
  TempDir dir;
  FakeClock wall;
  FakeMonotonicClock mono;
};

const TsoLeaderAddress kA{"127.0.0.1:1001", "127.0.0.1:2001", "host-a:1"};
const TsoLeaderAddress kB{"127.0.0.1:1002", "127.0.0.1:2002", "host-b:2"};

TEST(TsoOwnerTest, RoundTripsAndReadsPlainOwners) {
  EXPECT_EQ(format_tso_owner(kA), "host-a:1 http=127.0.0.1:1001 grpc=127.0.0.1:2001");
  EXPECT_EQ(parse_tso_owner(format_tso_owner(kA)), kA);
  const TsoLeaderAddress plain = parse_tso_owner("host:7");
  EXPECT_EQ(plain.owner, "host:7");
  EXPECT_TRUE(plain.http.empty());
  EXPECT_TRUE(plain.grpc.empty());
  EXPECT_EQ(parse_tso_owner("h:1 grpc=[::1]:5").grpc, "[::1]:5");
}

TEST(TsoCreateTest, RefusesLayoutsWithNodeOrClockFields) {
  TempDir dir;
  FakeClock wall(parse_time("2026-06-01T00:00:00Z").value());
  FakeMonotonicClock mono;
  Result<std::unique_ptr<NodeRegistry>> registry = open_sqlite_registry(
      (dir.path() / "r.db").string(), kTtl, wall, "time:41@1ms,node:10,seq:12;epoch=2025-01-01Z");
  ASSERT_TRUE(registry.ok()) << registry.status().to_string();
  HorizonFloor floor("", "x", "y");
  Result<std::unique_ptr<TimestampOracle>> made = TimestampOracle::create(
      **registry, floor, Layout::parse("flurry").value(), TsoOptions{}, Clocks{wall, mono});
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("time and seq only"), std::string::npos);
}

TEST_F(TimestampOracleTest, OneLeadsTheOtherNamesItAndGrantsIncrease) {
  Member a(db(), dir.path() / "floor-a", wall, mono);
  Member b(db(), dir.path() / "floor-b", wall, mono);
  // Before start: nobody leads here.
  Result<TsoGrant> early = a.oracle->grant(1);
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().reason(), Reason::kNoLeader);

  ASSERT_TRUE(a.oracle->start(kA).ok());
  ASSERT_TRUE(eventually([&] { return a.oracle->term() != 0; }));
  ASSERT_TRUE(b.oracle->start(kB).ok());
  ASSERT_TRUE(eventually([&] { return b.oracle->leader().has_value(); }));
  EXPECT_EQ(*b.oracle->leader(), kA);
  EXPECT_EQ(b.oracle->stats().role, TsoRole::kFollower);

  Result<TsoGrant> refused = b.oracle->grant(5);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kNotLeader);
  EXPECT_NE(refused.status().message().find("http=127.0.0.1:1001"), std::string::npos)
      << refused.status().to_string();
  EXPECT_EQ(b.oracle->check_term(a.oracle->term()).reason(), Reason::kNotLeader);

  std::uint64_t last = 0;
  for (std::uint64_t count : {1u, 7u, 262144u, 3u}) {
    Result<TsoGrant> g = a.oracle->grant(count);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->count, count);
    EXPECT_EQ(g->term, a.oracle->term());
    EXPECT_GT(g->first, last);
    last = g->first + g->count - 1;
    // The values carry the wall clock's millisecond.
    Result<IdParts> parts = a.layout.decompose(g->first);
    ASSERT_TRUE(parts.ok());
  }
  EXPECT_TRUE(a.oracle->readiness().ok());
  EXPECT_TRUE(a.oracle->check_term(a.oracle->term()).ok());
  EXPECT_FALSE(a.oracle->check_term(a.oracle->term() + 1).ok());
  Result<TsoGrant> too_many = a.oracle->grant(a.oracle->max_batch() + 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().reason(), Reason::kBatchTooLarge);
  const TsoStats stats = a.oracle->stats();
  EXPECT_EQ(stats.role, TsoRole::kLeader);
  EXPECT_EQ(stats.leader_changes, 1u);
  EXPECT_GE(stats.window_saves, 1u);
  EXPECT_EQ(stats.timestamps, 1u + 7u + 262144u + 3u);
}

// A leader whose renewals stop answering refuses to grant once its lease is no longer proven,
// before the registry could give the lease to anyone else.
TEST_F(TimestampOracleTest, StopsGrantingWhenTheLeaseIsNoLongerProven) {
  Member a(db(), dir.path() / "floor-a", wall, mono);
  ASSERT_TRUE(a.oracle->start(kA).ok());
  ASSERT_TRUE(eventually([&] { return a.oracle->term() != 0; }));
  ASSERT_TRUE(a.oracle->grant(1).ok());
  a.registry->hang(Op::kRenew, true);
  // The keeper renews every ttl/3 and suspends at ttl - ttl/3 without an answer.
  mono.advance(kTtl / 3);
  ASSERT_TRUE(eventually([&] { return a.registry->hung(Op::kRenew) == 1; }));
  EXPECT_TRUE(a.oracle->grant(1).ok());  // still proven
  mono.advance(kTtl / 3 + 1ms);
  Result<TsoGrant> late = a.oracle->grant(1);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().reason(), Reason::kLeaseExpiring) << late.status().to_string();
  EXPECT_FALSE(a.oracle->readiness().ok());
  EXPECT_FALSE(a.oracle->check_term(a.oracle->term()).ok());
  a.registry->hang(Op::kRenew, false);
}

// The negative control: with skip-gate the same leader keeps answering past its lease.
TEST_F(TimestampOracleTest, SkipGateFaultAnswersPastTheLease) {
  Member a(db(), dir.path() / "floor-a", wall, mono, /*skip_gate=*/true);
  ASSERT_TRUE(a.oracle->start(kA).ok());
  ASSERT_TRUE(eventually([&] { return a.oracle->term() != 0; }));
  a.registry->hang(Op::kRenew, true);
  mono.advance(kTtl / 3);
  ASSERT_TRUE(eventually([&] { return a.registry->hung(Op::kRenew) == 1; }));
  mono.advance(kTtl);
  EXPECT_TRUE(a.oracle->grant(1).ok());
  a.registry->hang(Op::kRenew, false);
}

// A new leader starts above everything the old one could have granted: above the window it
// saved, which is still ahead of the clock when the lease runs out (ttl 1.5 s, window 4 s).
TEST_F(TimestampOracleTest, NewLeaderStartsAboveTheSavedWindow) {
  constexpr auto kShortTtl = 1500ms;
  Member a(db(), dir.path() / "floor-a", wall, mono, false, kShortTtl, 4000ms);
  Member b(db(), dir.path() / "floor-b", wall, mono, false, kShortTtl, 4000ms);
  ASSERT_TRUE(a.oracle->start(kA).ok());
  ASSERT_TRUE(eventually([&] { return a.oracle->term() != 0; }));
  ASSERT_TRUE(b.oracle->start(kB).ok());
  ASSERT_TRUE(eventually([&] { return b.oracle->leader().has_value(); }));
  Result<TsoGrant> old = a.oracle->grant(100);
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  // The window A saved, as the registry holds it.
  Result<RegistryListing> listing = a.inner->list();
  ASSERT_TRUE(listing.ok()) << listing.status().to_string();
  ASSERT_EQ(listing->nodes.size(), 1u);
  const NodeRowView row = view_node(listing->nodes[0], &a.layout, 0);
  ASSERT_TRUE(row.horizon.has_value());
  const std::int64_t window_tick = row.horizon->ticks;
  Result<IdParts> granted = a.layout.decompose(old->first);
  ASSERT_TRUE(granted.ok());
  ASSERT_GT(window_tick, static_cast<std::int64_t>(granted->ticks) + 3000);  // 4 s ahead
  // A freezes: its renewals and window saves stop reaching the registry; the lease runs out.
  a.registry->hang(Op::kRenew, true);
  a.registry->fail(Op::kSaveHorizon, FaultyRegistry::unreachable());
  wall.advance(kShortTtl + 100ms);
  // B claims and waits for its clock to come within max_lead of the window; time moves on.
  for (int i = 0; i < 100 && b.oracle->term() == 0; ++i) {
    mono.advance(100ms);
    wall.advance(100ms);
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(b.oracle->term(), 0u);
  EXPECT_GT(b.oracle->term(), old->term);
  EXPECT_FALSE(a.oracle->grant(1).ok());  // A's lease is long unproven
  Result<TsoGrant> fresh = b.oracle->grant(1);
  ASSERT_TRUE(fresh.ok()) << fresh.status().to_string();
  Result<IdParts> first = b.layout.decompose(fresh->first);
  ASSERT_TRUE(first.ok());
  EXPECT_GT(static_cast<std::int64_t>(first->ticks), window_tick);
  a.registry->hang(Op::kRenew, false);
}

// The registry goes backwards under the oracle (emptied, or restored from an older backup): a new
// leader on this host still starts above the window the old one saved, from this host's copy of
// it (HorizonFloor), not at its own clock.
TEST_F(TimestampOracleTest, ARegistryThatWentBackwardsIsRaisedByThisHostsCopy) {
  std::uint64_t last = 0;
  {
    Member a(db(), dir.path() / "floor", wall, mono);
    ASSERT_TRUE(a.oracle->start(kA).ok());
    ASSERT_TRUE(eventually([&] { return a.oracle->term() != 0; }));
    Result<TsoGrant> g = a.oracle->grant(1000);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    last = g->first + g->count - 1;
    a.registry->fail(Op::kRelease, FaultyRegistry::unreachable());  // a crash: no clean release
  }
  // The clock steps back 1 s, so B's own clock is below what A granted; and the registry is an
  // empty file (the old one lost), with the same floor directory (this host).
  wall.set(wall.now() - 1s);
  const std::string restored = (dir.path() / "restored.db").string();
  Member b(restored, dir.path() / "floor", wall, mono);
  ASSERT_TRUE(b.oracle->start(kB).ok());
  // The window A saved is up to 3 s ahead of the clock now: B waits for it on the clocks.
  for (int i = 0; i < 100 && b.oracle->term() == 0; ++i) {
    mono.advance(100ms);
    wall.advance(100ms);
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(b.oracle->term(), 0u);
  Result<TsoGrant> fresh = b.oracle->grant(1);
  ASSERT_TRUE(fresh.ok()) << fresh.status().to_string();
  EXPECT_GT(fresh->first, last);
}

}  // namespace
}  // namespace flurry

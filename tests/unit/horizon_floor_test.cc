// HorizonFloor: this host's memory of node horizons raises every claim above what it saved,
// whatever the registry says, and tells a registry that went backwards from one that only
// missed the last write. Real files in a temporary directory; real SQLite for the store test.
#include "flurry/horizon_floor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fake_clock.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "test_store.h"

namespace flurry {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::FakeClock;
using testing::TempDir;

constexpr std::string_view kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";

HorizonRecord record(std::uint64_t node, std::int64_t horizon) {
  return HorizonRecord{std::string(kLayout), node, 0, {horizon}};
}

Claim claim_of(std::uint64_t node, std::optional<HorizonRecord> inherited) {
  Claim c;
  c.lease.node = node;
  c.lease.token = 1;
  c.inherited = std::move(inherited);
  return c;
}

class HorizonFloorTest : public ::testing::Test {
 protected:
  HorizonFloor floor() {
    return HorizonFloor(dir_.path() / "local", "sqlite", std::string(kLayout));
  }

  // Saves `h` as a registry write would: remembered first, accepted after.
  static void save(HorizonFloor& f, std::int64_t h, std::uint64_t node = 0) {
    ASSERT_TRUE(f.remember(record(node, h)).ok());
    ASSERT_TRUE(f.accepted(record(node, h)).ok());
  }

  TempDir dir_;
};

TEST_F(HorizonFloorTest, NothingRememberedLeavesTheClaimAlone) {
  HorizonFloor f = floor();
  Claim none = claim_of(0, std::nullopt);
  Result<std::optional<HorizonRegression>> r = f.raise(none);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->has_value());
  EXPECT_FALSE(none.inherited.has_value());
  Claim some = claim_of(1, record(1, 500));
  ASSERT_TRUE(f.raise(some).ok());
  EXPECT_EQ(*some.inherited, record(1, 500));
}

TEST_F(HorizonFloorTest, EmptiedRegistryIsRaisedAndReportedFromTheLocalCopy) {
  {
    HorizonFloor earlier = floor();  // a process that ran before on this host
    save(earlier, 1000);
    save(earlier, 2000);
  }
  HorizonFloor f = floor();
  Claim c = claim_of(0, std::nullopt);  // the registry lost the row
  Result<std::optional<HorizonRegression>> r = f.raise(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(c.inherited.has_value());
  EXPECT_EQ(*c.inherited, record(0, 2000));
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->registry_tick, -1);
  EXPECT_EQ((*r)->remembered_tick, 2000);
  EXPECT_NE((*r)->where.find(f.path_for(0).string()), std::string::npos) << (*r)->where;
  const std::string text = describe_regression(**r, Layout::parse("flurry").value());
  EXPECT_NE(text.find("no horizon"), std::string::npos) << text;
  EXPECT_NE(text.find("tick 2000"), std::string::npos) << text;
}

TEST_F(HorizonFloorTest, RegistryRestoredBelowWhatItAcceptedIsARegression) {
  HorizonFloor f = floor();
  save(f, 1000);
  save(f, 3000);
  Claim c = claim_of(0, record(0, 1000));
  Result<std::optional<HorizonRegression>> r = f.raise(c);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->registry_tick, 1000);
  EXPECT_EQ((*r)->remembered_tick, 3000);
  EXPECT_EQ((*r)->where, "this process");
  EXPECT_EQ(*c.inherited, record(0, 3000));
}

// Two registries on one host directory (two etcd clusters, say) keep separate copies: one's
// horizon never raises, nor alarms, the other's claims.
TEST_F(HorizonFloorTest, CopiesOfAnotherRegistryIdentityAreNotRead) {
  const std::string blue = "etcd:cluster=blue;prefix=/flurry/blue;endpoints=127.0.0.1:2379";
  const std::string green = "etcd:cluster=green;prefix=/flurry/green;endpoints=127.0.0.1:2379";
  {
    HorizonFloor b(dir_.path() / "local", blue, std::string(kLayout));
    save(b, 5000);
  }
  HorizonFloor g(dir_.path() / "local", green, std::string(kLayout));
  EXPECT_NE(g.path_for(0),
            HorizonFloor(dir_.path() / "local", blue, std::string(kLayout)).path_for(0));
  EXPECT_EQ(g.path_for(0).filename().string().rfind("etcd-", 0), 0u) << g.path_for(0);
  Claim c = claim_of(0, record(0, 100));  // green's own registry is far behind blue's copy
  Result<std::optional<HorizonRegression>> r = g.raise(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(*c.inherited, record(0, 100));
  HorizonFloor b(dir_.path() / "local", blue, std::string(kLayout));
  Claim again = claim_of(0, record(0, 100));  // blue's registry went back: still caught
  Result<std::optional<HorizonRegression>> rb = b.raise(again);
  ASSERT_TRUE(rb.ok()) << rb.status().to_string();
  EXPECT_TRUE(rb->has_value());
  EXPECT_EQ(*again.inherited, record(0, 5000));
}

// A crash between the local write and the registry write leaves the copy one save ahead: the
// claim starts above it, but that is no regression of the registry.
TEST_F(HorizonFloorTest, MissedLastWriteRaisesWithoutAnAlarm) {
  {
    HorizonFloor earlier = floor();
    save(earlier, 1000);
    ASSERT_TRUE(earlier.remember(record(0, 3000)).ok());  // then killed before the registry write
  }
  HorizonFloor f = floor();
  Claim c = claim_of(0, record(0, 1000));
  Result<std::optional<HorizonRegression>> r = f.raise(c);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(*c.inherited, record(0, 3000));
}

// A clean stop saves a tight horizon below the window it had reserved: the next start must not
// take the wider one for a regression, nor wait for it.
TEST_F(HorizonFloorTest, TightHorizonOfACleanStopLowersTheCopy) {
  {
    HorizonFloor earlier = floor();
    save(earlier, 5000);
    save(earlier, 4200);  // close(): the last issued tick
  }
  HorizonFloor f = floor();
  Claim c = claim_of(0, record(0, 4200));
  Result<std::optional<HorizonRegression>> r = f.raise(c);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(*c.inherited, record(0, 4200));
}

// A cut-off old owner on the same host (its lease was taken over) may still write its tight
// horizon at close: that must not lower what the new owner wrote.
TEST_F(HorizonFloorTest, ValuesAnotherProcessRaisedAreKept) {
  HorizonFloor old_owner = floor();
  HorizonFloor new_owner = floor();
  save(old_owner, 1000);
  Claim c = claim_of(0, record(0, 1000));
  ASSERT_TRUE(new_owner.raise(c).ok());
  save(new_owner, 9000);
  ASSERT_TRUE(old_owner.remember(record(0, 1200)).ok());  // the stale owner's close
  HorizonFloor next = floor();
  Claim after = claim_of(0, std::nullopt);
  Result<std::optional<HorizonRegression>> r = next.raise(after);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*after.inherited, record(0, 9000));
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->remembered_tick, 9000);
}

TEST_F(HorizonFloorTest, KeepsEveryClockGenerationAndTheLastOneUsed) {
  HorizonFloor f(dir_.path() / "local", "sqlite", "multiclock-test");
  HorizonRecord used{"multiclock-test", 2, 3, {100, -1, 50, 700}};
  ASSERT_TRUE(f.remember(used).ok());
  ASSERT_TRUE(f.accepted(used).ok());
  Claim c = claim_of(2, HorizonRecord{"multiclock-test", 2, 0, {400, -1, -1, -1}});
  Result<std::optional<HorizonRegression>> r = f.raise(c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(c.inherited->horizons, (std::vector<std::int64_t>{400, -1, 50, 700}));
  EXPECT_EQ(c.inherited->generation, 3u);
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->generation, 3u);  // the largest gap
}

TEST_F(HorizonFloorTest, CopiesAreKeptPerRegistryAndLayout) {
  HorizonFloor a = floor();
  save(a, 1000);
  HorizonFloor other_registry(dir_.path() / "local", "static", std::string(kLayout));
  Claim c = claim_of(0, std::nullopt);
  ASSERT_TRUE(other_registry.raise(c).ok());
  EXPECT_FALSE(c.inherited.has_value());
  EXPECT_NE(a.path_for(0), other_registry.path_for(0));
  HorizonFloor other_layout(dir_.path() / "local", "sqlite", "time:40@1ms,node:11,seq:12");
  EXPECT_NE(a.path_for(0), other_layout.path_for(0));
}

TEST_F(HorizonFloorTest, CorruptCopyFailsTheClaimInsteadOfBeingIgnored) {
  HorizonFloor f = floor();
  save(f, 1000);
  std::ofstream(f.path_for(0), std::ios::trunc) << "flurry-horizon-floor 1\ngarbage\n";
  HorizonFloor g = floor();
  Claim c = claim_of(0, std::nullopt);
  Result<std::optional<HorizonRegression>> r = g.raise(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().to_string();
  EXPECT_EQ(r.status().reason(), Reason::kCorrupt);
  EXPECT_NE(r.status().message().find(f.path_for(0).string()), std::string::npos);
}

TEST_F(HorizonFloorTest, MemoryOnlyFloorStillRaisesWithinTheProcess) {
  HorizonFloor f({}, "etcd", std::string(kLayout));
  EXPECT_TRUE(f.path_for(0).empty());
  save(f, 700);
  Claim c = claim_of(0, std::nullopt);
  Result<std::optional<HorizonRegression>> r = f.raise(c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*c.inherited, record(0, 700));
  EXPECT_TRUE(r->has_value());
  EXPECT_FALSE(fs::exists(dir_.path() / "local"));
}

// Through the leased store: the copy is written before the registry, so a copy that cannot be
// written stops the registry write too (the generator then reports the horizon not persisted).
TEST_F(HorizonFloorTest, LeasedStoreWritesTheCopyBeforeTheRegistry) {
  FakeClock clock(parse_time("2026-01-01T00:00:00Z").value());
  auto registry = open_sqlite_registry((dir_.path() / "registry.db").string(), 10s, clock, kLayout);
  ASSERT_TRUE(registry.ok()) << registry.status().to_string();
  Result<Claim> claim = (*registry)->claim("a", 1024);
  ASSERT_TRUE(claim.ok());
  HorizonFloor f = floor();
  ASSERT_TRUE(f.raise(*claim).ok());
  LeasedHorizonStore store(**registry, *claim, &f);
  ASSERT_TRUE(store.save(record(0, 100)).ok());
  ASSERT_TRUE(fs::exists(f.path_for(0)));

  if (::geteuid() != 0) {  // root ignores permissions; the read-only file system case is below
    ::chmod((dir_.path() / "local").c_str(), 0500);
    EXPECT_FALSE(store.save(record(0, 200)).ok());
    ::chmod((dir_.path() / "local").c_str(), 0700);
  }
  fs::remove_all(dir_.path() / "local");
  std::ofstream(dir_.path() / "local") << "a file where the directory should be";
  const Status st = store.save(record(0, 300));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("host-local"), std::string::npos) << st.message();
  EXPECT_EQ(store.load().value(), record(0, 100));  // the registry was not written either
}

// The host-wide records: a process under another registry and data directory (another floor
// directory and registry key) starts above what one under the first issued, also when the other
// spells the layout with other field names; a tight record saved at a clean stop lowers this
// user's record; the legacy local copy (keyed by the layout's text) is still read.
TEST_F(HorizonFloorTest, HostRecordsCarryTheHorizonAcrossRegistriesAndDataDirectories) {
  Result<HostDir> host = HostDir::open(dir_.path());
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  {
    HorizonFloor first(dir_.path() / "x" / "local", "sqlite:registry.db", std::string(kLayout),
                       *host);
    save(first, 5000, 3);
    save(first, 4000, 3);  // the tight horizon of a clean stop: still above every issued ID
  }
  const std::string worker = "time:41@1ms,worker:10,seq:12;epoch=2025-01-01T00:00:00.000Z";
  HorizonFloor second(dir_.path() / "y" / "local", "etcd:cluster=a", worker, *host);
  Claim fresh = claim_of(3, std::nullopt);  // a registry that never saw node 3
  Result<std::optional<HorizonRegression>> r = second.raise(fresh);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->has_value());  // not this registry's regression: only a floor
  ASSERT_TRUE(fresh.inherited.has_value());
  EXPECT_EQ(fresh.inherited->horizons, std::vector<std::int64_t>{4000});
  // A registry ahead of the host record keeps its own value.
  Claim ahead = claim_of(3, HorizonRecord{worker, 3, 0, {9000}});
  ASSERT_TRUE(second.raise(ahead).ok());
  EXPECT_EQ(ahead.inherited->horizons, std::vector<std::int64_t>{9000});
  // Another node, or another structure, is another record.
  Claim other_node = claim_of(4, std::nullopt);
  ASSERT_TRUE(second.raise(other_node).ok());
  EXPECT_FALSE(other_node.inherited.has_value());
  HorizonFloor other_layout(dir_.path() / "z" / "local", "sqlite:registry.db",
                            "time:41@1ms,node:10,seq:12;epoch=2025-01-02T00:00:00.000Z", *host);
  Claim c = claim_of(3, std::nullopt);
  ASSERT_TRUE(other_layout.raise(c).ok());
  EXPECT_FALSE(c.inherited.has_value());

  // A corrupt record is never read as "nothing issued".
  const fs::path file = host->own() / second.host_record_name(3);
  { std::ofstream(file, std::ios::trunc) << "garbage"; }
  Claim after = claim_of(3, std::nullopt);
  Result<std::optional<HorizonRegression>> refused = second.raise(after);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kCorrupt);
}

}  // namespace
}  // namespace flurry
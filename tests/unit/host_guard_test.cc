// The host-wide node guard: one holder per (layout, node ID) on the host, named to the process
// refused, released with the guard object or the holder's death; and claim_with_host_guard()
// stepping over a leased node ID that another process of the host issues as (real SQLite).
#include "flurry/host_guard.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "fake_clock.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "test_store.h"

namespace flurry {
namespace {

using testing::FakeClock;
using testing::TempDir;

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

// A layout of its own (and the test's PID in the epoch's milliseconds), so that flurry
// processes of the host and concurrent runs of this test never share a guard with it.
std::string test_layout() {
  const int ms = static_cast<int>(::getpid() % 1000);
  char epoch[64];
  std::snprintf(epoch, sizeof epoch, "2025-01-01T00:00:00.%03dZ", ms);
  return Layout::parse(std::string("time:41@1ms,node:10,seq:12;epoch=") + epoch)
      .value()
      .to_string();
}

TEST(HostGuardTest, OneHolderPerNodeAndLayout) {
  const std::string layout = test_layout();
  Result<HostNodeGuard> first = HostNodeGuard::acquire(layout, 5);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_TRUE(first->held());

  Result<HostNodeGuard> second = HostNodeGuard::acquire(layout, 5);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().reason(), Reason::kNodeInUse);
  EXPECT_HAS(second.status().message(), "node 5");
  EXPECT_HAS(second.status().message(), "process " + std::to_string(::getpid()));

  // Another node ID, or another layout, is another guard.
  EXPECT_TRUE(HostNodeGuard::acquire(layout, 6).ok());
  const std::string other = Layout::parse("sonyflake").value().to_string();
  EXPECT_NE(HostNodeGuard::name_of(other, 5), HostNodeGuard::name_of(layout, 5));

  first->release();
  EXPECT_FALSE(first->held());
  Result<HostNodeGuard> after = HostNodeGuard::acquire(layout, 5);
  EXPECT_TRUE(after.ok()) << after.status().to_string();
}

TEST(HostGuardTest, MovedGuardStaysHeldUntilItsLastOwnerGoes) {
  const std::string layout = test_layout();
  HostNodeGuard outer;
  {
    Result<HostNodeGuard> g = HostNodeGuard::acquire(layout, 9);
    ASSERT_TRUE(g.ok());
    outer = std::move(g).value();
  }
  EXPECT_TRUE(outer.held());
  EXPECT_FALSE(HostNodeGuard::acquire(layout, 9).ok());
  outer = HostNodeGuard();
  EXPECT_TRUE(HostNodeGuard::acquire(layout, 9).ok());
}

// Another process holds the guard: the refusal names its PID; its death frees the guard.
TEST(HostGuardTest, NamesTheHoldingProcessAndIsFreedWhenItDies) {
  const std::string layout = test_layout();
  int ready[2];
  int quit[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(quit), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(quit[1]);  // so that the parent closing its end is seen as EOF
    ::close(ready[0]);
    Result<HostNodeGuard> g = HostNodeGuard::acquire(layout, 3);
    const char ok = g.ok() ? 'y' : 'n';
    (void)::write(ready[1], &ok, 1);
    char c;
    (void)::read(quit[0], &c, 1);  // until the parent closes its end
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(quit[0]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  Result<HostNodeGuard> refused = HostNodeGuard::acquire(layout, 3);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kNodeInUse);
  EXPECT_HAS(refused.status().message(), "process " + std::to_string(child));
  ::close(quit[1]);  // the child exits, without releasing anything itself
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  EXPECT_TRUE(HostNodeGuard::acquire(layout, 3).ok());
}

// A SQLite registry that knows nothing of another process issuing as node 0 on this host: the
// claim steps over node 0 to node 1 and gives node 0's lease back.
TEST(HostGuardTest, ClaimStepsOverANodeIssuedAsElsewhere) {
  TempDir dir;
  FakeClock clock(parse_time("2026-01-01T00:00:00Z").value());
  const std::string layout = test_layout();
  Result<std::unique_ptr<NodeRegistry>> registry = open_sqlite_registry(
      (dir.path() / "registry.db").string(), std::chrono::seconds(10), clock, layout);
  ASSERT_TRUE(registry.ok()) << registry.status().to_string();
  Result<HostNodeGuard> elsewhere = HostNodeGuard::acquire(layout, 0);
  ASSERT_TRUE(elsewhere.ok());

  HostNodeGuard guard;
  Result<Claim> claim = claim_with_host_guard(**registry, "me", layout, 1024, guard);
  ASSERT_TRUE(claim.ok()) << claim.status().to_string();
  EXPECT_EQ(claim->lease.node, 1u);
  EXPECT_TRUE(guard.held());
  // Node 0 went back to the registry: the next claim gets it.
  Result<Claim> next = (*registry)->claim("other", 1024);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->lease.node, 0u);

  // Every node ID tried is issued as elsewhere: NODE_IN_USE, and nothing stays leased.
  HostNodeGuard none;
  Result<HostNodeGuard> two = HostNodeGuard::acquire(layout, 2);
  ASSERT_TRUE(two.ok());
  Result<Claim> refused = claim_with_host_guard(**registry, "third", layout, 1024, none, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kNodeInUse);
  EXPECT_HAS(refused.status().message(), "node 2");
  EXPECT_FALSE(none.held());
  Result<Claim> freed = (*registry)->claim("fourth", 1024);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(freed->lease.node, 2u);
}

}  // namespace
}  // namespace flurry

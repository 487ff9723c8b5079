// The host-wide node guard: one holder per (layout structure, node ID) on the host, named to the
// process refused, released with the guard object or the holder's death, seen across users and
// not to be planted in another user's name; and claim_with_host_guard() stepping over a leased
// node ID that another process of the host issues as (real SQLite). Each test has a host
// directory of its own.
#include "flurry/host_guard.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

Layout test_layout() {
  return Layout::parse("time:41@1ms,node:10,seq:12;epoch=2025-01-01Z").value();
}

// A host directory of the test's own.
struct TestHost {
  TempDir dir;
  HostDir host = HostDir::open(dir.path()).value();
};

TEST(HostGuardTest, OneHolderPerNodeAndLayout) {
  TestHost t;
  const HostDir& host = t.host;
  const Layout layout = test_layout();
  Result<HostNodeGuard> first = HostNodeGuard::acquire(host, layout, 5);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_TRUE(first->held());

  Result<HostNodeGuard> second = HostNodeGuard::acquire(host, layout, 5);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().reason(), Reason::kNodeInUse);
  EXPECT_HAS(second.status().message(), "node 5");
  EXPECT_HAS(second.status().message(), "process " + std::to_string(::getpid()));

  // Another node ID, or another layout, is another guard.
  EXPECT_TRUE(HostNodeGuard::acquire(host, layout, 6).ok());
  const Layout other = Layout::parse("sonyflake").value();
  EXPECT_NE(HostNodeGuard::name_of(other, 5), HostNodeGuard::name_of(layout, 5));

  first->release();
  EXPECT_FALSE(first->held());
  Result<HostNodeGuard> after = HostNodeGuard::acquire(host, layout, 5);
  EXPECT_TRUE(after.ok()) << after.status().to_string();
}

TEST(HostGuardTest, MovedGuardStaysHeldUntilItsLastOwnerGoes) {
  TestHost t;
  const HostDir& host = t.host;
  const Layout layout = test_layout();
  HostNodeGuard outer;
  {
    Result<HostNodeGuard> g = HostNodeGuard::acquire(host, layout, 9);
    ASSERT_TRUE(g.ok());
    outer = std::move(g).value();
  }
  EXPECT_TRUE(outer.held());
  EXPECT_FALSE(HostNodeGuard::acquire(host, layout, 9).ok());
  outer = HostNodeGuard();
  EXPECT_TRUE(HostNodeGuard::acquire(host, layout, 9).ok());
}

// Another process holds the guard: the refusal names its PID; its death frees the guard.
TEST(HostGuardTest, NamesTheHoldingProcessAndIsFreedWhenItDies) {
  TestHost t;
  const HostDir& host = t.host;
  const Layout layout = test_layout();
  int ready[2];
  int quit[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(quit), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(quit[1]);  // so that the parent closing its end is seen as EOF
    ::close(ready[0]);
    Result<HostNodeGuard> g = HostNodeGuard::acquire(host, layout, 3);
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
  Result<HostNodeGuard> refused = HostNodeGuard::acquire(host, layout, 3);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kNodeInUse);
  EXPECT_HAS(refused.status().message(), "process " + std::to_string(child));
  ::close(quit[1]);  // the child exits, without releasing anything itself
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  EXPECT_TRUE(HostNodeGuard::acquire(host, layout, 3).ok());
}

// A SQLite registry that knows nothing of another process issuing as node 0 on this host: the
// claim steps over node 0 to node 1 and gives node 0's lease back.
TEST(HostGuardTest, ClaimStepsOverANodeIssuedAsElsewhere) {
  TestHost t;
  const HostDir& host = t.host;
  TempDir dir;
  FakeClock clock(parse_time("2026-01-01T00:00:00Z").value());
  const Layout layout = test_layout();
  Result<std::unique_ptr<NodeRegistry>> registry = open_sqlite_registry(
      (dir.path() / "registry.db").string(), std::chrono::seconds(10), clock, layout.to_string());
  ASSERT_TRUE(registry.ok()) << registry.status().to_string();
  Result<HostNodeGuard> elsewhere = HostNodeGuard::acquire(host, layout, 0);
  ASSERT_TRUE(elsewhere.ok());

  HostNodeGuard guard;
  Result<Claim> claim = claim_with_host_guard(**registry, "me", host, layout, guard);
  ASSERT_TRUE(claim.ok()) << claim.status().to_string();
  EXPECT_EQ(claim->lease.node, 1u);
  EXPECT_TRUE(guard.held());
  // Node 0 went back to the registry: the next claim gets it.
  Result<Claim> next = (*registry)->claim("other", 1024);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->lease.node, 0u);

  // Every node ID tried is issued as elsewhere: NODE_IN_USE, and nothing stays leased.
  HostNodeGuard none;
  Result<HostNodeGuard> two = HostNodeGuard::acquire(host, layout, 2);
  ASSERT_TRUE(two.ok());
  Result<Claim> refused = claim_with_host_guard(**registry, "third", host, layout, none, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kNodeInUse);
  EXPECT_HAS(refused.status().message(), "node 2");
  EXPECT_FALSE(none.held());
  Result<Claim> freed = (*registry)->claim("fourth", 1024);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(freed->lease.node, 2u);
}

// Field names are labels: `node:10` and `worker:10` give every ID the same bits, so they share a
// guard; `datacenter:5,worker:5` too (its node IDs are the same numbers).
TEST(HostGuardTest, LayoutsEqualUpToFieldNamesShareTheGuard) {
  TestHost t;
  const Layout node = test_layout();
  const Layout worker = Layout::parse("time:41@1ms,worker:10,seq:12;epoch=2025-01-01Z").value();
  const Layout split =
      Layout::parse("time:41@1ms,datacenter:5,worker:5,seq:12;epoch=2025-01-01Z").value();
  ASSERT_NE(node.to_string(), worker.to_string());
  Result<HostNodeGuard> held = HostNodeGuard::acquire(t.host, node, 4);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  for (const Layout* other : {&worker, &split}) {
    Result<HostNodeGuard> refused = HostNodeGuard::acquire(t.host, *other, 4);
    ASSERT_FALSE(refused.ok()) << other->to_string();
    EXPECT_EQ(refused.status().reason(), Reason::kNodeInUse);
  }
  // Another epoch or another seq width is another structure.
  const Layout later = Layout::parse("time:41@1ms,node:10,seq:12;epoch=2025-01-02Z").value();
  EXPECT_TRUE(HostNodeGuard::acquire(t.host, later, 4).ok());
}

// Runs `body` in a child process as user `uid` (root only) and returns its exit code.
template <typename Body>
int as_user(uid_t uid, Body body) {
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(99);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 98;
}

// Two users on one host (the host directory sticky and open to all, as /var/tmp is): each sees
// the other's guard, and nobody can hold a guard in another user's name (an entry named after
// root but owned by another user is set aside by root and not read by others).
TEST(HostGuardTest, SeenAcrossUsersAndNotPlantedInAnotherName) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  const uid_t other = 54321;
  const Layout layout = test_layout();

  // Another user plants an entry in root's name, with a lock file that looks held.
  ASSERT_EQ(as_user(other,
                    [&] {
                      const std::filesystem::path planted = dir.path() / "flurry-host.0";
                      if (::mkdir(planted.c_str(), 0755) != 0) return 1;
                      return 0;
                    }),
            0);
  Result<HostDir> root_host = HostDir::open(dir.path());
  ASSERT_TRUE(root_host.ok()) << root_host.status().to_string();
  struct stat st {};
  ASSERT_EQ(::stat(root_host->own().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);  // root's own entry now, the planted one moved aside

  // Root holds node 1: the other user is refused, naming root's process.
  Result<HostNodeGuard> root_guard = HostNodeGuard::acquire(*root_host, layout, 1);
  ASSERT_TRUE(root_guard.ok()) << root_guard.status().to_string();
  EXPECT_EQ(as_user(other,
                    [&] {
                      Result<HostDir> h = HostDir::open(dir.path());
                      if (!h.ok()) return 2;
                      Result<HostNodeGuard> g = HostNodeGuard::acquire(*h, layout, 1);
                      if (g.ok()) return 3;
                      if (g.status().reason() != Reason::kNodeInUse) return 4;
                      if (g.status().message().find("user ID 0") == std::string::npos) return 5;
                      // Another node ID is free for it.
                      Result<HostNodeGuard> two = HostNodeGuard::acquire(*h, layout, 2);
                      return two.ok() ? 0 : 6;
                    }),
            0);
  root_guard->release();
  // The other user's process has ended: its guards went with it.
  EXPECT_TRUE(HostNodeGuard::acquire(*root_host, layout, 2).ok());
}

// A host directory that others may write to but that is not sticky is refused: any user could
// replace another's entry there.
TEST(HostDirTest, RefusesAWorldWritableDirectoryThatIsNotSticky) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  Result<HostDir> refused = HostDir::open(dir.path());
  ASSERT_FALSE(refused.ok());
  EXPECT_HAS(refused.status().message(), "not sticky");
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  EXPECT_TRUE(HostDir::open(dir.path()).ok());
  const std::filesystem::path link = dir.path() / "link";
  ASSERT_EQ(::symlink(dir.path().c_str(), link.c_str()), 0);
  EXPECT_FALSE(HostDir::open(link).ok());
}

}  // namespace
}  // namespace flurry

// The NodeRegistry contract (include/flurry/registry.h), checked the same way for every backend:
// claims and hand-off of the horizon, fencing tokens, renewal, expiry, fencing of a stale owner,
// exhaustion, release, a corrupt horizon, another layout, and concurrent claims. Each backend
// is a RegistryBackend (tests/testing/registry_backend.h); a case is skipped, with the reason,
// only where the backend's contract differs (RegistryCapabilities). Backend-specific details
// (SQLite's file handling, the static registry's lock file) stay in registry_test.cc.
//
// Built twice: registry_conformance_test over the backends that need no server, and, with
// FLURRY_CONFORMANCE_SERVERS, registry_conformance_servers_test over those that run against a
// real server (etcd).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "flurry/open_registry.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "registry_backend.h"
#ifdef FLURRY_CONFORMANCE_SERVERS
#include "etcd_backend.h"
#include "postgres_backend.h"
#endif

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::RegistryBackend;
using testing::SqliteBackend;
using testing::StaticBackend;

constexpr std::string_view kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";
constexpr std::string_view kOtherLayout =
    "time:41@1ms,seq:12,node:10;epoch=2025-01-01T00:00:00.000Z";
// Node IDs a claim may choose from; a backend with one fixed node ID ignores the rest.
constexpr std::uint64_t kNodeCount = 16;

HorizonRecord record_for(std::uint64_t node, std::int64_t horizon) {
  return HorizonRecord{std::string(kLayout), node, 0, {horizon}};
}

template <typename Backend>
class RegistryConformanceTest : public ::testing::Test {
 protected:
  RegistryConformanceTest()
      : clock_(parse_time("2026-01-01T00:00:00Z").value()), backend_(clock_) {}

  RegistryBackend& backend() { return backend_; }
  testing::RegistryCapabilities caps() const { return backend_.capabilities(); }
  std::chrono::milliseconds ttl() const { return backend_.ttl(); }
  void let_time_pass(std::chrono::milliseconds d) { backend_.let_time_pass(d); }

  // A claim that must succeed once a lease ran out: at once where expiry is exact, else within
  // the backend's expiry slack (tried again every 100 ms).
  Claim claim_after_expiry(NodeRegistry& registry, std::string_view owner) {
    const std::chrono::milliseconds slack = caps().expiry_slack;
    for (std::chrono::milliseconds waited{0};; waited += 100ms) {
      Result<Claim> c = registry.claim(owner, 1);
      if (c.ok() || waited >= slack || c.status().reason() != Reason::kNoFreeNode) {
        EXPECT_TRUE(c.ok()) << registry.describe() << ": " << c.status().to_string();
        return c.ok() ? std::move(c).value() : Claim{};
      }
      let_time_pass(100ms);
    }
  }
  // How many leases can be held at once with kNodeCount node IDs.
  std::uint64_t capacity() const { return caps().node_count_limited_by_layout ? kNodeCount : 1; }

  // Another handle ("process") on the backend's storage; nullptr (and a failure) if it fails.
  std::unique_ptr<NodeRegistry> open(std::string_view layout = kLayout) {
    Result<std::unique_ptr<NodeRegistry>> r = backend_.open(layout);
    EXPECT_TRUE(r.ok()) << backend_.name() << ": " << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  static Claim claim(NodeRegistry& registry, std::string_view owner,
                     std::uint64_t count = kNodeCount) {
    Result<Claim> c = registry.claim(owner, count);
    EXPECT_TRUE(c.ok()) << registry.describe() << ": " << c.status().to_string();
    return c.ok() ? std::move(c).value() : Claim{};
  }

  static void expect_no_free_node(const Result<Claim>& c) {
    ASSERT_FALSE(c.ok()) << "claimed node " << c->lease.node << " (token " << c->lease.token << ")";
    EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted) << c.status().to_string();
    EXPECT_EQ(c.status().reason(), Reason::kNoFreeNode) << c.status().to_string();
    EXPECT_TRUE(c.status().retryable()) << c.status().to_string();
  }

  static void expect_lease_lost(const Status& st) {
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
    EXPECT_EQ(st.reason(), Reason::kLeaseLost) << st.to_string();
    EXPECT_TRUE(is_lease_gone(st)) << st.to_string();
  }

  // After `fresh` took the node from `stale`: the stale owner's renew and save are refused, its
  // release does not free the node (a `third` handle finds none free), the new owner works on,
  // and the refused save left no trace in what the next owner inherits.
  static void expect_stale_owner_fenced_out(NodeRegistry& stale_registry, const Claim& stale,
                                            NodeRegistry& fresh_registry, const Claim& fresh,
                                            NodeRegistry& third) {
    expect_lease_lost(stale_registry.renew(stale.lease));
    expect_lease_lost(stale_registry.save_horizon(stale.lease, record_for(0, 5000)));
    EXPECT_FALSE(stale_registry.release(stale.lease).ok());
    expect_no_free_node(third.claim("third", 1));

    EXPECT_TRUE(fresh_registry.renew(fresh.lease).ok());
    ASSERT_TRUE(fresh_registry.save_horizon(fresh.lease, record_for(0, 2000)).ok());
    ASSERT_TRUE(fresh_registry.release(fresh.lease).ok());
    const Claim c = claim(third, "third", 1);
    ASSERT_TRUE(c.inherited.has_value());
    EXPECT_EQ(*c.inherited, record_for(0, 2000));
  }

  FakeClock clock_;
  Backend backend_;
};

#ifdef FLURRY_CONFORMANCE_SERVERS
// The backends that need a server (registry_conformance_servers_test, label integration).
using testing::EtcdBackend;
using testing::SecuredEtcdBackend;
using Backends = ::testing::Types<EtcdBackend, SecuredEtcdBackend, testing::PostgresBackend,
                                  testing::PostgresTlsBackend>;
#else
using Backends = ::testing::Types<SqliteBackend, StaticBackend>;
#endif

class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, SqliteBackend>) return "Sqlite";
    if constexpr (std::is_same_v<T, StaticBackend>) return "Static";
#ifdef FLURRY_CONFORMANCE_SERVERS
    if constexpr (std::is_same_v<T, EtcdBackend>) return "Etcd";
    if constexpr (std::is_same_v<T, SecuredEtcdBackend>) return "EtcdTlsAuth";
    if constexpr (std::is_same_v<T, testing::PostgresBackend>) return "Postgres";
    if constexpr (std::is_same_v<T, testing::PostgresTlsBackend>) return "PostgresTls";
#endif
    return "Unknown";
  }
};

TYPED_TEST_SUITE(RegistryConformanceTest, Backends, BackendNames);

TYPED_TEST(RegistryConformanceTest, FirstClaimGivesALeaseWithoutAHorizon) {
  auto registry = this->open();
  ASSERT_NE(registry, nullptr);
  const Claim a = this->claim(*registry, "host:1");
  EXPECT_LT(a.lease.node, kNodeCount);
  EXPECT_GT(a.lease.token, 0u);
  EXPECT_EQ(a.lease.owner, "host:1");
  if (this->caps().leases_expire) {
    EXPECT_EQ(a.lease.ttl, this->ttl());
  }
  EXPECT_FALSE(a.inherited.has_value());
  EXPECT_FALSE(registry->describe().empty());
}

TYPED_TEST(RegistryConformanceTest, NextClaimInheritsExactlyTheSavedRecordWithAGreaterToken) {
  auto registry = this->open();
  ASSERT_NE(registry, nullptr);
  const Claim a = this->claim(*registry, "a");
  HorizonRecord record{std::string(kLayout), a.lease.node, 3, {-1, 5, 77, 123456789012}};
  ASSERT_TRUE(registry->save_horizon(a.lease, record).ok());
  record.horizons[3] = 123456789999;  // the last save wins
  ASSERT_TRUE(registry->save_horizon(a.lease, record).ok());
  ASSERT_TRUE(registry->release(a.lease).ok());

  // Claimed again through the same handle.
  const Claim b = this->claim(*registry, "b");
  ASSERT_EQ(b.lease.node, a.lease.node);
  EXPECT_GT(b.lease.token, a.lease.token);
  ASSERT_TRUE(b.inherited.has_value());
  EXPECT_EQ(*b.inherited, record);
  ASSERT_TRUE(registry->release(b.lease).ok());

  // And through another handle on the same storage (another process): the token still grows.
  auto other = this->open();
  ASSERT_NE(other, nullptr);
  const Claim c = this->claim(*other, "c");
  ASSERT_EQ(c.lease.node, a.lease.node);
  EXPECT_GT(c.lease.token, b.lease.token);
  ASSERT_TRUE(c.inherited.has_value());
  EXPECT_EQ(*c.inherited, record);
  ASSERT_TRUE(other->release(c.lease).ok());
  const Claim d = this->claim(*registry, "d");
  EXPECT_GT(d.lease.token, c.lease.token);
}

TYPED_TEST(RegistryConformanceTest, RenewKeepsTheLease) {
  auto registry = this->open();
  auto other = this->open();
  ASSERT_NE(registry, nullptr);
  ASSERT_NE(other, nullptr);
  const Claim a = this->claim(*registry, "a", 1);
  const auto step = this->ttl() * 2 / 3;
  for (int i = 0; i < 3; ++i) {  // well past one TTL since the claim, never one since a renewal
    this->let_time_pass(step);
    ASSERT_TRUE(registry->renew(a.lease).ok());
    this->expect_no_free_node(other->claim("b", 1));
  }
  EXPECT_TRUE(registry->save_horizon(a.lease, record_for(a.lease.node, 42)).ok());
  EXPECT_TRUE(registry->release(a.lease).ok());
}

TYPED_TEST(RegistryConformanceTest, ReleaseFreesTheNodeAtOnce) {
  auto registry = this->open();
  auto other = this->open();
  ASSERT_NE(registry, nullptr);
  ASSERT_NE(other, nullptr);
  const Claim a = this->claim(*registry, "a", 1);
  this->expect_no_free_node(other->claim("b", 1));
  ASSERT_TRUE(registry->release(a.lease).ok());
  const Claim b = this->claim(*other, "b", 1);  // no clock movement
  EXPECT_EQ(b.lease.node, a.lease.node);
}

// A released lease is stale: its holder is fenced out, and cannot free the next owner's node.
TYPED_TEST(RegistryConformanceTest, ReleasedLeaseIsFencedOut) {
  auto old_registry = this->open();
  auto new_registry = this->open();
  auto third = this->open();
  ASSERT_NE(old_registry, nullptr);
  ASSERT_NE(new_registry, nullptr);
  ASSERT_NE(third, nullptr);
  const Claim old_claim = this->claim(*old_registry, "old", 1);
  ASSERT_TRUE(old_registry->save_horizon(old_claim.lease, record_for(0, 1000)).ok());
  ASSERT_TRUE(old_registry->release(old_claim.lease).ok());
  const Claim new_claim = this->claim(*new_registry, "new", 1);
  this->expect_stale_owner_fenced_out(*old_registry, old_claim, *new_registry, new_claim, *third);
}

// The operators' view: the node IDs held and free, their owners, tokens, leases and horizons.
TYPED_TEST(RegistryConformanceTest, ListShowsOwnersTokensLeasesAndHorizons) {
  auto registry = this->open();
  ASSERT_NE(registry, nullptr);
  Result<RegistryListing> empty = registry->list();
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_TRUE(empty->nodes.empty());

  const Claim a = this->claim(*registry, "host-a:11", 1);
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(a.lease.node, 4242)).ok());
  auto other = this->open();  // another process lists
  ASSERT_NE(other, nullptr);
  Result<RegistryListing> listed = other->list();
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  EXPECT_EQ(listed->layout, kLayout);
  ASSERT_EQ(listed->nodes.size(), 1u);
  const NodeInfo& held = listed->nodes[0];
  EXPECT_EQ(held.node, a.lease.node);
  EXPECT_EQ(held.owner, "host-a:11");
  EXPECT_EQ(held.token, a.lease.token);
  EXPECT_TRUE(held.live);
  ASSERT_TRUE(held.horizon.has_value());
  EXPECT_EQ(*held.horizon, record_for(a.lease.node, 4242));
  EXPECT_TRUE(held.horizon_error.empty()) << held.horizon_error;
  if (this->caps().leases_expire) {
    ASSERT_TRUE(held.expires_unix_ms.has_value());
    // The expiry is the registry's: about one TTL ahead of the time the claim was made.
    const std::int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(this->clock_.now().time_since_epoch())
            .count();
    if (this->caps().expiry_slack == 0ms) {
      EXPECT_EQ(*held.expires_unix_ms, now_ms + this->ttl().count());
    } else {
      EXPECT_GT(*held.expires_unix_ms, 0);
    }
  } else {
    EXPECT_FALSE(held.expires_unix_ms.has_value());
  }

  ASSERT_TRUE(registry->release(a.lease).ok());
  listed = other->list();
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  ASSERT_EQ(listed->nodes.size(), 1u);
  EXPECT_FALSE(listed->nodes[0].live);
  EXPECT_FALSE(listed->nodes[0].expires_unix_ms.has_value());
  ASSERT_TRUE(listed->nodes[0].horizon.has_value());  // the horizon stays with the node ID
  EXPECT_EQ(*listed->nodes[0].horizon, record_for(a.lease.node, 4242));

  this->backend().corrupt_horizon(a.lease.node);  // listed with the reason, not refused
  listed = other->list();
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  ASSERT_EQ(listed->nodes.size(), 1u);
  EXPECT_FALSE(listed->nodes[0].horizon.has_value());
  EXPECT_FALSE(listed->nodes[0].horizon_error.empty());
}

// An operator's release: refused while a lease is live; by force, the holder is fenced out and
// the next owner starts from the horizon the registry last accepted.
TYPED_TEST(RegistryConformanceTest, ReleaseNodeRefusesALiveLeaseUnlessForced) {
  auto holder = this->open();
  auto operator_handle = this->open();
  auto next = this->open();
  ASSERT_NE(holder, nullptr);
  ASSERT_NE(operator_handle, nullptr);
  ASSERT_NE(next, nullptr);
  const Claim a = this->claim(*holder, "holder", 1);
  ASSERT_TRUE(holder->save_horizon(a.lease, record_for(a.lease.node, 777)).ok());

  const Status refused = operator_handle->release_node(a.lease.node, /*force=*/false);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.to_string();
  EXPECT_EQ(refused.reason(), Reason::kLeaseLive) << refused.to_string();
  EXPECT_NE(refused.message().find("holder"), std::string::npos) << refused.message();
  EXPECT_TRUE(holder->renew(a.lease).ok());  // untouched
  this->expect_no_free_node(next->claim("next", 1));

  const Status not_found = operator_handle->release_node(kNodeCount + 5, /*force=*/false);
  EXPECT_EQ(not_found.code(), StatusCode::kNotFound) << not_found.to_string();

  const Status forced = operator_handle->release_node(a.lease.node, /*force=*/true);
  if (!this->caps().forced_release) {
    EXPECT_EQ(forced.reason(), Reason::kLeaseLive) << forced.to_string();
    EXPECT_TRUE(holder->renew(a.lease).ok());
    ASSERT_TRUE(holder->release(a.lease).ok());
    EXPECT_TRUE(operator_handle->release_node(a.lease.node, /*force=*/false).ok())
        << "a free node is released without force";
    return;
  }
  ASSERT_TRUE(forced.ok()) << forced.to_string();
  this->expect_lease_lost(holder->renew(a.lease));
  this->expect_lease_lost(holder->save_horizon(a.lease, record_for(a.lease.node, 9999)));
  const Claim b = this->claim(*next, "next", 1);
  EXPECT_EQ(b.lease.node, a.lease.node);
  EXPECT_GT(b.lease.token, a.lease.token);
  ASSERT_TRUE(b.inherited.has_value());
  EXPECT_EQ(*b.inherited, record_for(a.lease.node, 777));
  this->expect_lease_lost(holder->release(a.lease));
  EXPECT_TRUE(next->renew(b.lease).ok()) << "the fenced holder's release freed the next owner's";
}

// Where leases expire, an expired lease is released without force.
TYPED_TEST(RegistryConformanceTest, ReleaseNodeOfAnExpiredLeaseNeedsNoForce) {
  auto holder = this->open();
  auto operator_handle = this->open();
  ASSERT_NE(holder, nullptr);
  ASSERT_NE(operator_handle, nullptr);
  const Claim a = this->claim(*holder, "holder", 1);
  if (!this->caps().leases_expire) {
    this->let_time_pass(24h);
    EXPECT_EQ(operator_handle->release_node(a.lease.node, false).reason(), Reason::kLeaseLive);
    return;
  }
  this->let_time_pass(this->ttl() + this->caps().expiry_slack);
  Status st = operator_handle->release_node(a.lease.node, /*force=*/false);
  for (int i = 0; i < 20 && st.reason() == Reason::kLeaseLive; ++i) {  // the registry's clock
    this->let_time_pass(100ms);
    st = operator_handle->release_node(a.lease.node, /*force=*/false);
  }
  EXPECT_TRUE(st.ok()) << st.to_string();
  this->expect_lease_lost(holder->save_horizon(a.lease, record_for(a.lease.node, 1)));
}

// A lease holds for its TTL; then (where leases expire) another handle takes the node ID,
// inherits its horizon and fences the old owner out. Where leases never expire (static) it holds
// however long nobody renews it.
TYPED_TEST(RegistryConformanceTest, LeaseHoldsForItsTtlThenPassesOnAndFencesTheOldOwner) {
  if (!this->caps().leases_expire) {
    auto registry = this->open();
    auto other = this->open();
    ASSERT_NE(registry, nullptr);
    ASSERT_NE(other, nullptr);
    const Claim a = this->claim(*registry, "a", 1);
    this->let_time_pass(24h);
    this->expect_no_free_node(other->claim("b", 1));
    EXPECT_TRUE(registry->renew(a.lease).ok());
    return;
  }
  auto old_registry = this->open();
  auto new_registry = this->open();
  auto third = this->open();
  ASSERT_NE(old_registry, nullptr);
  ASSERT_NE(new_registry, nullptr);
  ASSERT_NE(third, nullptr);
  const Claim old_claim = this->claim(*old_registry, "old", 1);
  ASSERT_TRUE(old_registry->save_horizon(old_claim.lease, record_for(0, 1000)).ok());

  // Exactly at the TTL on a fake clock; within the slack where the registry's clock decides.
  const std::chrono::milliseconds before =
      std::max<std::chrono::milliseconds>(this->caps().expiry_slack, 1ms);
  this->let_time_pass(this->ttl() - before);
  this->expect_no_free_node(new_registry->claim("new", 1));
  this->let_time_pass(before);
  const Claim new_claim = this->claim_after_expiry(*new_registry, "new");
  ASSERT_EQ(new_claim.lease.node, old_claim.lease.node);
  EXPECT_GT(new_claim.lease.token, old_claim.lease.token);
  ASSERT_TRUE(new_claim.inherited.has_value());
  EXPECT_EQ(*new_claim.inherited, record_for(0, 1000));

  this->expect_stale_owner_fenced_out(*old_registry, old_claim, *new_registry, new_claim, *third);
}

TYPED_TEST(RegistryConformanceTest, ExhaustionIsNoFreeNode) {
  auto registry = this->open();
  auto other = this->open();
  ASSERT_NE(registry, nullptr);
  ASSERT_NE(other, nullptr);
  std::set<std::uint64_t> nodes;
  for (std::uint64_t i = 0; i < this->capacity(); ++i) {
    nodes.insert(this->claim(*registry, "a").lease.node);
  }
  EXPECT_EQ(nodes.size(), this->capacity());
  this->expect_no_free_node(registry->claim("a", kNodeCount));
  this->expect_no_free_node(other->claim("b", kNodeCount));
}

TYPED_TEST(RegistryConformanceTest, CorruptHorizonIsRefusedNotReadAsNone) {
  auto registry = this->open();
  ASSERT_NE(registry, nullptr);
  const Claim a = this->claim(*registry, "a");
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(a.lease.node, 42)).ok());
  ASSERT_TRUE(registry->release(a.lease).ok());
  this->backend().corrupt_horizon(a.lease.node);

  auto other = this->open();
  ASSERT_NE(other, nullptr);
  for (NodeRegistry* handle : {registry.get(), other.get()}) {  // the saver and another handle
    const Result<Claim> c = handle->claim("b", kNodeCount);
    if (c.ok()) {
      ADD_FAILURE() << handle->describe() << ": claimed node " << c->lease.node << " with "
                    << (c->inherited ? "a horizon" : "no horizon") << " over a corrupt record";
      continue;
    }
    EXPECT_EQ(c.status().code(), StatusCode::kDataLoss) << c.status().to_string();
    EXPECT_EQ(c.status().reason(), Reason::kCorrupt) << c.status().to_string();
  }
}

TYPED_TEST(RegistryConformanceTest, AnotherLayoutIsRefusedNamingBoth) {
  {
    auto registry = this->open();
    ASSERT_NE(registry, nullptr);
    const Claim a = this->claim(*registry, "a");
    ASSERT_TRUE(registry->save_horizon(a.lease, record_for(a.lease.node, 42)).ok());
    ASSERT_TRUE(registry->release(a.lease).ok());
  }
  // Refused when opened or, at the latest, when claiming.
  Result<std::unique_ptr<NodeRegistry>> other = this->backend().open(kOtherLayout);
  Status st = other.status();
  if (other.ok()) st = (*other)->claim("b", kNodeCount).status();
  ASSERT_FALSE(st.ok()) << "a registry of another layout was used";
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kStateMismatch) << st.to_string();
  EXPECT_NE(st.message().find(std::string(kLayout)), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(std::string(kOtherLayout)), std::string::npos) << st.message();
  // The storage is still the first layout's.
  auto registry = this->open();
  ASSERT_NE(registry, nullptr);
  EXPECT_TRUE(this->claim(*registry, "c").inherited.has_value());
}

// Field names are labels: the same layout spelt with another node field's name (or its node bits
// split into two fields) is the registry's own layout, and inherits the horizon saved under it.
TYPED_TEST(RegistryConformanceTest, TheSameLayoutUnderOtherFieldNamesIsAccepted) {
  std::uint64_t node = 0;
  {
    auto registry = this->open();
    ASSERT_NE(registry, nullptr);
    const Claim a = this->claim(*registry, "a");
    node = a.lease.node;
    ASSERT_TRUE(registry->save_horizon(a.lease, record_for(a.lease.node, 42)).ok());
    ASSERT_TRUE(registry->release(a.lease).ok());
  }
  for (std::string_view spelling : {"time:41@1ms,worker:10,seq:12;epoch=2025-01-01T00:00:00.000Z",
                                    "time:41@1ms,datacenter:5,worker:5,seq:12;epoch=2025-01-01Z"}) {
    Result<std::unique_ptr<NodeRegistry>> same = this->backend().open(spelling);
    ASSERT_TRUE(same.ok()) << spelling << ": " << same.status().to_string();
    Result<Claim> c = (*same)->claim("b", kNodeCount);
    ASSERT_TRUE(c.ok()) << spelling << ": " << c.status().to_string();
    if (c->lease.node == node) {
      ASSERT_TRUE(c->inherited.has_value()) << spelling;
      EXPECT_EQ(c->inherited->horizons.at(0), 42) << spelling;
    }
    ASSERT_TRUE((*same)->release(c->lease).ok());
  }
}

// Many threads, each with its own handle, claim at once: never one node ID for two owners, and
// NO_FREE_NODE only once every node ID is taken.
TYPED_TEST(RegistryConformanceTest, ConcurrentClaimsNeverShareANode) {
  ASSERT_NE(this->open(), nullptr);  // creates the storage
  constexpr int kThreads = 8;
  constexpr int kClaimsPerThread = 3;  // 24 claims > 16 node IDs
  constexpr int kMaxBusyRetries = 100;
  struct Outcome {
    std::vector<std::uint64_t> nodes;
    int no_free_node = 0;
    std::vector<std::string> errors;
  };
  std::vector<Outcome> outcomes(kThreads);
  std::vector<std::unique_ptr<NodeRegistry>> handles;
  for (int t = 0; t < kThreads; ++t) {
    handles.push_back(this->open());
    ASSERT_NE(handles.back(), nullptr);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Outcome& out = outcomes[static_cast<std::size_t>(t)];
      for (int i = 0; i < kClaimsPerThread; ++i) {
        for (int attempt = 0;; ++attempt) {
          Result<Claim> c = handles[static_cast<std::size_t>(t)]->claim(
              "thread:" + std::to_string(t), kNodeCount);
          if (c.ok()) {
            out.nodes.push_back(c->lease.node);
          } else if (c.status().reason() == Reason::kNoFreeNode) {
            ++out.no_free_node;
          } else if (c.status().code() == StatusCode::kUnavailable && attempt < kMaxBusyRetries) {
            continue;  // busy: retryable by contract
          } else {
            out.errors.push_back(c.status().to_string());
          }
          break;
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  std::multiset<std::uint64_t> all;
  int no_free_node = 0;
  for (const Outcome& out : outcomes) {
    for (const std::string& e : out.errors) ADD_FAILURE() << e;
    all.insert(out.nodes.begin(), out.nodes.end());
    no_free_node += out.no_free_node;
  }
  for (std::uint64_t node : all) {
    EXPECT_EQ(all.count(node), 1u) << "node " << node << " was given to several owners";
    EXPECT_LT(node, kNodeCount);
  }
  // With no release, NO_FREE_NODE before every node ID was taken would leave some unclaimed.
  EXPECT_EQ(all.size(), this->capacity());
  EXPECT_EQ(static_cast<std::uint64_t>(no_free_node),
            std::uint64_t{kThreads * kClaimsPerThread} - this->capacity());
}

// The same across processes: each child opens its own handle, claims, reports the node IDs it
// got through a pipe and holds its leases until the parent has heard from every child.
TYPED_TEST(RegistryConformanceTest, ConcurrentClaimsFromProcessesNeverShareANode) {
  ASSERT_NE(this->open(), nullptr);  // creates the storage
  constexpr int kProcesses = 6;
  constexpr int kClaimsPerProcess = 3;  // 18 claims > 16 node IDs
  int results[2];
  int hold[2];
  ASSERT_EQ(::pipe(results), 0);
  ASSERT_EQ(::pipe(hold), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(results[0]);
      ::close(hold[1]);
      std::string out;
      Result<std::unique_ptr<NodeRegistry>> handle = this->backend().open(kLayout);
      for (int i = 0; handle.ok() && i < kClaimsPerProcess; ++i) {
        Result<Claim> c = (*handle)->claim("process:" + std::to_string(p), kNodeCount);
        for (int attempt = 0;
             !c.ok() && c.status().code() == StatusCode::kUnavailable && attempt < 100; ++attempt) {
          c = (*handle)->claim("process:" + std::to_string(p), kNodeCount);
        }
        if (c.ok()) {
          out += "node " + std::to_string(c->lease.node) + "\n";
        } else if (c.status().reason() == Reason::kNoFreeNode) {
          out += "none\n";
        } else {
          out += "error " + c.status().to_string() + "\n";
        }
      }
      if (!handle.ok()) out += "error " + handle.status().to_string() + "\n";
      out += "done\n";
      (void)!::write(results[1], out.data(), out.size());  // < PIPE_BUF: one atomic write
      char byte;
      (void)!::read(hold[0], &byte, 1);  // until the parent closes its end
      ::_exit(0);
    }
    children.push_back(pid);
  }
  ::close(results[1]);
  ::close(hold[0]);
  std::string all_output;
  char buf[4096];
  const auto reports = [&] {
    int done = 0;
    for (std::size_t at = 0; (at = all_output.find("done\n", at)) != std::string::npos; ++at) {
      ++done;
    }
    return done;
  };
  // Each child writes its whole report at once; a child that died early closes its end.
  for (ssize_t n; reports() < kProcesses && (n = ::read(results[0], buf, sizeof buf)) > 0;) {
    all_output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(hold[1]);  // the children exit now, their leases unreleased
  ::close(results[0]);
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }

  std::multiset<std::uint64_t> nodes;
  int none = 0;
  int done = 0;
  std::istringstream lines(all_output);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("node ")) {
      nodes.insert(std::stoull(line.substr(5)));
    } else if (line == "none") {
      ++none;
    } else if (line == "done") {
      ++done;
    } else {
      ADD_FAILURE() << line;
    }
  }
  EXPECT_EQ(done, kProcesses);
  for (std::uint64_t node : nodes) {
    EXPECT_EQ(nodes.count(node), 1u) << "node " << node << " was given to several processes";
  }
  EXPECT_EQ(nodes.size(), this->capacity());
  EXPECT_EQ(static_cast<std::uint64_t>(none),
            std::uint64_t{kProcesses * kClaimsPerProcess} - this->capacity());
}

// The node IDs and the timestamp oracle's lease are two registries over one storage
// (RegistryScope): each keeps its own layout, leases and horizons, opened through open_registry as
// `flurry serve --tso` opens them.
void expect_scopes_independent(const RegistryOptions& options) {
  const Layout ids = Layout::parse("flurry").value();
  const Layout tso = Layout::parse("tso").value();
  const Clocks clocks = Clocks::system();
  Result<std::unique_ptr<NodeRegistry>> node_ids = open_registry(options, ids, clocks, "host-0");
  ASSERT_TRUE(node_ids.ok()) << node_ids.status().to_string();
  Result<std::unique_ptr<NodeRegistry>> oracle =
      open_registry(options, tso, clocks, "host-0", RegistryScope::kTimestampOracle);
  ASSERT_TRUE(oracle.ok()) << oracle.status().to_string();
  EXPECT_NE((*oracle)->describe(), "");

  Result<Claim> id_claim = (*node_ids)->claim("ids", ids.node_count());
  ASSERT_TRUE(id_claim.ok()) << id_claim.status().to_string();
  // Another layout over the same storage: refused in the same scope, accepted in the oracle's.
  Result<std::unique_ptr<NodeRegistry>> same_scope = open_registry(options, tso, clocks, "host-0");
  if (same_scope.ok()) {
    EXPECT_FALSE((*same_scope)->claim("x", 1).ok());  // the layout is checked at the first claim
  }
  Result<Claim> leader = (*oracle)->claim("leader http=127.0.0.1:1", tso.node_count());
  ASSERT_TRUE(leader.ok()) << leader.status().to_string();
  EXPECT_EQ(leader->lease.node, 0u);
  EXPECT_FALSE(leader->inherited.has_value());
  // One node ID in the oracle's scope: a second claimant finds none free.
  Result<std::unique_ptr<NodeRegistry>> other =
      open_registry(options, tso, clocks, "host-0", RegistryScope::kTimestampOracle);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  Result<Claim> second = (*other)->claim("follower", tso.node_count());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().reason(), Reason::kNoFreeNode) << second.status().to_string();

  // The oracle's window stays in its scope, and passes to the next leader.
  const HorizonRecord window = record_for(0, 777);
  HorizonRecord tso_window = window;
  tso_window.layout = tso.to_string();
  ASSERT_TRUE((*oracle)->save_horizon(leader->lease, tso_window).ok());
  Result<RegistryListing> listing = (*node_ids)->list();
  ASSERT_TRUE(listing.ok()) << listing.status().to_string();
  EXPECT_EQ(listing->layout, ids.to_string());
  for (const NodeInfo& n : listing->nodes) EXPECT_NE(n.owner, "leader http=127.0.0.1:1");
  Result<RegistryListing> oracle_listing = (*other)->list();
  ASSERT_TRUE(oracle_listing.ok()) << oracle_listing.status().to_string();
  ASSERT_EQ(oracle_listing->nodes.size(), 1u);
  EXPECT_EQ(oracle_listing->nodes[0].owner, "leader http=127.0.0.1:1");
  EXPECT_EQ(oracle_listing->layout, tso.to_string());
  ASSERT_TRUE((*oracle)->release(leader->lease).ok());
  Result<Claim> next = (*other)->claim("follower", tso.node_count());
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  ASSERT_TRUE(next->inherited.has_value());
  EXPECT_EQ(*next->inherited, tso_window);
  EXPECT_GT(next->lease.token, leader->lease.token);
  ASSERT_TRUE((*other)->release(next->lease).ok());
  ASSERT_TRUE((*node_ids)->release(id_claim->lease).ok());
}

#ifdef FLURRY_CONFORMANCE_SERVERS
TEST(RegistryScopeTest, EtcdScopesAreIndependent) {
  Result<std::string> endpoint = EtcdBackend::server().endpoint();
  ASSERT_TRUE(endpoint.ok()) << endpoint.status().to_string();
  RegistryOptions options;
  options.kind = RegistryKind::kEtcd;
  testing::TempDir dir;
  options.data_dir = dir.path();
  options.host_dir = dir.path() / "host";
  Result<std::vector<EtcdEndpoint>> endpoints = parse_etcd_endpoints(*endpoint);
  ASSERT_TRUE(endpoints.ok());
  options.etcd_endpoints = *endpoints;
  options.cluster = "scopes-" + std::to_string(::getpid());
  options.lease_ttl = std::chrono::seconds(10);
  expect_scopes_independent(options);
}

TEST(RegistryScopeTest, PostgresScopesAreIndependent) {
  testing::PostgresServer& server = testing::PostgresServer::shared();
  const std::string database = server.create_database();
  RegistryOptions options;
  options.kind = RegistryKind::kPostgres;
  testing::TempDir dir;
  options.data_dir = dir.path();
  options.host_dir = dir.path() / "host";
  options.postgres_url = server.url(database);
  options.lease_ttl = std::chrono::seconds(10);
  expect_scopes_independent(options);
  // The oracle's tables sit beside the node IDs' ones.
  EXPECT_EQ(server.exec(database, "SELECT 1 FROM flurry_tso_nodes"), 1);  // the released row
  server.drop_database(database);
}
#else
TEST(RegistryScopeTest, SqliteScopesAreIndependent) {
  testing::TempDir dir;
  RegistryOptions options;
  options.data_dir = dir.path();
  options.host_dir = dir.path() / "host";
  expect_scopes_independent(options);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "tso-registry.db"));
}
#endif

}  // namespace
}  // namespace flurry

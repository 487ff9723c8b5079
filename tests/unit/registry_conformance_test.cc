// The NodeRegistry contract (include/flurry/registry.h), checked the same way for every backend:
// claims and hand-off of the horizon, fencing tokens, renewal, expiry, fencing of a stale owner,
// exhaustion, release, a corrupt horizon, another layout, and concurrent claims. Each backend
// is a RegistryBackend (tests/testing/registry_backend.h); a case is skipped, with the reason,
// only where the backend's contract differs (RegistryCapabilities). Backend-specific details
// (SQLite's file handling, the static registry's lock file) stay in registry_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "registry_backend.h"

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
constexpr std::chrono::milliseconds kTtl = 10s;
// Node IDs a claim may choose from; a backend with one fixed node ID ignores the rest.
constexpr std::uint64_t kNodeCount = 16;

HorizonRecord record_for(std::uint64_t node, std::int64_t horizon) {
  return HorizonRecord{std::string(kLayout), node, 0, {horizon}};
}

template <typename Backend>
class RegistryConformanceTest : public ::testing::Test {
 protected:
  RegistryConformanceTest()
      : clock_(parse_time("2026-01-01T00:00:00Z").value()), backend_(kTtl, clock_) {}

  RegistryBackend& backend() { return backend_; }
  testing::RegistryCapabilities caps() const { return backend_.capabilities(); }
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

using Backends = ::testing::Types<SqliteBackend, StaticBackend>;

class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, SqliteBackend>) return "Sqlite";
    if constexpr (std::is_same_v<T, StaticBackend>) return "Static";
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
    EXPECT_EQ(a.lease.ttl, kTtl);
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
  const auto step = kTtl * 2 / 3;
  for (int i = 0; i < 3; ++i) {  // well past one TTL since the claim, never one since a renewal
    this->clock_.advance(step);
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
    this->clock_.advance(24h);
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

  this->clock_.advance(kTtl - 1ms);
  this->expect_no_free_node(new_registry->claim("new", 1));
  this->clock_.advance(1ms);
  const Claim new_claim = this->claim(*new_registry, "new", 1);
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

}  // namespace
}  // namespace flurry

// The etcd registry's watch and history against a real etcd (tests/testing/etcd_server.h): a
// revoked lease or a horizon put back below the last save is told to the lease keeper at once
// (watch_lease), the holder's own saves are not mistaken for someone else's, a claim inherits the
// highest horizon in the key's retained history, and claimants starting at once all get distinct
// node IDs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "etcd_server.h"
#include "flurry/clock.h"
#include "flurry/registry.h"
#include "registry/etcd_client.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::EtcdServer;

constexpr std::string_view kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";

// What a watch told, and when.
class Told {
 public:
  void operator()(const Status& why) {
    std::lock_guard lock(mu_);
    statuses_.push_back(why);
    at_ = std::chrono::steady_clock::now();
    cv_.notify_all();
  }
  // The first status told within `real_timeout`.
  std::optional<Status> await(std::chrono::milliseconds real_timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, real_timeout, [&] { return !statuses_.empty(); })) return std::nullopt;
    return statuses_.front();
  }
  std::size_t count() {
    std::lock_guard lock(mu_);
    return statuses_.size();
  }
  std::chrono::steady_clock::time_point at() {
    std::lock_guard lock(mu_);
    return at_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Status> statuses_;
  std::chrono::steady_clock::time_point at_;
};

class EtcdWatchHistoryTest : public ::testing::Test {
 protected:
  EtcdWatchHistoryTest() {
    static int next = 0;
    cluster_ = "wh-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
  }

  void SetUp() override {
    Result<std::string> ep = EtcdServer::shared().endpoint();
    ASSERT_TRUE(ep.ok()) << ep.status().to_string();
    endpoint_ = *ep;
  }

  std::unique_ptr<NodeRegistry> open(std::chrono::milliseconds ttl = 10s) {
    EtcdRegistryOptions o;
    o.endpoints = {endpoint_};
    o.cluster = cluster_;
    o.ttl = ttl;
    Result<std::unique_ptr<NodeRegistry>> r = open_etcd_registry(o, kLayout, SystemClock::coarse());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  std::string key(std::string_view kind, std::uint64_t node) const {
    return "/flurry/" + cluster_ + "/" + std::string(kind) + "/" + std::to_string(node);
  }
  HorizonRecord record(std::uint64_t node, std::int64_t horizon) const {
    return HorizonRecord{std::string(kLayout), node, 0, {horizon}};
  }
  // Writes `value` to `k` as an operator's `etcdctl put` would.
  void put(const std::string& k, const std::string& value) {
    internal::EtcdTxn txn;
    txn.success = {internal::EtcdOp::put(k, value)};
    Result<internal::EtcdTxnResult> r = EtcdServer::shared().client()->txn(txn);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
  }
  // The etcd lease of node `node`'s key.
  std::int64_t lease_of(std::uint64_t node) {
    Result<internal::EtcdRange> r = EtcdServer::shared().client()->range(key("nodes", node));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok() || r->kvs.empty()) return 0;
    return r->kvs.front().lease;
  }

  std::string cluster_;
  std::string endpoint_;
};

TEST_F(EtcdWatchHistoryTest, ARevokedLeaseIsToldWithinARoundTrip) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("holder:1", 4);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  Told told;
  Result<std::unique_ptr<NodeRegistry::LeaseWatch>> watch =
      registry->watch_lease(c->lease, [&told](const Status& why) { told(why); });
  ASSERT_TRUE(watch.ok()) << watch.status().to_string();
  ASSERT_NE(*watch, nullptr) << "the etcd registry does not watch";
  ASSERT_TRUE(registry->renew(c->lease).ok());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(told.count(), 0u) << "told of a loss while nothing happened";

  const auto revoked = std::chrono::steady_clock::now();
  ASSERT_TRUE(EtcdServer::shared().client()->revoke(lease_of(c->lease.node)).ok());
  std::optional<Status> why = told.await(5s);
  ASSERT_TRUE(why.has_value()) << "the watch did not tell of the revoked lease within 5 s";
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(told.at() - revoked);
  EXPECT_TRUE(is_lease_gone(*why)) << why->to_string();
  EXPECT_EQ(why->reason(), Reason::kLeaseLost) << why->to_string();
  EXPECT_NE(why->message().find("seen by the watch"), std::string::npos) << why->message();
  // One round trip on loopback; the bound leaves room for a loaded machine.
  EXPECT_LT(took, 1000ms);
  std::printf("the revocation was told %lld ms after etcd answered it\n",
              static_cast<long long>(took.count()));
  // Told once only, and the renewal agrees.
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(told.count(), 1u);
  EXPECT_TRUE(is_lease_gone(registry->renew(c->lease)));
  watch->reset();
}

TEST_F(EtcdWatchHistoryTest, AHorizonPutBackBelowTheLastSaveIsToldAtOnce) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("holder:1", 4);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const std::uint64_t node = c->lease.node;
  Told told;
  auto watch = registry->watch_lease(c->lease, [&told](const Status& why) { told(why); });
  ASSERT_TRUE(watch.ok() && *watch != nullptr) << watch.status().to_string();

  // The holder's own saves, a lower one among them (a tight save at shutdown), tell nothing.
  ASSERT_TRUE(registry->save_horizon(c->lease, record(node, 1000)).ok());
  ASSERT_TRUE(registry->save_horizon(c->lease, record(node, 2000)).ok());
  ASSERT_TRUE(registry->save_horizon(c->lease, record(node, 3000)).ok());
  ASSERT_TRUE(registry->save_horizon(c->lease, record(node, 2500)).ok());
  ASSERT_TRUE(registry->save_horizon(c->lease, record(node, 4000)).ok());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(told.count(), 0u) << "the holder's own saves were taken for someone else's";

  // A value above the last save written by someone else tells nothing either (nothing issued
  // can be repeated by it).
  put(key("horizon", node), format_horizon_record(record(node, 5000)));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(told.count(), 0u);

  // Put back below the last save (etcdctl put of saved bytes): a registry gone backwards.
  put(key("horizon", node), format_horizon_record(record(node, 2000)));
  std::optional<Status> why = told.await(5s);
  ASSERT_TRUE(why.has_value()) << "the put-back was not told within 5 s";
  EXPECT_EQ(why->reason(), Reason::kRegistryRegressed) << why->to_string();
  EXPECT_TRUE(is_lease_gone(*why));
  watch->reset();
}

TEST_F(EtcdWatchHistoryTest, AClaimInheritsTheHighestHorizonTheKeysHistoryHolds) {
  auto holder = open();
  ASSERT_NE(holder, nullptr);
  Result<Claim> c = holder->claim("holder:1", 1);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const std::uint64_t node = c->lease.node;
  ASSERT_TRUE(holder->save_horizon(c->lease, record(node, 1000)).ok());
  ASSERT_TRUE(holder->save_horizon(c->lease, record(node, 9000)).ok());
  // Put back to the first save's bytes, and the holder dies before it repairs the key: its lease
  // is revoked (as etcd would expire it), nothing is released.
  put(key("horizon", node), format_horizon_record(record(node, 1000)));
  ASSERT_TRUE(EtcdServer::shared().client()->revoke(lease_of(node)).ok());
  holder.reset();

  auto next = open();
  ASSERT_NE(next, nullptr);
  Result<Claim> taken = next->claim("next:2", 1);
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  ASSERT_EQ(taken->lease.node, node);
  ASSERT_TRUE(taken->inherited.has_value());
  // The current value says 1000; the history says 9000 was saved under the earlier lease.
  EXPECT_EQ(taken->inherited->horizons, std::vector<std::int64_t>{9000});
}

TEST_F(EtcdWatchHistoryTest, ANodeIdNeverUsedInheritsNothing) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  Result<Claim> c = registry->claim("first:1", 4);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->inherited.has_value());
}

TEST_F(EtcdWatchHistoryTest, ClaimantsStartingAtOnceGetDistinctNodeIds) {
  constexpr int kClaimants = 24;
  std::vector<std::unique_ptr<NodeRegistry>> registries;
  for (int i = 0; i < kClaimants; ++i) {
    registries.push_back(open());
    ASSERT_NE(registries.back(), nullptr);
  }
  std::vector<Result<Claim>> claims(kClaimants, Status(StatusCode::kUnknown, "not run"));
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClaimants; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      claims[i] = registries[i]->claim("claimant:" + std::to_string(i), kClaimants);
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  std::set<std::uint64_t> nodes;
  for (const Result<Claim>& c : claims) {
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    nodes.insert(c->lease.node);
  }
  EXPECT_EQ(nodes.size(), static_cast<std::size_t>(kClaimants));
  // The layout is full now: the next claimant is refused, naming why.
  auto late = open();
  ASSERT_NE(late, nullptr);
  Result<Claim> refused = late->claim("late:99", kClaimants);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kNoFreeNode) << refused.status().to_string();
}

}  // namespace
}  // namespace flurry

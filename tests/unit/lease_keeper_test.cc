// LeaseKeeper on a real SQLite registry, with renewal faults injected by a wrapper: it renews,
// suspends the generator before the lease could lapse, resumes it after a successful renewal,
// and stays suspended for good when another owner took the node ID. The keeper measures time on
// the real steady clock (short TTLs); the registry's lease times run on a fake clock.
#include "flurry/lease_keeper.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "fake_clock.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "test_store.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::TempDir;
using SteadyTime = std::chrono::steady_clock;

// The flurry preset's canonical text: the layout these tests' registries belong to.
constexpr std::string_view kFlurryLayout =
    "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";

// Delegates to a real registry; renewals can be made to fail or to hang. Thread-safe.
class FaultyRegistry final : public NodeRegistry {
 public:
  explicit FaultyRegistry(NodeRegistry& inner) : inner_(inner) {}

  Result<Claim> claim(std::string_view owner, std::uint64_t node_count) override {
    return inner_.claim(owner, node_count);
  }
  Status renew(const Lease& lease) override {
    renew_calls.fetch_add(1);
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return !hang_; });
    }
    if (fail_renew.load()) {
      return Status(StatusCode::kUnavailable, Reason::kIo,
                    "injected failure: registry unreachable");
    }
    return inner_.renew(lease);
  }
  Status save_horizon(const Lease& lease, const HorizonRecord& record) override {
    return inner_.save_horizon(lease, record);
  }
  Status release(const Lease& lease) override { return inner_.release(lease); }
  std::string describe() const override { return inner_.describe(); }

  void hang(bool on) {
    {
      std::lock_guard lock(mu_);
      hang_ = on;
    }
    cv_.notify_all();
  }

  std::atomic<bool> fail_renew{false};
  std::atomic<int> renew_calls{0};

 private:
  NodeRegistry& inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool hang_ = false;
};

// Polls `pred` until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 1500ms) {
  const auto deadline = SteadyTime::now() + timeout;
  while (SteadyTime::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

class LeaseKeeperTest : public ::testing::Test {
 protected:
  LeaseKeeperTest()
      : registry_clock_(parse_time("2026-01-01T00:00:00Z").value()),
        gen_clock_(parse_time("2026-01-01T00:00:00Z").value()) {}

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

  TempDir dir_;
  FakeClock registry_clock_;
  FakeClock gen_clock_;
  std::unique_ptr<NodeRegistry> sqlite_;
  std::unique_ptr<FaultyRegistry> faulty_;
  Claim claim_;
  std::unique_ptr<LeasedHorizonStore> store_;
  std::unique_ptr<Generator> gen_;
};

TEST_F(LeaseKeeperTest, RenewsWhileTheRegistryAnswers) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_);
  EXPECT_EQ(keeper.lease().node, claim_.lease.node);
  keeper.start();
  EXPECT_TRUE(eventually([&] { return keeper.stats().renewals >= 3; }));
  const LeaseKeeperStats stats = keeper.stats();
  EXPECT_EQ(stats.renewal_failures, 0u);
  EXPECT_FALSE(stats.lost);
  EXPECT_GT(stats.remaining, 0ms);
  EXPECT_LE(stats.remaining, 300ms);
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(issues());
  keeper.stop();
  keeper.stop();  // idempotent
}

TEST_F(LeaseKeeperTest, SuspendsWhenRenewalsFailPastTheMarginAndResumesAfterwards) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_);
  keeper.start();
  ASSERT_TRUE(eventually([&] { return keeper.stats().renewals >= 1; }));
  faulty_->fail_renew = true;
  ASSERT_TRUE(eventually([&] { return !issues(); }));

  const Result<std::uint64_t> refused = gen_->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().to_string();
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseLost) << refused.status().to_string();
  EXPECT_TRUE(refused.status().retryable());
  const Status status = keeper.status();
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.reason(), Reason::kLeaseLost);
  EXPECT_NE(status.message().find("lease on node 0 not renewed for"), std::string::npos)
      << status.message();
  EXPECT_FALSE(gen_->health().ok());
  EXPECT_GE(keeper.stats().renewal_failures, 1u);
  EXPECT_FALSE(keeper.stats().lost);

  faulty_->fail_renew = false;
  ASSERT_TRUE(eventually([&] { return issues(); }));
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  EXPECT_TRUE(gen_->health().ok()) << gen_->health().to_string();
}

TEST_F(LeaseKeeperTest, ShortOutageDoesNotSuspend) {
  ASSERT_NO_FATAL_FAILURE(set_up(3s));
  LeaseKeeperOptions options;
  options.renew_interval = 100ms;
  options.safety_margin = 1s;  // suspends 2 s after the last successful renewal
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_, options);
  keeper.start();
  ASSERT_TRUE(eventually([&] { return keeper.stats().renewals >= 1; }));
  faulty_->fail_renew = true;
  const auto until = SteadyTime::now() + 300ms;
  while (SteadyTime::now() < until) {
    ASSERT_TRUE(issues());
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(keeper.stats().renewal_failures, 1u);
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
  faulty_->fail_renew = false;
  const std::uint64_t before = keeper.stats().renewals;
  EXPECT_TRUE(eventually([&] { return keeper.stats().renewals > before; }));
  EXPECT_TRUE(issues());
}

TEST_F(LeaseKeeperTest, NodeClaimedByAnotherOwnerStaysSuspended) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_);
  keeper.start();
  ASSERT_TRUE(eventually([&] { return keeper.stats().renewals >= 1; }));

  // The registry's clock jumps past the TTL and another process takes the node ID.
  registry_clock_.advance(1s);
  auto other = open_sqlite_registry(db_path(), 300ms, registry_clock_, kFlurryLayout);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  const Result<Claim> taken = (*other)->claim("other:2", 1024);
  ASSERT_TRUE(taken.ok()) << taken.status().to_string();
  ASSERT_EQ(taken->lease.node, claim_.lease.node);

  ASSERT_TRUE(eventually([&] { return keeper.stats().lost; }));
  const Result<std::uint64_t> refused = gen_->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition)
      << refused.status().to_string();
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseLost);
  EXPECT_NE(refused.status().message().find("claimed by another owner"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(keeper.status().reason(), Reason::kLeaseLost);
  EXPECT_EQ(keeper.stats().remaining, 0ms);

  // It stops renewing, and nothing brings the generator back.
  const int calls = faulty_->renew_calls.load();
  std::this_thread::sleep_for(350ms);
  EXPECT_EQ(faulty_->renew_calls.load(), calls);
  EXPECT_FALSE(issues());
  EXPECT_TRUE((*other)->renew(taken->lease).ok());
}

TEST_F(LeaseKeeperTest, RegistryThatHangsStillLeadsToSuspension) {
  ASSERT_NO_FATAL_FAILURE(set_up());
  LeaseKeeper keeper(*faulty_, claim_.lease, *gen_);
  keeper.start();
  ASSERT_TRUE(eventually([&] { return keeper.stats().renewals >= 1; }));
  faulty_->hang(true);
  ASSERT_TRUE(eventually([&] { return !issues(); }));
  const Status status = keeper.status();
  EXPECT_EQ(status.reason(), Reason::kLeaseLost) << status.to_string();
  EXPECT_NE(status.message().find("has not answered a renewal"), std::string::npos)
      << status.message();

  faulty_->hang(false);
  EXPECT_TRUE(eventually([&] { return issues(); }));
  EXPECT_TRUE(keeper.status().ok()) << keeper.status().to_string();
}

TEST_F(LeaseKeeperTest, StopIsPromptAndDoesNotRelease) {
  ASSERT_NO_FATAL_FAILURE(set_up(30s));  // renewals every 10 s
  {
    LeaseKeeper keeper(*faulty_, claim_.lease, *gen_);
    keeper.start();
    std::this_thread::sleep_for(20ms);
    const auto t0 = SteadyTime::now();
    keeper.stop();
    EXPECT_LT(SteadyTime::now() - t0, 500ms);
  }
  EXPECT_TRUE(sqlite_->renew(claim_.lease).ok());  // still ours
  LeaseKeeper never_started(*faulty_, claim_.lease, *gen_);
}

TEST_F(LeaseKeeperTest, LeaseWithoutExpiryNeverSuspends) {
  auto registry = open_static_registry((dir_.path() / "state").string(), 5, kFlurryLayout);
  ASSERT_TRUE(registry.ok());
  Result<Claim> c = (*registry)->claim("a", 1024);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  LeasedHorizonStore store(**registry, *c);
  GeneratorOptions o;
  o.node = 5;
  o.background_horizon = false;
  auto gen = Generator::create(Layout::parse("flurry").value(), o, gen_clock_, store);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  LeaseKeeper keeper(**registry, c->lease, **gen);
  keeper.start();
  std::this_thread::sleep_for(150ms);
  EXPECT_TRUE(keeper.status().ok());
  EXPECT_TRUE((*gen)->next().ok());
  keeper.stop();
}

}  // namespace
}  // namespace flurry

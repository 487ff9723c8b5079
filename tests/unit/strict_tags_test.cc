// Strict segment tags through the operations layer (ops::Operations::segment_ids, segment_range,
// create_segment_tag) with real timestamp oracles: two "servers" (an Operations, a SegmentService
// and a TimestampOracle each) share one SQLite segment store and one SQLite oracle registry, as
// two processes would. Only the leader answers; a follower refuses naming it; after a failover the
// new leader answers above everything the old one answered, and the old one answers nothing; when
// the old leader leads again it never answers from the buffers of its earlier term. The oracles'
// lease keepers run on a fake monotonic clock, the registry and the generators on a fake wall
// clock; real time only bounds the waits for a campaign thread to act.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "faulty_registry.h"
#include "flurry/horizon_floor.h"
#include "flurry/layout.h"
#include "flurry/open_registry.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/timefmt.h"
#include "flurry/timestamp_oracle.h"
#include "host_guard_scope.h"
#include "ops/authorizer.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "ops/values.h"
#include "service/service.h"
#include "test_store.h"

namespace flurry::ops {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;
using testing::FakeMonotonicClock;
using testing::FaultyRegistry;
using testing::TempDir;
using Op = FaultyRegistry::Op;

constexpr std::chrono::milliseconds kTtl = 1500ms;

// Waits (real time, at most 20 s) until `done` holds, moving both fake clocks by `step` each
// round (zero: not at all), so that lease keepers and campaigns act.
bool eventually(const std::function<bool()>& done, FakeClock* wall = nullptr,
                FakeMonotonicClock* mono = nullptr, std::chrono::milliseconds step = 0ms) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    if (wall != nullptr) wall->advance(step);
    if (mono != nullptr) mono->advance(step);
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

const TsoLeaderAddress kA{"127.0.0.1:1001", "127.0.0.1:2001", "host-a:1"};
const TsoLeaderAddress kB{"127.0.0.1:1002", "127.0.0.1:2002", "host-b:2"};

// One server's oracle and segment service (the store file and registry file are shared).
struct Server {
  Server(const TempDir& dir, std::string_view name, FakeClock& wall, FakeMonotonicClock& mono)
      : layout(Layout::parse("tso").value()),
        floor(dir.path() / ("floor-" + std::string(name)), "sqlite:test;scope=tso",
              layout.to_string()) {
    Result<std::unique_ptr<NodeRegistry>> opened = open_sqlite_registry(
        (dir.path() / "tso-registry.db").string(), kTtl, wall, layout.to_string());
    EXPECT_TRUE(opened.ok()) << opened.status().to_string();
    inner = std::move(opened).value();
    registry = std::make_unique<FaultyRegistry>(*inner);
    TsoOptions options;
    options.generator.max_lead = 1000ms;
    options.generator.horizon_window = 4000ms;
    options.generator.rollback = RollbackPolicy::kFail;
    options.poll_interval = 100ms;
    Result<std::unique_ptr<TimestampOracle>> made =
        TimestampOracle::create(*registry, floor, layout, options, Clocks{wall, mono});
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    oracle = std::move(made).value();

    SegmentStoreSpec spec;
    spec.sqlite_path = dir.path() / "segments.db";
    Result<std::unique_ptr<SegmentStore>> store = open_segment_store(spec);
    EXPECT_TRUE(store.ok()) << store.status().to_string();
    std::vector<std::unique_ptr<SegmentStore>> stores;
    stores.push_back(std::move(store).value());
    SegmentOptions segment_options;
    segment_options.max_batch = 1000;
    segment_options.max_wait = 100ms;
    Result<std::unique_ptr<SegmentService>> svc =
        SegmentService::create(std::move(stores), segment_options);
    EXPECT_TRUE(svc.ok()) << svc.status().to_string();
    segments = std::move(svc).value();
  }
  ~Server() {
    registry->hang(Op::kRenew, false);
    if (oracle) oracle->stop();
  }
  Layout layout;
  HorizonFloor floor;
  std::unique_ptr<NodeRegistry> inner;
  std::unique_ptr<FaultyRegistry> registry;
  std::unique_ptr<TimestampOracle> oracle;
  std::unique_ptr<SegmentService> segments;
};

class StrictTagsTest : public ::testing::Test {
 protected:
  StrictTagsTest() : wall_(parse_time("2026-06-01T00:00:00Z").value()) {}

  void SetUp() override {
    testing::use_own_host_guard_scope();
    service::ServiceOptions options;
    options.registry.data_dir = dir_.path() / "data";
    options.registry.host_dir = dir_.path();
    Result<std::unique_ptr<service::Service>> service = service::Service::create(options);
    ASSERT_TRUE(service.ok()) << service.status().to_string();
    service_ = std::move(service).value();
    ASSERT_TRUE(service_->start().ok());
  }
  void TearDown() override {
    ops_.clear();
    pools_.stop();
    servers_.clear();
    if (service_) service_->stop();
  }

  // A server; its Operations with the oracle unless `with_oracle` is false.
  Operations& serve(std::string_view name, bool with_oracle = true) {
    servers_.push_back(std::make_unique<Server>(dir_, name, wall_, mono_));
    ops_.push_back(std::make_unique<Operations>(*service_, servers_.back()->segments.get(), nullptr,
                                                authorizer_, pools_,
                                                Clocks{SystemClock::coarse(), mono_}));
    if (with_oracle) ops_.back()->set_tso(servers_.back()->oracle.get());
    return *ops_.back();
  }
  Server& server(std::size_t i) { return *servers_.at(i); }

  static SegmentTagSpec strict_spec(std::string tag, std::uint64_t step = 10) {
    SegmentTagSpec spec;
    spec.tag = std::move(tag);
    spec.step = step;
    spec.strict = true;
    return spec;
  }
  static SegmentTag tag(std::string_view name) { return SegmentTag::of(name, "test").value(); }
  static IdCount count(std::uint64_t n) { return IdCount::of(n, 1000).value(); }

  // `n` IDs of the strict tag from `ops`, or the refusal.
  static Result<std::vector<std::uint64_t>> take(Operations& ops, std::uint64_t n) {
    std::vector<std::uint64_t> out(n);
    Deferral d;
    if (Status st = ops.segment_ids(tag("strict"), count(n), out, Blocking::kAllowed, d);
        !st.ok()) {
      return st;
    }
    return out;
  }

  TempDir dir_;
  FakeClock wall_;
  FakeMonotonicClock mono_;
  Authorizer authorizer_{{}, kDefaultOpenScopes, mono_};
  Pools pools_;
  std::unique_ptr<service::Service> service_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::vector<std::unique_ptr<Operations>> ops_;
};

TEST_F(StrictTagsTest, WithoutTheOracleAStrictTagIsRefusedWhenCreatedAndWhenServed) {
  Operations& ops = serve("a", /*with_oracle=*/false);
  Deferral d;
  const Result<SegmentTagInfo> created =
      ops.create_segment_tag(strict_spec("strict"), Blocking::kAllowed, d);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(created.status().message().find("--tso"), std::string::npos)
      << created.status().message();
  // Created on the store directly (the CLI): served by no server without the oracle.
  ASSERT_TRUE(server(0).segments->create_tag(strict_spec("strict")).ok());
  const Result<std::vector<std::uint64_t>> ids = take(ops, 3);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), StatusCode::kFailedPrecondition) << ids.status().to_string();
  EXPECT_NE(ids.status().message().find("--tso"), std::string::npos) << ids.status().message();
  EXPECT_EQ(ops.segment_range(tag("strict"), count(3), Blocking::kAllowed, d).status().code(),
            StatusCode::kFailedPrecondition);
  // Tags that are not strict are served as ever.
  SegmentTagSpec plain = strict_spec("plain");
  plain.strict = false;
  ASSERT_TRUE(ops.create_segment_tag(plain, Blocking::kAllowed, d).ok());
  std::vector<std::uint64_t> out(2);
  EXPECT_TRUE(ops.segment_ids(tag("plain"), count(2), out, Blocking::kAllowed, d).ok());
}

TEST_F(StrictTagsTest, OnlyTheLeaderAnswersAndEachTermAnswersAboveTheOneBefore) {
  Operations& a = serve("a");
  Operations& b = serve("b");
  ASSERT_TRUE(server(0).oracle->start(kA).ok());
  ASSERT_TRUE(eventually([&] { return server(0).oracle->term() != 0; }));
  ASSERT_TRUE(server(1).oracle->start(kB).ok());
  ASSERT_TRUE(eventually([&] { return server(1).oracle->leader().has_value(); }));
  Deferral d;
  const Result<SegmentTagInfo> created =
      a.create_segment_tag(strict_spec("strict"), Blocking::kAllowed, d);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  EXPECT_TRUE(created->strict);

  // The leader answers, increasing, and prefetches its next range.
  std::uint64_t a_max = 0;
  for (int i = 0; i < 4; ++i) {
    Result<std::vector<std::uint64_t>> got = take(a, 3);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_GT(got->front(), a_max);
    a_max = got->back();
  }
  Result<SegmentRange> range = a.segment_range(tag("strict"), count(2), Blocking::kAllowed, d);
  ASSERT_TRUE(range.ok()) << range.status().to_string();
  EXPECT_GT(range->start, a_max);
  a_max = range->end - 1;
  // The follower refuses, naming the leader; nothing is taken from the store for it.
  Result<std::vector<std::uint64_t>> refused = take(b, 3);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kNotLeader) << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("127.0.0.1:1001"), std::string::npos)
      << refused.status().message();
  ASSERT_TRUE(b.tso_leader().has_value());
  EXPECT_EQ(*b.tso_leader(), kA);
  EXPECT_EQ(b.segment_range(tag("strict"), count(2), Blocking::kAllowed, d).status().reason(),
            Reason::kNotLeader);

  // A's renewals stop reaching the registry: once its lease is no longer proven it answers
  // nothing (its buffers still hold numbers), and B takes over after the lease ran out.
  const std::uint64_t term_a = server(0).oracle->term();
  server(0).registry->hang(Op::kRenew, true);
  server(0).registry->fail(Op::kSaveHorizon, FaultyRegistry::unreachable());
  mono_.advance(kTtl);
  Result<std::vector<std::uint64_t>> stale = take(a, 1);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kUnavailable) << stale.status().to_string();
  // The gate's word: the lease is not proven now (LEASE_EXPIRING), or another leads.
  EXPECT_TRUE(stale.status().reason() == Reason::kLeaseExpiring ||
              stale.status().reason() == Reason::kNotLeader ||
              stale.status().reason() == Reason::kNoLeader)
      << stale.status().to_string();
  ASSERT_TRUE(eventually([&] { return server(1).oracle->term() != 0; }, &wall_, &mono_, 100ms));
  const std::uint64_t term_b = server(1).oracle->term();
  EXPECT_GT(term_b, term_a);
  std::uint64_t b_max = a_max;
  for (int i = 0; i < 4; ++i) {
    Result<std::vector<std::uint64_t>> got = take(b, 7);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_GT(got->front(), b_max);
    b_max = got->back();
  }
  EXPECT_FALSE(take(a, 1).ok());

  // B steps down (its lease released); A, reachable again, leads in a third term and answers
  // above B, never from the buffers it filled in its first term.
  server(0).registry->hang(Op::kRenew, false);
  server(0).registry->fail(Op::kSaveHorizon, OkStatus());
  server(1).oracle->stop();
  ASSERT_TRUE(eventually([&] { return server(0).oracle->term() > term_b; }, &wall_, &mono_, 100ms));
  Result<std::vector<std::uint64_t>> again = take(a, 5);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_GT(again->front(), b_max) << "the leader answered from a range of its earlier term";
  EXPECT_TRUE(std::is_sorted(again->begin(), again->end()));
  EXPECT_GT(server(0).segments->inspect("strict")->stale_term_ids, 0u);
}

}  // namespace
}  // namespace flurry::ops

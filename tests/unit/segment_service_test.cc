// SegmentService over real SQLite stores (in temporary directories), on a fake monotonic clock:
// double buffering, batches across ranges, Leaf's adaptive step, outages, several stores with
// residues, ranges for clients, restarts.
#include "flurry/segment_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "faulty_segment_store.h"
#include "flurry/segment_store.h"
#include "segment_testing.h"
#include "segment_values.h"
#include "test_store.h"

namespace flurry {

using flurry::testing::count_of;
using flurry::testing::seg_tag;
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using testing::eventually;
using testing::FakeClock;
using testing::FakeMonotonicClock;
using testing::FaultySegmentStore;
using testing::sqlite_store;
using testing::TempDir;

class SegmentServiceTest : public ::testing::Test {
 protected:
  // A service over one store (wrapped for fault injection) with tag "orders" created as given.
  std::unique_ptr<SegmentService> make(SegmentTagSpec spec, SegmentOptions options = {},
                                       std::string file = "segments.db") {
    auto faulty = std::make_unique<FaultySegmentStore>(sqlite_store(dir_.path() / file));
    store_ = faulty.get();
    if (!spec.tag.empty()) {
      EXPECT_TRUE(store_->create_tag(spec).ok());
    }
    std::vector<std::unique_ptr<SegmentStore>> stores;
    stores.push_back(std::move(faulty));
    Result<std::unique_ptr<SegmentService>> svc =
        SegmentService::create(std::move(stores), options, Clocks{wall_, mono_});
    EXPECT_TRUE(svc.ok()) << svc.status().to_string();
    return svc.ok() ? std::move(*svc) : nullptr;
  }

  static SegmentTagSpec spec(std::uint64_t start, std::uint64_t step) {
    SegmentTagSpec s;
    s.tag = "orders";
    s.start = start;
    s.step = step;
    return s;
  }

  static std::vector<std::uint64_t> take(SegmentService& svc, std::size_t n,
                                         std::string_view tag = "orders") {
    std::vector<std::uint64_t> ids(n);
    const Status st = svc.next(seg_tag(tag), count_of(ids.size()), ids);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return ids;
  }

  TempDir dir_;
  FakeClock wall_{TimePoint(std::chrono::seconds(1'800'000'000))};
  FakeMonotonicClock mono_;
  FaultySegmentStore* store_ = nullptr;
};

TEST_F(SegmentServiceTest, SingleIdsCountUpThroughRanges) {
  auto svc = make(spec(1, 10));
  std::vector<std::uint64_t> all;
  for (int i = 0; i < 35; ++i) all.push_back(take(*svc, 1).at(0));
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i + 1);
  Result<SegmentTagState> st = svc->inspect("orders");
  ASSERT_TRUE(st.ok());
  EXPECT_GE(st->ranges_fetched, 3u);  // steps 10, 20, 40 (doubling: they go fast)
  EXPECT_EQ(st->ids_issued, 35u);
}

TEST_F(SegmentServiceTest, BatchSpansTheEndOfOneRangeAndTheStartOfTheNext) {
  auto svc = make(spec(100, 10));
  EXPECT_EQ(take(*svc, 7), (std::vector<std::uint64_t>{100, 101, 102, 103, 104, 105, 106}));
  // 3 left in [100,110), then the next range [110,120) or beyond (adaptive step), in order.
  const std::vector<std::uint64_t> ids = take(*svc, 8);
  EXPECT_EQ(ids[0], 107u);
  EXPECT_EQ(ids[2], 109u);
  EXPECT_EQ(ids[3], 110u);
  EXPECT_EQ(ids[7], 114u);
}

TEST_F(SegmentServiceTest, NextRangeIsFetchedOnceTheShareIsUsedAndSwitchIsInstant) {
  SegmentOptions o;
  o.prefetch_at = 0.2;
  auto svc = make(spec(1, 100), o);
  (void)take(*svc, 19);  // indexes 0..18: below 20% of 100
  EXPECT_EQ(store_->allocations(), 1u);
  EXPECT_FALSE(svc->inspect("orders")->next.has_value());
  (void)take(*svc, 1);  // index 19
  (void)take(*svc, 1);  // index 20: its claim starts the prefetch
  ASSERT_TRUE(eventually([&] { return svc->inspect("orders")->next.has_value(); }));
  EXPECT_EQ(store_->allocations(), 2u);
  // The store goes down: the rest of the current range and the whole next one still serve.
  store_->fail = true;
  const SegmentTagState before = *svc->inspect("orders");
  EXPECT_EQ(before.remaining, 79u + before.next->size);
  std::vector<std::uint64_t> ids(before.remaining);
  ASSERT_TRUE(svc->next(seg_tag("orders"), count_of(ids.size()), ids, Blocking::kNever).ok());
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(ids.front(), 22u);
}

TEST_F(SegmentServiceTest, StepDoublesWhileRangesLastLessThanTheTargetUpToTheCap) {
  SegmentOptions o;
  o.max_step = 80;
  auto svc = make(spec(1, 10), o);
  // No time passes: every range lasts less than the target.
  for (int i = 0; i < 400; ++i) (void)take(*svc, 1);
  ASSERT_TRUE(eventually([&] { return !svc->inspect("orders")->fetching; }));
  const std::vector<std::uint64_t> steps = store_->steps();
  ASSERT_GE(steps.size(), 6u);
  EXPECT_EQ(std::vector<std::uint64_t>(steps.begin(), steps.begin() + 5),
            (std::vector<std::uint64_t>{10, 20, 40, 80, 80}));
  EXPECT_TRUE(std::all_of(steps.begin() + 3, steps.end(), [](auto s) { return s == 80; }));
}

TEST_F(SegmentServiceTest, StepHalvesWhenRangesLastOverTwiceTheTargetNeverBelowTheBase) {
  SegmentOptions o;
  o.max_step = 80;
  o.prefetch_at = 0.5;
  auto svc = make(spec(1, 10), o);
  std::uint64_t taken = 0;
  // Grow to the cap quickly.
  while (store_->steps().size() < 5) {
    (void)take(*svc, 1);
    ++taken;
    ASSERT_LT(taken, 10000u);
  }
  ASSERT_TRUE(eventually([&] { return !svc->inspect("orders")->fetching; }));
  // Now each range lasts 31 minutes (> 2 x 15): the step halves each time, down to the base 10.
  for (int round = 0; round < 5; ++round) {
    mono_.advance(minutes(31));
    const std::size_t fetched = store_->allocations();
    // Take until the next prefetch has happened.
    while (store_->allocations() == fetched) {
      (void)take(*svc, 1);
      ASSERT_TRUE(eventually([&] { return !svc->inspect("orders")->fetching; }));
    }
  }
  const std::vector<std::uint64_t> steps = store_->steps();
  const std::vector<std::uint64_t> tail(steps.end() - 5, steps.end());
  EXPECT_EQ(tail, (std::vector<std::uint64_t>{40, 20, 10, 10, 10}));
}

TEST_F(SegmentServiceTest, StepStaysWhenRangesLastBetweenOnceAndTwiceTheTarget) {
  SegmentOptions o;
  o.prefetch_at = 0.5;
  auto svc = make(spec(1, 10), o);
  (void)take(*svc, 1);  // the first range, fetched now
  for (int round = 0; round < 4; ++round) {
    mono_.advance(minutes(20));
    const std::size_t fetched = store_->allocations();
    while (store_->allocations() == fetched) {
      (void)take(*svc, 1);
      ASSERT_TRUE(eventually([&] { return !svc->inspect("orders")->fetching; }));
    }
  }
  for (std::uint64_t s : store_->steps()) EXPECT_EQ(s, 10u);
}

TEST_F(SegmentServiceTest, UnknownTagIsNotFound) {
  auto svc = make(spec(1, 10));
  std::vector<std::uint64_t> one(1, 77);
  Status st = svc->next(seg_tag("invoices"), count_of(one.size()), one);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.to_string();
  EXPECT_EQ(one[0], 77u);  // nothing written
  // Bad names and counts cannot reach the service: the typed values refuse them where they are
  // made (SegmentTagTest, IdCountTest).
  EXPECT_EQ(svc->inspect("invoices").status().code(), StatusCode::kNotFound);
}

TEST_F(SegmentServiceTest, EventLoopCallersNeverWait) {
  auto svc = make(spec(1, 10));
  std::vector<std::uint64_t> one(1);
  // The first lookup needs the store: WOULD_BLOCK, then the same call allowed to block works.
  EXPECT_EQ(svc->next(seg_tag("orders"), count_of(one.size()), one, Blocking::kNever).reason(),
            Reason::kWouldBlock);
  ASSERT_TRUE(svc->next(seg_tag("orders"), count_of(one.size()), one, Blocking::kAllowed).ok());
  EXPECT_EQ(one[0], 1u);
}

TEST_F(SegmentServiceTest, OutageServesTheBuffersThenFailsThenRecoversWithoutDuplicates) {
  SegmentOptions o;
  o.max_wait = milliseconds(500);
  auto svc = make(spec(1, 50), o);
  std::vector<std::uint64_t> before = take(*svc, 10);
  ASSERT_TRUE(eventually([&] { return svc->inspect("orders")->next.has_value(); }));
  store_->fail = true;
  const std::uint64_t left = svc->inspect("orders")->remaining;
  std::vector<std::uint64_t> rest(left);
  ASSERT_TRUE(svc->next(seg_tag("orders"), count_of(rest.size()), rest)
                  .ok());  // the buffers carry the outage
  before.insert(before.end(), rest.begin(), rest.end());

  // Both buffers empty: the caller waits max_wait on the (fake) clock, then UNAVAILABLE.
  auto waiting = std::async(std::launch::async, [&] {
    std::vector<std::uint64_t> one(1);
    return svc->next(seg_tag("orders"), count_of(one.size()), one);
  });
  ASSERT_TRUE(mono_.await_waiters(2));  // the caller and the fetcher's backoff
  mono_.advance(milliseconds(501));
  const Status failed = waiting.get();
  EXPECT_EQ(failed.code(), StatusCode::kUnavailable) << failed.to_string();
  EXPECT_NE(failed.message().find("injected: the store is down"), std::string::npos);
  EXPECT_GE(svc->inspect("orders")->store_errors, 1u);

  // The store comes back: after the retry's backoff the tag serves again, above everything. The
  // clock moves in steps until then: the fetcher may be between two backoff waits when it moves
  // (under ASan beside a build, one advance of 3 s came before its next wait began).
  store_->fail = false;
  ASSERT_TRUE(eventually([&] {
    mono_.advance(milliseconds(200));
    return svc->inspect("orders")->next.has_value();
  }));
  const std::vector<std::uint64_t> after = take(*svc, 5);
  EXPECT_GT(after.front(), *std::max_element(before.begin(), before.end()));
  std::set<std::uint64_t> unique(before.begin(), before.end());
  unique.insert(after.begin(), after.end());
  EXPECT_EQ(unique.size(), before.size() + after.size());
}

// Failed range fetches reach on_fetch_failed at most once per tag per regression_log_interval:
// the first failure at once, then the next one after the interval with the failures between.
TEST_F(SegmentServiceTest, FetchFailuresAreReportedRateLimited) {
  struct Report {
    std::string tag;
    std::string store;
    Status status;
    std::uint64_t failures;
  };
  std::mutex mu;
  std::vector<Report> reports;
  SegmentOptions o;
  o.on_fetch_failed = [&](std::string_view tag, std::string_view store, const Status& st,
                          std::uint64_t failures) {
    std::lock_guard lock(mu);
    reports.push_back({std::string(tag), std::string(store), st, failures});
  };
  const auto count = [&] {
    std::lock_guard lock(mu);
    return reports.size();
  };
  auto svc = make(spec(1, 50), o);
  take(*svc, 10);
  ASSERT_TRUE(eventually([&] { return svc->inspect("orders")->next.has_value(); }));
  store_->fail = true;
  std::vector<std::uint64_t> rest(svc->inspect("orders")->remaining);
  ASSERT_TRUE(svc->next(seg_tag("orders"), count_of(rest.size()), rest)
                  .ok());  // both buffers used up: the next fetch fails
  std::vector<std::uint64_t> one(1);
  EXPECT_EQ(svc->next(seg_tag("orders"), count_of(one.size()), one, Blocking::kNever).reason(),
            Reason::kWouldBlock);
  ASSERT_TRUE(eventually([&] { return count() == 1; }));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(reports[0].tag, "orders");
    EXPECT_EQ(reports[0].store, svc->store_names()[0]);
    EXPECT_EQ(reports[0].failures, 1u);
    EXPECT_NE(reports[0].status.message().find("injected: the store is down"), std::string::npos);
  }
  // Retries with a backoff (50 ms doubling to 2 s) keep failing: reported again only after 10 s.
  const std::uint64_t errors_before = svc->inspect("orders")->store_errors;
  for (int i = 0; i < 45; ++i) {  // 9 s
    mono_.advance(milliseconds(200));
    ASSERT_TRUE(mono_.await_waiters(1));
  }
  EXPECT_EQ(count(), 1u);
  EXPECT_GT(svc->inspect("orders")->store_errors, errors_before + 3);
  ASSERT_TRUE(eventually([&] {
    mono_.advance(milliseconds(200));
    return count() == 2;
  }));
  std::lock_guard lock(mu);
  EXPECT_GT(reports[1].failures, 3u);
}

TEST_F(SegmentServiceTest, RestartContinuesAboveEverythingIssuedBefore) {
  std::uint64_t highest = 0;
  {
    auto svc = make(spec(1, 100));
    for (int i = 0; i < 150; ++i) highest = std::max(highest, take(*svc, 1).at(0));
  }
  auto again = make(SegmentTagSpec{});  // the same file; the tag exists
  EXPECT_GT(take(*again, 1).at(0), highest);
}

TEST_F(SegmentServiceTest, ResiduesOfOneStoreAreHonoured) {
  SegmentTagSpec s = spec(10, 30);
  s.delta = 3;
  s.remainder = 2;
  auto svc = make(s);
  const std::vector<std::uint64_t> ids = take(*svc, 40);
  EXPECT_EQ(ids.front(), 11u);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(ids[i] % 3, 2u);
    if (i > 0) {
      EXPECT_GT(ids[i], ids[i - 1]);
    }
  }
}

TEST_F(SegmentServiceTest, TwoStoresServeDisjointResiduesAndEitherCanCarryTheTag) {
  auto a = std::make_unique<FaultySegmentStore>(sqlite_store(dir_.path() / "a.db"));
  auto b = std::make_unique<FaultySegmentStore>(sqlite_store(dir_.path() / "b.db"));
  FaultySegmentStore* first = a.get();
  std::vector<std::unique_ptr<SegmentStore>> stores;
  stores.push_back(std::move(a));
  stores.push_back(std::move(b));
  auto svc = SegmentService::create(std::move(stores), {}, Clocks{wall_, mono_});
  ASSERT_TRUE(svc.ok());
  SegmentTagSpec s = spec(1, 20);
  s.delta = 2;  // refused: with two stores the service chooses the residues
  EXPECT_EQ((*svc)->create_tag(s).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*svc)->create_tag(spec(1, 20)).ok());
  EXPECT_EQ((*svc)->create_tag(spec(1, 20)).code(), StatusCode::kAlreadyExists);
  Result<std::vector<SegmentTagInfo>> tags = (*svc)->list_tags();
  ASSERT_TRUE(tags.ok());
  ASSERT_EQ(tags->size(), 1u);
  EXPECT_EQ(tags->at(0).delta, 2u);

  std::set<std::uint64_t> seen;
  std::set<std::uint64_t> residues;
  for (int i = 0; i < 30; ++i) {
    const std::uint64_t id = take(**svc, 1).at(0);
    EXPECT_TRUE(seen.insert(id).second) << id;
    residues.insert(id % 2);
  }
  EXPECT_EQ(residues, std::set<std::uint64_t>{0});  // all from store 0 while it answers
  first->fail = true;                               // store 0 down: store 1 carries the tag
  std::vector<std::uint64_t> more(200);
  ASSERT_TRUE((*svc)->next(seg_tag("orders"), count_of(more.size()), more).ok());
  for (std::uint64_t id : more) EXPECT_TRUE(seen.insert(id).second) << id;
  EXPECT_EQ(more.back() % 2, 1u);
}

TEST_F(SegmentServiceTest, RangesAreContiguousFromOneRangeAndShortTailsAreSkipped) {
  auto svc = make(spec(1, 100));
  Result<SegmentRange> r = svc->range(seg_tag("orders"), count_of(30));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->start, 1u);
  EXPECT_EQ(r->end, 31u);
  EXPECT_EQ(r->size(), 30u);
  r = svc->range(seg_tag("orders"), count_of(60));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->start, 31u);
  // 10 left in [1,101): too few for 30, so they are skipped and the next range serves.
  r = svc->range(seg_tag("orders"), count_of(30));
  ASSERT_TRUE(r.ok());
  EXPECT_GE(r->start, 101u);
  EXPECT_EQ(r->size(), 30u);
  EXPECT_EQ(svc->inspect("orders")->ids_skipped, 10u);
  const std::uint64_t id = take(*svc, 1).at(0);
  EXPECT_EQ(id, r->end);
  EXPECT_EQ(svc->range(seg_tag("orders"), count_of(100000)).status().code(),
            StatusCode::kOutOfRange);
}

TEST_F(SegmentServiceTest, ManyThreadsNeverGetTheSameId) {
  auto svc = make(spec(1, 500));
  Result<SegmentCounter*> counter = svc->counter(seg_tag("orders"));
  ASSERT_TRUE(counter.ok());
  constexpr int kThreads = 4;
  constexpr int kEach = 50000;
  std::vector<std::vector<std::uint64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::uint64_t> ids(1 + t);
      while (got[t].size() < kEach) {
        ASSERT_TRUE((*counter)->next(count_of(ids.size()), ids).ok());
        ASSERT_TRUE(std::is_sorted(ids.begin(), ids.end()));
        got[t].insert(got[t].end(), ids.begin(), ids.end());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::uint64_t> all;
  for (auto& g : got) {
    EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));
    all.insert(all.end(), g.begin(), g.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

}  // namespace
}  // namespace flurry

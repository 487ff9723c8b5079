// Strict segment tags in SegmentService (include/flurry/segment_service.h, "Strict tags"): the
// leadership term a caller holds is passed with each request, and a range fetched for an earlier
// term is never used, so that a leader that lost its term and won a later one never answers below
// what another leader answered in between. Two services over one real SQLite file play two
// servers (the oracle itself is not needed here: its term is what the caller passes). The
// monotonic clock is fake.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "fake_clock.h"
#include "faulty_segment_store.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "segment_testing.h"
#include "segment_values.h"
#include "test_store.h"

namespace flurry {

using flurry::testing::count_of;
using flurry::testing::seg_tag;
namespace {

using testing::eventually;
using testing::FakeClock;
using testing::FakeMonotonicClock;
using testing::FaultySegmentStore;
using testing::sqlite_store;
using testing::TempDir;

class SegmentStrictTest : public ::testing::Test {
 protected:
  // A service over the shared file, its store wrapped for fault injection (`faulty`, optional).
  std::unique_ptr<SegmentService> serve(FaultySegmentStore** faulty = nullptr,
                                        SegmentOptions options = {}) {
    auto store = std::make_unique<FaultySegmentStore>(sqlite_store(file()));
    if (faulty != nullptr) *faulty = store.get();
    std::vector<std::unique_ptr<SegmentStore>> stores;
    stores.push_back(std::move(store));
    Result<std::unique_ptr<SegmentService>> svc =
        SegmentService::create(std::move(stores), options, Clocks{wall_, mono_});
    EXPECT_TRUE(svc.ok()) << svc.status().to_string();
    return svc.ok() ? std::move(*svc) : nullptr;
  }

  void create(std::string tag, bool strict, std::uint64_t step = 10) {
    auto store = sqlite_store(file());
    SegmentTagSpec spec;
    spec.tag = std::move(tag);
    spec.step = step;
    spec.strict = strict;
    ASSERT_TRUE(store->create_tag(spec).ok());
  }

  static std::vector<std::uint64_t> take(SegmentService& svc, std::size_t n, std::uint64_t term,
                                         std::string_view tag = "strict") {
    std::vector<std::uint64_t> ids(n);
    const Status st = svc.next(seg_tag(tag), count_of(n), ids, Blocking::kAllowed, term);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return st.ok() ? ids : std::vector<std::uint64_t>{};
  }

  std::filesystem::path file() const { return dir_.path() / "segments.db"; }

  TempDir dir_;
  FakeClock wall_{TimePoint(std::chrono::seconds(1'800'000'000))};
  FakeMonotonicClock mono_;
};

TEST_F(SegmentStrictTest, AStrictTagIsServedOnlyWithATermAndOtherTagsIgnoreIt) {
  create("strict", true);
  create("plain", false);
  auto svc = serve();
  std::vector<std::uint64_t> ids(3);
  const Status st = svc->next(seg_tag("strict"), count_of(3), ids, Blocking::kAllowed, 0);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
  EXPECT_NE(st.message().find("strict"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--tso"), std::string::npos) << st.message();
  EXPECT_EQ(svc->range(seg_tag("strict"), count_of(3), Blocking::kAllowed, 0).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(take(*svc, 3, 7), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(svc->inspect("strict")->strict);
  EXPECT_EQ(svc->inspect("strict")->term, 7u);
  // A tag that is not strict serves with any term, or none, from one buffer.
  EXPECT_EQ(take(*svc, 2, 0, "plain"), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(take(*svc, 2, 5, "plain"), (std::vector<std::uint64_t>{3, 4}));
  EXPECT_EQ(take(*svc, 2, 9, "plain"), (std::vector<std::uint64_t>{5, 6}));
  EXPECT_FALSE(svc->inspect("plain")->strict);
}

// The property strict tags exist for: leader A (term 1) holds a current and a prefetched range;
// leader B (term 2) answers above them; A, leader again in term 3, answers above B, never from
// the ranges it fetched in term 1.
TEST_F(SegmentStrictTest, ALaterTermAnswersAboveEverythingAnotherLeaderAnsweredBetween) {
  create("strict", true);
  auto a = serve();
  auto b = serve();
  const std::vector<std::uint64_t> first = take(*a, 5, 1);
  EXPECT_EQ(first, (std::vector<std::uint64_t>{1, 2, 3, 4, 5}));
  ASSERT_TRUE(eventually([&] { return a->inspect("strict")->next.has_value(); }));
  const std::uint64_t a_holds = a->inspect("strict")->next->end;  // A's buffers reach this
  std::vector<std::uint64_t> by_b;
  for (int i = 0; i < 4; ++i) {
    const std::vector<std::uint64_t> got = take(*b, 7, 2);
    by_b.insert(by_b.end(), got.begin(), got.end());
  }
  ASSERT_EQ(by_b.size(), 28u);
  EXPECT_TRUE(std::is_sorted(by_b.begin(), by_b.end()));
  EXPECT_GE(by_b.front(), a_holds);
  const std::uint64_t b_max = by_b.back();

  const std::vector<std::uint64_t> again = take(*a, 3, 3);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_GT(again.front(), b_max) << "A answered from a range of its earlier term";
  EXPECT_TRUE(std::is_sorted(again.begin(), again.end()));
  const SegmentTagState state = *a->inspect("strict");
  EXPECT_EQ(state.term, 3u);
  // The rest of the current range (5 of 10 left) and the whole prefetched one were dropped.
  EXPECT_EQ(state.stale_term_ids, 5u + (a_holds - 11));
  EXPECT_EQ(state.ids_issued, 8u);
}

// A fetch that had its range from the store in term 1 but returned it only after another leader
// served (a caller descheduled after the store's answer): the range is of term 1 and is dropped
// by the term-3 request that finds it, which fetches again.
TEST_F(SegmentStrictTest, ARangeFetchedForAnEarlierTermIsDroppedEvenWhenItArrivesLater) {
  create("strict", true);
  FaultySegmentStore* a_store = nullptr;
  SegmentOptions options;
  options.prefetch_at = 0.5;
  auto a = serve(&a_store, options);
  auto b = serve();
  EXPECT_EQ(take(*a, 4, 1), (std::vector<std::uint64_t>{1, 2, 3, 4}));  // range [1, 11)
  std::future<std::vector<std::uint64_t>> asked;
  a_store->hold();
  // Whatever fails below: the held fetch is let go and a waiting request times out, so that the
  // test ends (declared after `asked`, so this runs before the future waits for its request).
  struct LetGo {
    FaultySegmentStore* store;
    FakeMonotonicClock& clock;
    ~LetGo() {
      store->release();
      clock.advance(std::chrono::seconds(10));
    }
  } let_go{a_store, mono_};
  EXPECT_EQ(take(*a, 2, 1), (std::vector<std::uint64_t>{5, 6}));  // index 5 starts the prefetch
  // The prefetch has its range from the store, and is held.
  ASSERT_TRUE(a_store->await_entered(2));
  const std::vector<std::uint64_t> by_b = take(*b, 30, 2);
  ASSERT_EQ(by_b.size(), 30u);
  const std::uint64_t b_max = by_b.back();
  // A leads again (term 3) while its term-1 fetch is still on its way.
  asked = std::async(std::launch::async, [&] { return take(*a, 8, 3); });
  // The request waits for a range (the fetch is held): counted under the tag's lock, which the
  // waiter gives up only once it is registered to be woken.
  const bool waiting = eventually([&] { return a->inspect("strict")->waits >= 1; });
  a_store->release();
  ASSERT_TRUE(waiting);
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const std::vector<std::uint64_t> got = asked.get();
  ASSERT_EQ(got.size(), 8u);
  EXPECT_GT(got.front(), b_max) << "A answered from the range it fetched in term 1";
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_GE(a_store->allocations(), 3u);  // the term-1 range, then one for term 3
  EXPECT_GT(a->inspect("strict")->stale_term_ids, 0u);
}

// A request of an earlier term than the tag's current range is refused with nothing issued (its
// caller's term is over), and the tag keeps serving the later term.
TEST_F(SegmentStrictTest, ARequestOfAnEarlierTermIsRefused) {
  create("strict", true);
  auto svc = serve();
  EXPECT_EQ(take(*svc, 2, 4), (std::vector<std::uint64_t>{1, 2}));
  std::vector<std::uint64_t> ids(2, 0);
  const Status st = svc->next(seg_tag("strict"), count_of(2), ids, Blocking::kAllowed, 3);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_NE(st.message().find("term 3 is over"), std::string::npos) << st.message();
  EXPECT_EQ(svc->range(seg_tag("strict"), count_of(2), Blocking::kAllowed, 3).status().code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(take(*svc, 2, 4), (std::vector<std::uint64_t>{3, 4}));
  EXPECT_EQ(svc->inspect("strict")->ids_issued, 4u);
}

// Ranges for clients follow the same rule as next().
TEST_F(SegmentStrictTest, RangesOfALaterTermStartAboveAnotherLeadersNumbers) {
  create("strict", true, 100);
  auto a = serve();
  auto b = serve();
  Result<SegmentRange> r = a->range(seg_tag("strict"), count_of(10), Blocking::kAllowed, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->start, 1u);
  const std::vector<std::uint64_t> by_b = take(*b, 5, 2);
  ASSERT_EQ(by_b.size(), 5u);
  r = a->range(seg_tag("strict"), count_of(10), Blocking::kAllowed, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->start, by_b.back());
}

// Numbers of two stores are not ordered with each other: a strict tag needs one store.
TEST_F(SegmentStrictTest, AStrictTagIsRefusedWithSeveralStores) {
  std::vector<std::unique_ptr<SegmentStore>> stores;
  stores.push_back(sqlite_store(dir_.path() / "a.db"));
  stores.push_back(sqlite_store(dir_.path() / "b.db"));
  Result<std::unique_ptr<SegmentService>> svc =
      SegmentService::create(std::move(stores), {}, Clocks{wall_, mono_});
  ASSERT_TRUE(svc.ok()) << svc.status().to_string();
  SegmentTagSpec spec;
  spec.tag = "strict";
  spec.strict = true;
  const Status st = (*svc)->create_tag(spec);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
  EXPECT_NE(st.message().find("one segment store"), std::string::npos) << st.message();
  Result<std::vector<SegmentTagInfo>> tags = (*svc)->list_tags();
  ASSERT_TRUE(tags.ok());
  EXPECT_TRUE(tags->empty());
}

}  // namespace
}  // namespace flurry

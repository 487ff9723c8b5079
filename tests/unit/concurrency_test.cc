// Several threads share one generator: every ID is unique and each thread's IDs increase.
// Threads sharing one order-number format (and its key's pool of OpenSSL contexts) agree with one
// thread.
// Labelled "concurrency": `make test` also runs these under ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "flurry/generator.h"
#include "flurry/order_number.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/timefmt.h"
#include "segment/tag_index.h"
#include "segment_values.h"
#include "test_store.h"

namespace flurry {

using flurry::testing::count_of;
using flurry::testing::seg_tag;
namespace {

using namespace std::chrono_literals;

#if defined(__SANITIZE_THREAD__)
constexpr int kScale = 2;  // ThreadSanitizer is ~10x slower: fewer IDs, same interleavings
#else
constexpr int kScale = 1;
#endif

struct Collected {
  std::vector<std::vector<std::uint64_t>> per_thread;
};

// Each thread alternates next() and next_batch(batch); returns what each thread got.
Collected run_threads(Generator& g, int threads, std::size_t per_thread, std::size_t batch) {
  Collected c;
  c.per_thread.resize(static_cast<std::size_t>(threads));
  std::atomic<bool> failed{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::uint64_t>& out = c.per_thread[static_cast<std::size_t>(t)];
      out.reserve(per_thread + batch);
      std::vector<std::uint64_t> buf(batch);
      while (out.size() < per_thread && !failed) {
        Result<std::uint64_t> one = g.next();
        if (!one.ok()) {
          failed = true;
          ADD_FAILURE() << one.status().to_string();
          return;
        }
        out.push_back(*one);
        if (Status st = g.next_batch(buf); !st.ok()) {
          failed = true;
          ADD_FAILURE() << st.to_string();
          return;
        }
        out.insert(out.end(), buf.begin(), buf.end());
      }
    });
  }
  for (auto& w : workers) w.join();
  return c;
}

void expect_unique_and_increasing(const Collected& c) {
  std::vector<std::uint64_t> all;
  for (const auto& v : c.per_thread) {
    for (std::size_t i = 1; i < v.size(); ++i) {
      ASSERT_LT(v[i - 1], v[i]) << "a thread's IDs went backwards at " << i;
    }
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "duplicate ID";
}

TEST(ConcurrencyTest, MillionsOfIdsOnTheSystemClockAreUniqueAndIncreasingPerThread) {
  testing::TempDir dir;
  FileHorizonStore store(FileHorizonStore::path_for(dir.path(), 1));
  GeneratorOptions o;
  o.node = 1;
  // A 22-bit sequence: 4 million IDs per millisecond, so the threads contend on the CAS rather
  // than wait for the clock.
  auto gen = Generator::create(Layout::parse("time:40@1ms,node:1,seq:22;epoch=2025-01-01Z").value(),
                               o, SystemClock::coarse(), store);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  const Collected c = run_threads(**gen, 4, 1'000'000 / kScale, 7);
  expect_unique_and_increasing(c);
  EXPECT_TRUE((*gen)->close().ok());
}

TEST(ConcurrencyTest, ThrottledClassicLayoutStaysUniqueAndHonest) {
  testing::TempDir dir;
  FileHorizonStore store(FileHorizonStore::path_for(dir.path(), 0));
  GeneratorOptions o;
  o.max_lead = 20ms;
  auto gen = Generator::create(Layout::parse("flurry").value(), o, SystemClock::coarse(), store);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  // 4,096 IDs per ms: 600k IDs need ~140 ms of clock, so threads throttle most of the time.
  const Collected c = run_threads(**gen, 3, 200'000 / kScale, 100);
  expect_unique_and_increasing(c);
  const Layout& layout = (*gen)->layout();
  std::uint64_t max_id = 0;
  for (const auto& v : c.per_thread) max_id = std::max(max_id, v.back());
  const TimePoint latest = layout.time_of(layout.decompose(max_id)->ticks);
  EXPECT_LE(latest - SystemClock::coarse().now(), 21ms);  // never ahead by more than max_lead
  EXPECT_TRUE((*gen)->close().ok());
}

// Threads issue on next()'s fast path (one fetch_add; a wide sequence keeps the state far from
// every limit) while close() runs. A call that starts after close() returned issues nothing;
// every ID is unique, each thread's increase, all lie at or below the tight horizon close()
// saved, and a restart on the same store starts above them.
TEST(ConcurrencyTest, CloseWhileThreadsIssueOnTheFastPath) {
  testing::TempDir dir;
  FileHorizonStore store(FileHorizonStore::path_for(dir.path(), 0));
  const Layout layout = Layout::parse("time:40@1ms,node:1,seq:22;epoch=2025-01-01Z").value();
  auto gen = Generator::create(layout, GeneratorOptions{}, SystemClock::coarse(), store);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  Generator& g = **gen;
  constexpr int kThreads = 3;
  std::atomic<std::size_t> issued{0};
  std::atomic<bool> close_returned{false};
  std::atomic<int> issued_after_close{0};
  Collected c;
  c.per_thread.resize(kThreads);
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::uint64_t>& out = c.per_thread[static_cast<std::size_t>(t)];
      for (;;) {
        const bool after_close = close_returned.load();
        Result<std::uint64_t> id = g.next();
        if (!id.ok()) {
          EXPECT_EQ(id.status().reason(), Reason::kShutDown) << id.status().to_string();
          return;
        }
        if (after_close) ++issued_after_close;
        out.push_back(*id);
        issued.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  while (issued.load(std::memory_order_relaxed) < 300'000 / kScale) std::this_thread::yield();
  ASSERT_TRUE(g.close().ok());
  close_returned = true;
  for (auto& w : workers) w.join();
  EXPECT_EQ(issued_after_close.load(), 0);
  expect_unique_and_increasing(c);
  std::uint64_t max_id = 0;
  for (const auto& v : c.per_thread) {
    if (!v.empty()) max_id = std::max(max_id, v.back());
  }
  const Result<HorizonRecord> saved = store.load();
  ASSERT_TRUE(saved.ok()) << saved.status().to_string();
  EXPECT_LE(static_cast<std::int64_t>(layout.decompose(max_id)->ticks), saved->horizons[0]);
  auto again = Generator::create(layout, GeneratorOptions{}, SystemClock::coarse(), store);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  const Result<std::uint64_t> first = (*again)->next();
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_GT(*first, max_id);
  EXPECT_TRUE((*again)->close().ok());
}

// Threads issue while another moves a fake clock back and forth across max_lead; every policy
// must keep IDs unique (the clock policy gives up per-thread order, by design, so only
// uniqueness is checked for it).
class ChaoticClockTest : public ::testing::TestWithParam<RollbackPolicy> {};

TEST_P(ChaoticClockTest, IdsStayUniqueWhileTheClockJumps) {
  testing::TempDir dir;
  FileHorizonStore store(FileHorizonStore::path_for(dir.path(), 0));
  testing::FakeClock clock(parse_time("2026-03-01Z").value());
  GeneratorOptions o;
  o.rollback = GetParam();
  o.max_lead = 5ms;
  o.max_wait = 50ms;
  o.horizon_window = 50ms;
  o.background_horizon = true;
  const char* layout = GetParam() == RollbackPolicy::kClock
                           ? "time:41@1ms,clock:4,node:10,seq:8;epoch=2025-01-01Z"
                           : "time:41@1ms,node:14,seq:8;epoch=2025-01-01Z";
  auto gen = Generator::create(Layout::parse(layout).value(), o, clock, store);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  Generator& g = **gen;

  std::atomic<bool> stop{false};
  std::atomic<std::size_t> issued{0};
  // The jumps start once the workers issued enough for the check below to mean something: the
  // clock drifts back overall (9 x 2 ms forward, 30 ms back), so under the fail policy little is
  // issued once they start, and on a loaded machine (TSan beside a build) the workers may not
  // have run at all yet.
  std::thread chaos([&] {
    for (int w = 0; w < 30000 && issued <= 1000; ++w) std::this_thread::sleep_for(1ms);
    for (int i = 0; i < 400 / kScale && !stop; ++i) {
      clock.advance(i % 10 == 9 ? -30ms : 2ms);
      std::this_thread::sleep_for(100us);
    }
    stop = true;
  });
  std::vector<std::vector<std::uint64_t>> got(3);
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < got.size(); ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::uint64_t> buf(16);
      while (!stop) {
        if (g.next_batch(buf).ok()) {
          got[t].insert(got[t].end(), buf.begin(), buf.end());
          issued += buf.size();
        }
        Result<std::uint64_t> one = g.next();
        if (one.ok()) {
          got[t].push_back(*one);
          ++issued;
        }
      }
    });
  }
  chaos.join();
  for (auto& w : workers) w.join();
  std::vector<std::uint64_t> all;
  for (const auto& v : got) {
    if (GetParam() != RollbackPolicy::kClock) {
      for (std::size_t i = 1; i < v.size(); ++i) ASSERT_LT(v[i - 1], v[i]);
    }
    all.insert(all.end(), v.begin(), v.end());
  }
  ASSERT_GT(all.size(), 1000u);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "duplicate ID";
  EXPECT_TRUE(g.close().ok());
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, ChaoticClockTest,
                         ::testing::Values(RollbackPolicy::kWait, RollbackPolicy::kFail,
                                           RollbackPolicy::kClock));

// Segment mode: several threads take single IDs, batches and client ranges of one tag whose
// ranges are tiny, so the current range switches constantly under them (the epoch cursor and
// the seqlock'd range records), while another thread reads the tag's state. Every ID is unique
// and each thread's IDs increase (one store).
TEST(SegmentConcurrencyTest, ThreadsRacingRangeSwitchesNeverShareAnId) {
  testing::TempDir dir;
  SegmentStoreSpec spec;
  spec.sqlite_path = dir.path() / "segments.db";
  auto store = open_segment_store(spec);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  SegmentTagSpec tag;
  tag.tag = "race";
  tag.step = 64;
  ASSERT_TRUE((*store)->create_tag(tag).ok());
  std::vector<std::unique_ptr<SegmentStore>> stores;
  stores.push_back(std::move(*store));
  SegmentOptions options;
  options.max_step = 256;  // stays small: many switches
  options.max_wait = std::chrono::milliseconds(10000);
  auto service = SegmentService::create(std::move(stores), options);
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  SegmentService& svc = **service;

  constexpr int kThreads = 3;
  const std::size_t per_thread = 20000 / kScale;
  std::vector<std::vector<std::uint64_t>> got(kThreads);
  std::atomic<bool> done{false};
  std::thread observer([&] {
    while (!done) {
      (void)svc.inspect_all();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::uint64_t> buf(static_cast<std::size_t>(1 + 3 * t));
      auto& out = got[static_cast<std::size_t>(t)];
      while (out.size() < per_thread) {
        if (Status st = svc.next(seg_tag("race"), count_of(buf.size()), buf); !st.ok()) {
          ADD_FAILURE() << st.to_string();
          return;
        }
        out.insert(out.end(), buf.begin(), buf.end());
        Result<SegmentRange> r = svc.range(seg_tag("race"), count_of(5));
        if (!r.ok()) {
          ADD_FAILURE() << r.status().to_string();
          return;
        }
        for (std::uint64_t id = r->start; id < r->end; id += r->delta) out.push_back(id);
      }
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  observer.join();
  std::vector<std::uint64_t> all;
  for (const auto& v : got) {
    for (std::size_t i = 1; i < v.size(); ++i) ASSERT_LT(v[i - 1], v[i]);
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "duplicate ID";
}

// The tag index read without a lock while one writer adds tags (and grows the table under the
// readers): a reader finds every tag whose insertion finished before it looked, and never finds a
// name's lookup answered with another item.
TEST(SegmentConcurrencyTest, TagIndexReadersSeeEveryFinishedInsertionWhileItGrows) {
  struct Named {
    std::string name;
    [[nodiscard]] const std::string& tag() const noexcept { return name; }
  };
  constexpr int kTags = 2000 / kScale;
  std::vector<std::unique_ptr<Named>> items;
  for (int i = 0; i < kTags; ++i) {
    items.push_back(std::make_unique<Named>(Named{std::to_string(i) + "t"}));
  }
  internal::TagIndex<Named> index;
  std::atomic<int> inserted{0};  // items [0, inserted) are in the index
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      std::uint64_t step = 0;
      while (true) {
        const int known = inserted.load(std::memory_order_acquire);
        if (known > 0) {
          const auto i = static_cast<std::size_t>((step * 7919 + static_cast<unsigned>(r)) %
                                                  static_cast<std::uint64_t>(known));
          ASSERT_EQ(index.find(items[i]->name), items[i].get()) << "tag " << i;
        }
        // A name being inserted right now: absent, or itself.
        if (known < kTags) {
          const Named* maybe = index.find(items[static_cast<std::size_t>(known)]->name);
          ASSERT_TRUE(maybe == nullptr || maybe == items[static_cast<std::size_t>(known)].get());
        }
        ASSERT_EQ(index.find("never"), nullptr);
        if (known == kTags) return;
        ++step;
      }
    });
  }
  for (int i = 0; i < kTags; ++i) {
    index.insert(items[static_cast<std::size_t>(i)].get());
    inserted.store(i + 1, std::memory_order_release);
  }
  for (auto& t : readers) t.join();
}

// Many tags served by name from several threads at once, each tag's first use adding it to the
// index while the others are read: every call finds its own tag (IDs unique per tag).
TEST(SegmentConcurrencyTest, TagsAddedWhileOthersAreServedAreFoundByName) {
  testing::TempDir dir;
  SegmentStoreSpec spec;
  spec.sqlite_path = dir.path() / "segments.db";
  auto store = open_segment_store(spec);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  constexpr int kTags = 40;
  for (int i = 0; i < kTags; ++i) {
    SegmentTagSpec tag;
    tag.tag = "tag" + std::to_string(i);
    tag.step = 1000;
    ASSERT_TRUE((*store)->create_tag(tag).ok());
  }
  std::vector<std::unique_ptr<SegmentStore>> stores;
  stores.push_back(std::move(*store));
  auto service = SegmentService::create(std::move(stores), SegmentOptions{});
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  SegmentService& svc = **service;
  constexpr int kThreads = 3;
  std::vector<std::vector<std::vector<std::uint64_t>>> got(
      kThreads, std::vector<std::vector<std::uint64_t>>(kTags));
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (int i = 0; i < kTags; ++i) {
          // Threads walk the tags in different orders, so first uses overlap with reads.
          const int tag = (t % 2 == 0) ? i : kTags - 1 - i;
          std::uint64_t id[1];
          if (Status st =
                  svc.next(seg_tag("tag" + std::to_string(tag)), count_of(std::size(id)), id);
              !st.ok()) {
            ADD_FAILURE() << st.to_string();
            return;
          }
          got[static_cast<std::size_t>(t)][static_cast<std::size_t>(tag)].push_back(id[0]);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(svc.inspect_all().size(), static_cast<std::size_t>(kTags));
  for (int i = 0; i < kTags; ++i) {
    std::vector<std::uint64_t> all;
    for (const auto& per_thread : got) {
      const auto& v = per_thread[static_cast<std::size_t>(i)];
      all.insert(all.end(), v.begin(), v.end());
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << "duplicate in tag " << i;
  }
}

// More threads than the key's pool has contexts (16): contexts are borrowed, copied when the pool
// is empty and freed when it is full, and every thread's numbers match one thread's.
TEST(OrderConcurrencyTest, ThreadsSharingAFormatAgreeWithOneThread) {
  Result<OrderKeySet> keys = OrderKeySet::parse("1 = 2b7e151628aed2a6abf7158809cf4f3c", "test");
  ASSERT_TRUE(keys.ok());
  OrderNumberOptions options;
  options.alphabet = OrderAlphabet::kBase32;
  options.check = OrderCheck::kMod37;
  Result<OrderNumberFormat> format = OrderNumberFormat::create(options, *keys);
  ASSERT_TRUE(format.ok()) << format.status().to_string();
  const OrderNumberFormat& f = *format;
  const std::size_t count = 2000 / kScale;
  constexpr std::uint64_t kFirst = 251'237'019'451'392'000;
  std::vector<std::string> want;
  for (std::size_t i = 0; i < count; ++i) want.push_back(*f.encode(kFirst + i));

  constexpr int kThreads = 20;
  std::atomic<int> mismatches{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (std::size_t k = 0; k < count; ++k) {
        const std::size_t i = (k + static_cast<std::size_t>(t) * 97) % count;
        const Result<std::string> s = f.encode(kFirst + i);
        const Result<std::uint64_t> id = s.ok() ? f.decode(*s) : Result<std::uint64_t>(s.status());
        if (!s.ok() || *s != want[i] || !id.ok() || *id != kFirst + i) ++mismatches;
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace flurry

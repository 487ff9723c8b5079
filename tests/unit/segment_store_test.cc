// The SegmentStore contract (include/flurry/segment_store.h), checked the same way for every
// backend: consecutive ranges, steps other than the base, unknown and duplicate tags, bad specs,
// residues, listing, overflow of max_id, persistence, and disjoint ranges from several store
// objects (threads) and processes on one database. Each backend is a SegmentBackend
// (tests/testing/segment_backend.h); every store is a real one (SQLite in a temp directory, a real
// PostgreSQL server), no mocks.
//
// Built twice: segment_store_test over SQLite, with the parsers of store locations and tag names
// and the PostgreSQL store's behaviour without a server (lazy connection, bounded waits), and,
// with FLURRY_SEGMENT_SERVERS, segment_store_servers_test over PostgreSQL
// (tests/testing/postgres_server.h), with PostgreSQL's own cases: a Leaf database used as it is,
// synchronous_commit, a stopped, hung or restarted server.
#include "flurry/segment_store.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <latch>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flurry/clock.h"
#include "flurry/status.h"
#include "segment/stores.h"
#include "segment_backend.h"
#include "segment_values.h"
#include "test_store.h"
#ifdef FLURRY_SEGMENT_SERVERS
#include <libpq-fe.h>
#include <signal.h>

#include "postgres_segment_backend.h"
#include "postgres_server.h"
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sqlite3.h>
#endif

namespace flurry {

using flurry::testing::count_of;
using flurry::testing::seg_tag;
namespace {

using namespace std::chrono_literals;
using testing::SegmentBackend;

constexpr std::uint64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SystemClock::coarse().now().time_since_epoch())
      .count();
}

SegmentTagSpec spec_of(std::string tag, std::uint64_t start = 1, std::uint64_t step = 100) {
  SegmentTagSpec spec;
  spec.tag = std::move(tag);
  spec.start = start;
  spec.step = step;
  return spec;
}

// Ranges [start, end), sorted, are pairwise disjoint and together exactly [first, first + total).
void expect_exact_cover(std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges,
                        std::uint64_t first, std::uint64_t total) {
  std::sort(ranges.begin(), ranges.end());
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front().first, first);
  std::uint64_t at = first;
  for (const auto& [start, end] : ranges) {
    ASSERT_EQ(start, at) << "a gap or an overlap at " << at;
    ASSERT_LT(start, end);
    at = end;
  }
  EXPECT_EQ(at, first + total);
}

template <typename Backend>
class SegmentStoreTest : public ::testing::Test {
 protected:
  SegmentBackend& backend() { return backend_; }

  // A new store object on the backend's database; nullptr (and a failure) if it cannot open.
  std::unique_ptr<SegmentStore> open(SegmentStoreOptions options = {}) {
    Result<std::unique_ptr<SegmentStore>> r = backend_.open(options);
    EXPECT_TRUE(r.ok()) << backend_.name() << ": " << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  static SegmentAllocation allocate(SegmentStore& store, std::string_view tag, std::uint64_t step) {
    Result<SegmentAllocation> a = store.allocate(seg_tag(tag), step);
    EXPECT_TRUE(a.ok()) << store.describe() << ": " << a.status().to_string();
    return a.ok() ? *a : SegmentAllocation{};
  }

  static SegmentTagInfo info(SegmentStore& store, std::string_view tag) {
    Result<SegmentTagInfo> t = store.tag(seg_tag(tag));
    EXPECT_TRUE(t.ok()) << store.describe() << ": " << t.status().to_string();
    return t.ok() ? *t : SegmentTagInfo{};
  }

  // The message names the store, never with its password.
  void expect_no_password(const Status& st) {
    const std::string password = backend_.password();
    if (!password.empty()) {
      EXPECT_EQ(st.message().find(password), std::string::npos) << st.message();
    }
  }

 private:
  Backend backend_;
};

#ifdef FLURRY_SEGMENT_SERVERS
using Backends =
    ::testing::Types<testing::PostgresSegmentBackend, testing::PostgresTlsSegmentBackend>;
#else
using Backends = ::testing::Types<testing::SqliteSegmentBackend>;
#endif

class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
#ifdef FLURRY_SEGMENT_SERVERS
    if constexpr (std::is_same_v<T, testing::PostgresSegmentBackend>) return "Postgres";
    if constexpr (std::is_same_v<T, testing::PostgresTlsSegmentBackend>) return "PostgresTls";
#else
    if constexpr (std::is_same_v<T, testing::SqliteSegmentBackend>) return "Sqlite";
#endif
    return "Unknown";
  }
};

TYPED_TEST_SUITE(SegmentStoreTest, Backends, BackendNames);

TYPED_TEST(SegmentStoreTest, CreateThenAllocateGivesConsecutiveRanges) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->create_tag(spec_of("orders", 1000, 100)).ok());
  const std::int64_t before = now_unix_ms();
  for (std::uint64_t i = 0; i < 3; ++i) {
    const SegmentAllocation a = this->allocate(*store, "orders", 100);
    EXPECT_EQ(a.start, 1000 + 100 * i);
    EXPECT_EQ(a.end, 1100 + 100 * i);
    EXPECT_EQ(a.delta, 1u);
    EXPECT_EQ(a.remainder, 0u);
    EXPECT_EQ(a.base_step, 100u);
  }
  const SegmentTagInfo t = this->info(*store, "orders");
  EXPECT_EQ(t.tag, "orders");
  EXPECT_EQ(t.max_id, 1300u);
  EXPECT_EQ(t.step, 100u);
  // The store's clock (the database server's, for PostgreSQL: the same host here).
  EXPECT_GE(t.update_time_unix_ms, before - 5000);
  EXPECT_LE(t.update_time_unix_ms, now_unix_ms() + 5000);
}

TYPED_TEST(SegmentStoreTest, AllocateTakesAStepOtherThanTheBase) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->create_tag(spec_of("adaptive", 1, 1000)).ok());
  SegmentAllocation a = this->allocate(*store, "adaptive", 4000);
  EXPECT_EQ(a.start, 1u);
  EXPECT_EQ(a.end, 4001u);
  EXPECT_EQ(a.base_step, 1000u);  // as stored: the step asked for does not change it
  a = this->allocate(*store, "adaptive", 1);
  EXPECT_EQ(a.start, 4001u);
  EXPECT_EQ(a.end, 4002u);
  a = this->allocate(*store, "adaptive", kMaxSegmentStep);
  EXPECT_EQ(a.start, 4002u);
  EXPECT_EQ(a.end, 4002u + kMaxSegmentStep);
  const SegmentTagInfo t = this->info(*store, "adaptive");
  EXPECT_EQ(t.max_id, 4002u + kMaxSegmentStep);
  EXPECT_EQ(t.step, 1000u);
}

TYPED_TEST(SegmentStoreTest, AnUnknownTagIsNotFound) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->create_tag(spec_of("known")).ok());
  const Status allocated = store->allocate(seg_tag("unknown"), 10).status();
  EXPECT_EQ(allocated.code(), StatusCode::kNotFound) << allocated.to_string();
  EXPECT_NE(allocated.message().find("\"unknown\""), std::string::npos) << allocated.message();
  EXPECT_NE(allocated.message().find(store->describe()), std::string::npos) << allocated.message();
  this->expect_no_password(allocated);
  const Status read = store->tag(seg_tag("unknown")).status();
  EXPECT_EQ(read.code(), StatusCode::kNotFound) << read.to_string();
  this->expect_no_password(read);
  // Names are case-sensitive.
  EXPECT_EQ(store->tag(seg_tag("Known")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(this->info(*store, "known").max_id, 1u);
}

TYPED_TEST(SegmentStoreTest, CreatingAnExistingTagIsAlreadyExistsAndChangesNothing) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  SegmentTagSpec first = spec_of("dup", 50, 10);
  first.description = "the first";
  ASSERT_TRUE(store->create_tag(first).ok());
  ASSERT_EQ(this->allocate(*store, "dup", 10).start, 50u);

  SegmentTagSpec second = spec_of("dup", 7, 20);
  second.description = "the second";
  second.delta = 2;
  second.remainder = 1;
  const Status st = store->create_tag(second);
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kNone) << st.to_string();
  EXPECT_EQ(st.message(), "segment tag \"dup\" already exists in " + store->describe());
  this->expect_no_password(st);
  // Another store object ("process") is refused alike.
  auto other = this->open();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->create_tag(first).code(), StatusCode::kAlreadyExists);

  const SegmentTagInfo t = this->info(*store, "dup");
  EXPECT_EQ(t.max_id, 60u);
  EXPECT_EQ(t.step, 10u);
  EXPECT_EQ(t.description, "the first");
  EXPECT_EQ(t.delta, 1u);
  EXPECT_EQ(t.remainder, 0u);
}

// Strict tags (SegmentTagSpec::strict) are kept per tag, read back by tag() and list_tags() (and
// by another store object), and allocate as any other.
TYPED_TEST(SegmentStoreTest, StrictIsKeptPerTag) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  SegmentTagSpec strict = spec_of("strict", 10, 5);
  strict.strict = true;
  ASSERT_TRUE(store->create_tag(strict).ok());
  ASSERT_TRUE(store->create_tag(spec_of("plain")).ok());
  EXPECT_TRUE(this->info(*store, "strict").strict);
  EXPECT_FALSE(this->info(*store, "plain").strict);
  EXPECT_EQ(this->allocate(*store, "strict", 5).start, 10u);
  auto other = this->open();
  ASSERT_NE(other, nullptr);
  Result<std::vector<SegmentTagInfo>> all = other->list_tags();
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].tag, "plain");
  EXPECT_FALSE((*all)[0].strict);
  EXPECT_EQ((*all)[1].tag, "strict");
  EXPECT_TRUE((*all)[1].strict);
  EXPECT_EQ((*all)[1].max_id, 15u);
  // A strict tag that already exists is not made plain by a second create, nor the reverse.
  EXPECT_EQ(other->create_tag(spec_of("strict")).code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(this->info(*other, "strict").strict);
  SegmentTagSpec plain_again = spec_of("plain");
  plain_again.strict = true;
  EXPECT_EQ(other->create_tag(plain_again).code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(this->info(*other, "plain").strict);
}

TYPED_TEST(SegmentStoreTest, BadSpecsAndTagNamesAreInvalidArgumentNamingTheField) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  struct Case {
    SegmentTagSpec spec;
    const char* field;
  };
  std::vector<Case> cases;
  const auto with = [](auto change) {
    SegmentTagSpec spec = spec_of("ok");
    change(spec);
    return spec;
  };
  cases.push_back({with([](SegmentTagSpec& s) { s.tag = ""; }), "tag"});
  cases.push_back({with([](SegmentTagSpec& s) { s.tag = "a b"; }), "tag"});
  cases.push_back({with([](SegmentTagSpec& s) { s.tag = std::string(129, 'x'); }), "tag"});
  cases.push_back({with([](SegmentTagSpec& s) { s.tag = "caf\xc3\xa9"; }), "tag"});
  cases.push_back({with([](SegmentTagSpec& s) { s.step = 0; }), "step"});
  cases.push_back({with([](SegmentTagSpec& s) { s.step = kMaxSegmentStep + 1; }), "step"});
  cases.push_back({with([](SegmentTagSpec& s) { s.delta = 0; }), "delta"});
  cases.push_back({with([](SegmentTagSpec& s) { s.delta = kMaxSegmentDelta + 1; }), "delta"});
  cases.push_back({with([](SegmentTagSpec& s) {
                     s.delta = 3;
                     s.remainder = 3;
                   }),
                   "remainder"});
  cases.push_back({with([](SegmentTagSpec& s) { s.start = kInt64Max - 99; }), "start"});
  cases.push_back({with([](SegmentTagSpec& s) { s.start = ~std::uint64_t{0}; }), "start"});
  cases.push_back(
      {with([](SegmentTagSpec& s) { s.description = std::string(257, 'd'); }), "description"});
  cases.push_back(
      {with([](SegmentTagSpec& s) { s.description = "bad \xff utf-8"; }), "description"});
  cases.push_back(
      {with([](SegmentTagSpec& s) { s.description = std::string("nul\0", 4); }), "description"});
  for (const Case& c : cases) {
    const Status st = store->create_tag(c.spec);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.field << ": " << st.to_string();
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
    EXPECT_EQ(st.code(), check_segment_tag_spec(c.spec).code());
  }
  // The limits themselves are fine.
  SegmentTagSpec edge = spec_of(std::string(128, 'x'), kInt64Max - 100, 100);
  edge.delta = kMaxSegmentDelta;
  edge.remainder = kMaxSegmentDelta - 1;
  edge.description = std::string(256, 'd');
  EXPECT_TRUE(store->create_tag(edge).ok()) << store->create_tag(edge).to_string();
  SegmentTagSpec big = spec_of("big", 1, this->backend().max_base_step());
  EXPECT_TRUE(store->create_tag(big).ok());

  for (std::uint64_t bad : {std::uint64_t{0}, kMaxSegmentStep + 1, ~std::uint64_t{0}}) {
    const Status a = store->allocate(seg_tag("big"), bad).status();
    EXPECT_EQ(a.code(), StatusCode::kInvalidArgument) << a.to_string();
    EXPECT_NE(a.message().find("step"), std::string::npos) << a.message();
  }
  Result<std::vector<SegmentTagInfo>> tags = store->list_tags();
  ASSERT_TRUE(tags.ok()) << tags.status().to_string();
  EXPECT_EQ(tags->size(), 2u);
  EXPECT_EQ(this->info(*store, "big").max_id, 1u);  // the refused allocations changed nothing
}

TYPED_TEST(SegmentStoreTest, ResiduesAndDescriptionsRoundTrip) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  SegmentTagSpec odd = spec_of("odd", 11, 100);
  odd.delta = 2;
  odd.remainder = 1;
  odd.description = "odd IDs: the second of two ticket servers \xe2\x9c\x93";
  ASSERT_TRUE(store->create_tag(odd).ok());
  SegmentTagSpec third = spec_of("third", 0, 30);
  third.delta = 3;
  third.remainder = 0;
  ASSERT_TRUE(store->create_tag(third).ok());
  ASSERT_TRUE(store->create_tag(spec_of("plain")).ok());

  const SegmentAllocation a = this->allocate(*store, "odd", 100);
  EXPECT_EQ(a.start, 11u);
  EXPECT_EQ(a.end, 111u);
  EXPECT_EQ(a.delta, 2u);
  EXPECT_EQ(a.remainder, 1u);
  const SegmentAllocation b = this->allocate(*store, "third", 30);
  EXPECT_EQ(b.start, 0u);
  EXPECT_EQ(b.delta, 3u);
  EXPECT_EQ(b.remainder, 0u);
  const SegmentAllocation c = this->allocate(*store, "plain", 5);
  EXPECT_EQ(c.delta, 1u);
  EXPECT_EQ(c.remainder, 0u);

  const SegmentTagInfo t = this->info(*store, "odd");
  EXPECT_EQ(t.delta, 2u);
  EXPECT_EQ(t.remainder, 1u);
  EXPECT_EQ(t.description, odd.description);
  EXPECT_EQ(t.max_id, 111u);
  EXPECT_EQ(this->info(*store, "plain").description, "");

  Result<std::vector<SegmentTagInfo>> tags = store->list_tags();
  ASSERT_TRUE(tags.ok()) << tags.status().to_string();
  ASSERT_EQ(tags->size(), 3u);
  EXPECT_EQ((*tags)[0].tag, "odd");
  EXPECT_EQ((*tags)[0].delta, 2u);
  EXPECT_EQ((*tags)[0].remainder, 1u);
  EXPECT_EQ((*tags)[0].description, odd.description);
  EXPECT_EQ((*tags)[1].tag, "plain");
  EXPECT_EQ((*tags)[1].delta, 1u);
  EXPECT_EQ((*tags)[2].tag, "third");
  EXPECT_EQ((*tags)[2].delta, 3u);
  EXPECT_EQ((*tags)[2].remainder, 0u);
  EXPECT_EQ((*tags)[2].step, 30u);
  EXPECT_EQ((*tags)[2].max_id, 30u);
}

TYPED_TEST(SegmentStoreTest, ListTagsIsSortedByName) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  Result<std::vector<SegmentTagInfo>> empty = store->list_tags();
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_TRUE(empty->empty());
  std::vector<std::string> names = {"b", "a", "Z", "a.b", "a-b", "a_b", "_x", "10", "9", "aa", "B"};
  for (const std::string& n : names) ASSERT_TRUE(store->create_tag(spec_of(n)).ok()) << n;
  std::sort(names.begin(), names.end());  // bytewise
  Result<std::vector<SegmentTagInfo>> tags = store->list_tags();
  ASSERT_TRUE(tags.ok()) << tags.status().to_string();
  std::vector<std::string> listed;
  for (const SegmentTagInfo& t : *tags) listed.push_back(t.tag);
  EXPECT_EQ(listed, names);
}

TYPED_TEST(SegmentStoreTest, MaxIdPast63BitsIsOutOfRangeAndChangesNothing) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->create_tag(spec_of("end", kInt64Max - 1000, 1000)).ok());
  const SegmentAllocation a = this->allocate(*store, "end", 1000);
  EXPECT_EQ(a.start, kInt64Max - 1000);
  EXPECT_EQ(a.end, kInt64Max);
  for (std::uint64_t step : {std::uint64_t{1}, std::uint64_t{1000}, kMaxSegmentStep}) {
    const Status st = store->allocate(seg_tag("end"), step).status();
    EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.to_string();
    EXPECT_NE(st.message().find("\"end\""), std::string::npos) << st.message();
    this->expect_no_password(st);
  }
  EXPECT_EQ(this->info(*store, "end").max_id, kInt64Max);

  // Room for a smaller step only: the larger one is refused, the smaller one still served.
  ASSERT_TRUE(store->create_tag(spec_of("near", kInt64Max - 10, 5)).ok());
  EXPECT_EQ(store->allocate(seg_tag("near"), 11).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(this->info(*store, "near").max_id, kInt64Max - 10);
  const SegmentAllocation b = this->allocate(*store, "near", 10);
  EXPECT_EQ(b.start, kInt64Max - 10);
  EXPECT_EQ(b.end, kInt64Max);
}

TYPED_TEST(SegmentStoreTest, TagsAndCountersPersistAcrossReopening) {
  std::uint64_t last_end = 0;
  {
    auto store = this->open();
    ASSERT_NE(store, nullptr);
    SegmentTagSpec spec = spec_of("kept", 500, 50);
    spec.delta = 4;
    spec.remainder = 2;
    spec.description = "survives";
    ASSERT_TRUE(store->create_tag(spec).ok());
    this->allocate(*store, "kept", 50);
    last_end = this->allocate(*store, "kept", 70).end;
    EXPECT_EQ(last_end, 620u);
  }
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  const SegmentTagInfo t = this->info(*store, "kept");
  EXPECT_EQ(t.max_id, last_end);
  EXPECT_EQ(t.step, 50u);
  EXPECT_EQ(t.delta, 4u);
  EXPECT_EQ(t.remainder, 2u);
  EXPECT_EQ(t.description, "survives");
  const SegmentAllocation a = this->allocate(*store, "kept", 50);
  EXPECT_EQ(a.start, last_end);
  EXPECT_EQ(a.delta, 4u);
}

// Four store objects on one database, one per thread, as four nodes would have: every range is
// handed out once, and together they cover the counter without a gap.
TYPED_TEST(SegmentStoreTest, ConcurrentStoresHandOutDisjointRangesCoveringTheCounter) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 500;
  constexpr std::uint64_t kStart = 1'000'000;
  {
    auto creator = this->open();
    ASSERT_NE(creator, nullptr);
    ASSERT_TRUE(creator->create_tag(spec_of("shared", kStart, 10)).ok());
  }
  std::vector<std::unique_ptr<SegmentStore>> stores;
  for (int i = 0; i < kThreads; ++i) {
    stores.push_back(this->open(SegmentStoreOptions{.timeout = 20s}));
    ASSERT_NE(stores.back(), nullptr);
  }
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::uint64_t> asked(kThreads, 0);
  std::latch go(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < kPerThread; ++i) {
        const std::uint64_t step = 1 + static_cast<std::uint64_t>((i * 7 + t) % 13);
        Result<SegmentAllocation> a =
            stores[static_cast<std::size_t>(t)]->allocate(seg_tag("shared"), step);
        if (!a.ok()) {
          errors[static_cast<std::size_t>(t)] = a.status().to_string();
          return;
        }
        if (a->end - a->start != step) errors[static_cast<std::size_t>(t)] = "wrong length";
        asked[static_cast<std::size_t>(t)] += step;
        got[static_cast<std::size_t>(t)].emplace_back(a->start, a->end);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> all;
  std::uint64_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[static_cast<std::size_t>(t)], "") << "thread " << t;
    EXPECT_EQ(got[static_cast<std::size_t>(t)].size(), static_cast<std::size_t>(kPerThread));
    all.insert(all.end(), got[static_cast<std::size_t>(t)].begin(),
               got[static_cast<std::size_t>(t)].end());
    total += asked[static_cast<std::size_t>(t)];
  }
  expect_exact_cover(all, kStart, total);
  EXPECT_EQ(this->info(*stores[0], "shared").max_id, kStart + total);
}

// The same across processes (fork): each child opens its own store after the fork.
TYPED_TEST(SegmentStoreTest, SeveralProcessesHandOutDisjointRanges) {
  constexpr int kProcesses = 3;
  constexpr int kPerProcess = 100;
  constexpr std::uint64_t kStart = 7;
  {
    auto creator = this->open();
    ASSERT_NE(creator, nullptr);
    ASSERT_TRUE(creator->create_tag(spec_of("forked", kStart, 3)).ok());
  }
  testing::TempDir out;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::ofstream file(out.path() / std::to_string(p));
      Result<std::unique_ptr<SegmentStore>> store =
          this->backend().open(SegmentStoreOptions{.timeout = 20s});
      for (int i = 0; store.ok() && i < kPerProcess; ++i) {
        Result<SegmentAllocation> a = (*store)->allocate(seg_tag("forked"), 3 + (i % 2));
        if (!a.ok()) {
          file << "error " << a.status().to_string() << "\n";
          break;
        }
        file << a->start << " " << a->end << "\n";
      }
      if (!store.ok()) file << "error " << store.status().to_string() << "\n";
      file.close();
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> all;
  std::uint64_t total = 0;
  for (int p = 0; p < kProcesses; ++p) {
    std::ifstream file(out.path() / std::to_string(p));
    std::string line;
    int lines = 0;
    while (std::getline(file, line)) {
      ASSERT_FALSE(line.starts_with("error")) << "process " << p << ": " << line;
      std::istringstream in(line);
      std::uint64_t start = 0;
      std::uint64_t end = 0;
      in >> start >> end;
      all.emplace_back(start, end);
      total += end - start;
      ++lines;
    }
    EXPECT_EQ(lines, kPerProcess) << "process " << p;
  }
  expect_exact_cover(all, kStart, total);
  EXPECT_EQ(total, static_cast<std::uint64_t>(kProcesses) * (kPerProcess / 2) * 7);
}

TYPED_TEST(SegmentStoreTest, DescribeNamesTheStoreWithoutItsPassword) {
  auto store = this->open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->describe(), this->backend().description());
  this->expect_no_password(Status(StatusCode::kUnknown, store->describe()));
  Result<SegmentStoreSpec> spec =
      parse_segment_store(this->backend().location(), this->backend().data_dir());
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(to_string(*spec), this->backend().description());
}

// ---- Without a server: tag names, store locations, the PostgreSQL store's lazy connection ----

#ifndef FLURRY_SEGMENT_SERVERS

TEST(SegmentTagTest, AcceptsNamesOfTheAlphabetUpTo128Bytes) {
  for (std::string_view tag : {"a", "leaf-segment-test", "A.b_c-9", "...", "-", "0"}) {
    EXPECT_TRUE(SegmentTag::of(tag).ok()) << tag;
  }
  EXPECT_TRUE(SegmentTag::of(std::string(128, 'z')).ok());
}

TEST(SegmentTagTest, RefusesOtherNamesSayingWhy) {
  struct Case {
    std::string tag;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{std::string(129, 'z'), "129 bytes"}, Case{"a b", "byte 2 is ' '"},
        Case{"a/b", "byte 2 is '/'"}, Case{"caf\xc3\xa9", "byte 4 is '\\xc3'"},
        Case{std::string("a\0b", 3), "byte 2 is '\\x00'"}, Case{"x\"", "byte 2"}}) {
    const Status st = SegmentTag::of(c.tag).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_EQ(st.reason(), Reason::kBadInput);
    EXPECT_NE(st.message().find("segment tag"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st.message();
    // With where the text came from: the same reason, prefixed.
    const Status where = SegmentTag::of(c.tag, "parameter \"tag\"").status();
    EXPECT_EQ(where.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(where.message(), "parameter \"tag\" is not a valid tag name: " + st.message());
  }
}

TEST(SegmentTagTest, SpecLimits) {
  EXPECT_TRUE(check_segment_tag_spec(spec_of("t")).ok());
  EXPECT_TRUE(check_segment_tag_spec(spec_of("t", kInt64Max - 1000, 1000)).ok());
  EXPECT_TRUE(check_segment_tag_spec(spec_of("t", 0, kMaxSegmentStep)).ok());
  const Status over = check_segment_tag_spec(spec_of("t", kInt64Max - 999, 1000));
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find("start"), std::string::npos) << over.message();
  SegmentTagSpec spec = spec_of("t");
  spec.description = "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82";  // multi-byte UTF-8 is fine
  EXPECT_TRUE(check_segment_tag_spec(spec).ok());
  for (const char* bad : {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe4\xb8"}) {
    spec.description = bad;
    EXPECT_EQ(check_segment_tag_spec(spec).code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SegmentStoreSpecTest, ParsesEachForm) {
  const std::filesystem::path data = "/var/lib/flurry";
  Result<SegmentStoreSpec> s = parse_segment_store("sqlite", data);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->kind, SegmentStoreSpec::Kind::kSqlite);
  EXPECT_EQ(s->sqlite_path, data / "segments.db");
  EXPECT_EQ(to_string(*s), "sqlite:/var/lib/flurry/segments.db");

  s = parse_segment_store("  sqlite:/srv/ids.db ", data);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->sqlite_path, "/srv/ids.db");
  s = parse_segment_store("sqlite:relative/ids.db", data);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->sqlite_path, "relative/ids.db");  // relative to the working directory
  EXPECT_EQ(to_string(*s), "sqlite:relative/ids.db");

  for (const char* url :
       {"postgresql://flurry:s3cret@db:5432/ids", "postgres://flurry:s3cret@db/ids?sslmode=require",
        "postgresql://flurry:s3cret@h1:5432,h2:5432/ids",
        "host=db dbname=ids user=flurry password=s3cret"}) {
    s = parse_segment_store(url, data);
    ASSERT_TRUE(s.ok()) << url << ": " << s.status().to_string();
    EXPECT_EQ(s->kind, SegmentStoreSpec::Kind::kPostgres);
    EXPECT_EQ(s->postgres_url, url);
    EXPECT_EQ(to_string(*s).find("s3cret"), std::string::npos) << to_string(*s);
    EXPECT_NE(to_string(*s).find("***"), std::string::npos) << to_string(*s);
  }
  EXPECT_EQ(to_string(*parse_segment_store("postgresql://flurry:s3cret@db:5432/ids", data)),
            "postgresql://flurry:***@db:5432/ids");
  EXPECT_EQ(to_string(*parse_segment_store("host=db password=s3cret dbname=ids", data)),
            "host=db password=*** dbname=ids");
}

TEST(SegmentStoreSpecTest, RefusesBadLocationsSayingWhyWithoutThePassword) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "empty"}, Case{"   ", "empty"}, Case{"sqlite:", "no file"},
        Case{"sqlite::memory:", "in-memory"}, Case{"sqlite:/srv/", "directory"},
        Case{"mysql://u:s3cret@db/ids", "\"mysql\":// URL"}, Case{"u:s3cret@db", "unknown"},
        Case{"redis", "unknown kind"}, Case{"postgresql://u:s3cret@db:notaport/ids", "port"},
        Case{"host=db password=s3cret nonsense=1", "nonsense"}}) {
    Result<SegmentStoreSpec> s = parse_segment_store(c.text, "/data");
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().to_string();
    EXPECT_NE(s.status().message().find("segment store"), std::string::npos)
        << s.status().message();
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << s.status().message();
    EXPECT_EQ(s.status().message().find("s3cret"), std::string::npos) << s.status().message();
  }
}

TEST(SegmentStoreSpecTest, ParsesListsKeepingLibpqsOwnCommas) {
  Result<std::vector<SegmentStoreSpec>> list = parse_segment_stores(
      "sqlite, postgresql://db/ids ,host=h1,h2 port=5432,5433 dbname=ids,"
      "sqlite:/a,b/ids.db,postgres://x:s3cret@p1,p2/ids",
      "/data");
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  ASSERT_EQ(list->size(), 5u);
  EXPECT_EQ((*list)[0].sqlite_path, "/data/segments.db");
  EXPECT_EQ((*list)[1].postgres_url, "postgresql://db/ids");
  EXPECT_EQ((*list)[2].postgres_url, "host=h1,h2 port=5432,5433 dbname=ids");
  EXPECT_EQ((*list)[3].sqlite_path, "/a,b/ids.db");
  EXPECT_EQ((*list)[4].postgres_url, "postgres://x:s3cret@p1,p2/ids");

  list = parse_segment_stores("sqlite", "/data");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
}

TEST(SegmentStoreSpecTest, RefusesEmptyListsEmptyEntriesAndDuplicates) {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"", "at least one"}, Case{" ", "at least one"},
        Case{"sqlite,,sqlite:/x.db", "entry 2 is empty"}, Case{"sqlite,", "entry 2 is empty"},
        Case{",sqlite", "entry 1 is empty"}, Case{"sqlite,sqlite", "entries 1 and 2"},
        Case{"sqlite,sqlite:/data/segments.db", "entries 1 and 2"},
        Case{"sqlite:/x.db,sqlite:/y/../x.db", "entries 1 and 2"},
        Case{"postgresql://u:s3cret@db:5432/ids,sqlite,host=db port=5432 "
             "dbname=ids user=u password=s3cret",
             "entries 1 and 3"},
        Case{"sqlite,redis", "entry 1"}, Case{"sqlite,mysql://u@db", "entry 2"}}) {
    Result<std::vector<SegmentStoreSpec>> list = parse_segment_stores(c.text, "/data");
    ASSERT_FALSE(list.ok()) << c.text;
    EXPECT_EQ(list.status().code(), StatusCode::kInvalidArgument) << list.status().to_string();
    EXPECT_NE(list.status().message().find(c.says), std::string::npos) << list.status().message();
    EXPECT_EQ(list.status().message().find("s3cret"), std::string::npos) << list.status().message();
  }
}

TEST(SegmentStoreSpecTest, OpenRefusesBadSpecsAndOptions) {
  testing::TempDir dir;
  SegmentStoreSpec spec;
  spec.sqlite_path = dir.path() / "s.db";
  EXPECT_EQ(open_segment_store(spec, SegmentStoreOptions{.timeout = 0ms}).status().code(),
            StatusCode::kInvalidArgument);
  spec.sqlite_path.clear();
  EXPECT_EQ(open_segment_store(spec).status().code(), StatusCode::kInvalidArgument);
  spec.sqlite_path = ":memory:";
  EXPECT_EQ(open_segment_store(spec).status().code(), StatusCode::kInvalidArgument);
  spec.kind = SegmentStoreSpec::Kind::kPostgres;
  spec.postgres_url = "mysql://db/ids";
  EXPECT_EQ(open_segment_store(spec).status().code(), StatusCode::kInvalidArgument);
  // A file where the directory should be: UNAVAILABLE / IO at open.
  std::ofstream(dir.path() / "file") << "x";
  spec.kind = SegmentStoreSpec::Kind::kSqlite;
  spec.sqlite_path = dir.path() / "file" / "s.db";
  const Status st = open_segment_store(spec).status();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
}

// ---- SQLite's own ----

// Runs `sql` on `file` through a connection of the test's own; false on failure.
bool sqlite_exec(const std::filesystem::path& file, const std::string& sql,
                 std::string* first_value = nullptr) {
  sqlite3* db = nullptr;
  if (sqlite3_open(file.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return false;
  }
  const auto callback = [](void* out, int n, char** values, char**) {
    if (out != nullptr && n > 0 && values[0] != nullptr)
      *static_cast<std::string*>(out) = values[0];
    return 0;
  };
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), callback, first_value, &error);
  if (error != nullptr) {
    ADD_FAILURE() << sql << ": " << error;
    sqlite3_free(error);
  }
  sqlite3_close(db);
  return rc == SQLITE_OK;
}

TEST(SqliteSegmentStoreTest, CreatesTheDirectoryAndAWalFileWithLeafsTable) {
  testing::SqliteSegmentBackend backend;
  ASSERT_FALSE(std::filesystem::exists(backend.data_dir()));
  Result<std::unique_ptr<SegmentStore>> store = backend.open();
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE(std::filesystem::exists(backend.file()));
  std::string mode;
  ASSERT_TRUE(sqlite_exec(backend.file(), "PRAGMA journal_mode", &mode));
  EXPECT_EQ(mode, "wal");
  ASSERT_TRUE((*store)->create_tag(spec_of("t", 5, 10)).ok());
  (void)(*store)->allocate(seg_tag("t"), 10);
  std::string row;
  ASSERT_TRUE(sqlite_exec(backend.file(),
                          "SELECT biz_tag || ' ' || max_id || ' ' || step || ' ' || "
                          "coalesce(description, 'NULL') || ' ' || (update_time > 1700000000000) "
                          "FROM leaf_alloc",
                          &row));
  EXPECT_EQ(row, "t 15 10 NULL 1");
}

// Rows written by plain SQL (a Leaf-style table filled by hand) are served as they are; rows a
// store never writes are DATA_LOSS / CORRUPT, and nothing is allocated from them.
TEST(SqliteSegmentStoreTest, ServesRowsWrittenBySqlAndRefusesCorruptOnes) {
  testing::SqliteSegmentBackend backend;
  Result<std::unique_ptr<SegmentStore>> store = backend.open();
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  ASSERT_TRUE(sqlite_exec(backend.file(),
                          "INSERT INTO leaf_alloc VALUES('leaf-segment-test', 1, 2000, "
                          "'Test leaf Segment Mode Get Id', 0);"
                          "INSERT INTO leaf_alloc VALUES('negative', -5, 10, NULL, 0);"
                          "INSERT INTO leaf_alloc VALUES('zero-step', 1, 0, NULL, 0);"
                          "INSERT INTO leaf_alloc VALUES('text', 'abc', 10, NULL, 0);"
                          "INSERT INTO leaf_alloc VALUES('bad-residue', 1, 10, NULL, 0);"
                          "INSERT INTO flurry_segment_residues VALUES('bad-residue', 2, 2)"));
  Result<SegmentAllocation> a = (*store)->allocate(seg_tag("leaf-segment-test"), 2000);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->start, 1u);
  EXPECT_EQ(a->end, 2001u);
  for (const char* tag : {"negative", "zero-step", "text", "bad-residue"}) {
    const Status st = (*store)->allocate(seg_tag(tag), 10).status();
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << tag << ": " << st.to_string();
    EXPECT_EQ(st.reason(), Reason::kCorrupt) << st.to_string();
    EXPECT_EQ((*store)->tag(seg_tag(tag)).status().reason(), Reason::kCorrupt) << tag;
  }
  std::string max_id;
  ASSERT_TRUE(sqlite_exec(backend.file(),
                          "SELECT group_concat(max_id, ',') FROM (SELECT max_id FROM leaf_alloc "
                          "WHERE biz_tag <> 'leaf-segment-test' ORDER BY biz_tag)",
                          &max_id));
  EXPECT_EQ(max_id, "1,-5,abc,1");  // bad-residue, negative, text, zero-step: unchanged
  EXPECT_EQ((*store)->list_tags().status().reason(), Reason::kCorrupt);
}

// A file made before strict tags (no flurry_segment_strict) gains the table in place at open:
// its tags are served as they were, not strict, and strict tags can be created beside them.
TEST(SqliteSegmentStoreTest, AFileOfAnOlderFlurryGainsStrictTagsInPlace) {
  testing::SqliteSegmentBackend backend;
  std::filesystem::create_directories(backend.file().parent_path());
  ASSERT_TRUE(sqlite_exec(backend.file(),
                          "CREATE TABLE leaf_alloc(biz_tag TEXT PRIMARY KEY, max_id INTEGER NOT "
                          "NULL, step INTEGER NOT NULL, description TEXT, update_time INTEGER NOT "
                          "NULL);"
                          "CREATE TABLE flurry_segment_residues(biz_tag TEXT PRIMARY KEY, delta "
                          "INTEGER NOT NULL, remainder INTEGER NOT NULL);"
                          "CREATE TABLE flurry_segment_meta(key TEXT PRIMARY KEY, value TEXT NOT "
                          "NULL);"
                          "INSERT INTO leaf_alloc VALUES('old', 40, 10, NULL, 0)"));
  std::string before;
  ASSERT_TRUE(sqlite_exec(backend.file(),
                          "SELECT count(*) FROM sqlite_master WHERE name = 'flurry_segment_strict'",
                          &before));
  ASSERT_EQ(before, "0");
  Result<std::unique_ptr<SegmentStore>> store = backend.open();
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  Result<SegmentTagInfo> old = (*store)->tag(seg_tag("old"));
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_FALSE(old->strict);
  EXPECT_EQ(old->max_id, 40u);
  Result<SegmentAllocation> a = (*store)->allocate(seg_tag("old"), 10);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->start, 40u);
  SegmentTagSpec spec = spec_of("new");
  spec.strict = true;
  ASSERT_TRUE((*store)->create_tag(spec).ok());
  EXPECT_TRUE((*store)->tag(seg_tag("new"))->strict);
  std::string rows;
  ASSERT_TRUE(sqlite_exec(backend.file(), "SELECT group_concat(biz_tag) FROM flurry_segment_strict",
                          &rows));
  EXPECT_EQ(rows, "new");
}

// A directory where the file should be: UNAVAILABLE / IO at open, naming the store.
TEST(SqliteSegmentStoreTest, ADirectoryWhereTheFileShouldBeIsUnavailable) {
  testing::SqliteSegmentBackend backend;
  Result<std::unique_ptr<SegmentStore>> store = backend.open();
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  ASSERT_TRUE((*store)->create_tag(spec_of("t")).ok());
  store = Status(StatusCode::kCancelled, "closed");
  std::filesystem::remove_all(backend.data_dir());
  std::filesystem::create_directories(backend.file());  // a directory where the file was
  const Status st = backend.open().status();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
  EXPECT_NE(st.message().find(backend.file().string()), std::string::npos) << st.message();
}

// ---- PostgreSQL without a server ----

TEST(PostgresSegmentStoreTest, OpenNeverConnectsAndAnUnreachableServerIsUnavailable) {
  const std::string url = "host=127.0.0.1 port=1 dbname=ids user=u password=s3cret-pw";
  Result<SegmentStoreSpec> spec = parse_segment_store(url, "/data");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  Result<std::unique_ptr<SegmentStore>> store =
      open_segment_store(*spec, SegmentStoreOptions{.timeout = 1000ms});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ((*store)->describe(), "host=127.0.0.1 port=1 dbname=ids user=u password=***");
  for (int i = 0; i < 2; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const Status st = (*store)->allocate(seg_tag("t"), 10).status();
    EXPECT_LT(since(start), 1000ms);
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
    EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
    EXPECT_TRUE(st.retryable());
    EXPECT_EQ(st.message().find("s3cret"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("password=***"), std::string::npos) << st.message();
  }
  EXPECT_EQ((*store)->create_tag(spec_of("t")).code(), StatusCode::kUnavailable);
  EXPECT_EQ((*store)->tag(seg_tag("t")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ((*store)->list_tags().status().code(), StatusCode::kUnavailable);
  // Refused before any connection.
  EXPECT_EQ((*store)->create_tag(spec_of("t", 1, 2147483648)).code(), StatusCode::kInvalidArgument);
}

// A listening socket that never answers: the call gives up at the store's timeout.
TEST(PostgresSegmentStoreTest, AServerThatNeverAnswersCostsTheTimeout) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);  // the kernel completes handshakes; nobody ever answers
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  SegmentStoreSpec spec;
  spec.kind = SegmentStoreSpec::Kind::kPostgres;
  spec.postgres_url =
      "postgresql://u:s3cret-pw@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/ids";
  Result<std::unique_ptr<SegmentStore>> store =
      open_segment_store(spec, SegmentStoreOptions{.timeout = 500ms});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  const auto start = std::chrono::steady_clock::now();
  const Status st = (*store)->allocate(seg_tag("t"), 10).status();
  const auto took = since(start);
  ::close(fd);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
  EXPECT_GE(took, 450ms) << st.to_string();
  EXPECT_LT(took, 1500ms) << st.to_string();
  EXPECT_NE(st.message().find("500 ms"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("s3cret"), std::string::npos) << st.message();
}

#endif  // !FLURRY_SEGMENT_SERVERS

// ---- PostgreSQL's own, against a real server ----

#ifdef FLURRY_SEGMENT_SERVERS

using testing::PostgresServer;

// An admin connection of the test's own, for what an operator (or Leaf) does beside the store.
class AdminSession {
 public:
  explicit AdminSession(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_) != CONNECTION_OK) {
      ADD_FAILURE() << "admin connection: " << PQerrorMessage(conn_);
    }
  }
  ~AdminSession() { PQfinish(conn_); }
  AdminSession(const AdminSession&) = delete;
  AdminSession& operator=(const AdminSession&) = delete;

  // Runs `sql`; the first column of the first row ("" when there is none).
  std::string exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    EXPECT_TRUE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        << sql << ": " << PQresultErrorMessage(r);
    std::string out = PQntuples(r) > 0 && PQnfields(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return out;
  }

 private:
  PGconn* conn_;
};

class PostgresSegmentStoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<SegmentStore> open(SegmentStoreOptions options = {}) {
    Result<std::unique_ptr<SegmentStore>> r = backend_.open(options);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  std::string admin_url() const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(backend_.server().port()) + "/" +
           backend_.database();
  }
  // The PID of the store's session (its application_name is flurry-segments).
  std::string store_pid(AdminSession& admin) const {
    return admin.exec(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'flurry-segments' AND "
        "datname = '" +
        backend_.database() + "'");
  }

  mutable testing::PostgresSegmentBackend backend_;
};

// Leaf's own DDL and sample row, written by plain SQL: the store uses them as they are, and Leaf's
// arithmetic ([max_id - step, max_id) after raising max_id by step) gives Leaf's ranges.
TEST_F(PostgresSegmentStoreTest, ALeafDatabaseIsUsedAsItIs) {
  AdminSession admin(admin_url());
  admin.exec(
      "CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '' PRIMARY KEY, "
      "max_id bigint NOT NULL DEFAULT 1, step integer NOT NULL, "
      "description varchar(256) DEFAULT NULL, "
      "update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)");
  admin.exec(
      "insert into leaf_alloc(biz_tag, max_id, step, description) "
      "values('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id')");
  auto store = open();
  ASSERT_NE(store, nullptr);
  Result<SegmentAllocation> a = store->allocate(seg_tag("leaf-segment-test"), 2000);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->start, 1u);
  EXPECT_EQ(a->end, 2001u);
  EXPECT_EQ(a->base_step, 2000u);
  EXPECT_EQ(a->delta, 1u);
  a = store->allocate(seg_tag("leaf-segment-test"), 2000);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->start, 2001u);
  EXPECT_EQ(a->end, 4001u);
  Result<SegmentTagInfo> t = store->tag(seg_tag("leaf-segment-test"));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->max_id, 4001u);
  EXPECT_EQ(t->step, 2000u);
  EXPECT_EQ(t->description, "Test leaf Segment Mode Get Id");
  EXPECT_NEAR(static_cast<double>(t->update_time_unix_ms), static_cast<double>(now_unix_ms()),
              60'000.0);
  // Leaf's row as Leaf reads it, and flurry's side table created beside it.
  EXPECT_EQ(admin.exec("SELECT max_id FROM leaf_alloc WHERE biz_tag = 'leaf-segment-test'"),
            "4001");
  EXPECT_EQ(admin.exec("SELECT to_regclass('flurry_segment_residues') IS NOT NULL"), "t");
  // A tag the store creates is a row Leaf can serve.
  ASSERT_TRUE(store->create_tag(spec_of("from-flurry", 1, 1000)).ok());
  EXPECT_EQ(admin.exec("SELECT max_id || ' ' || step || ' ' || (description IS NULL) FROM "
                       "leaf_alloc WHERE biz_tag = 'from-flurry'"),
            "1 1000 true");
}

// A database of an older flurry (leaf_alloc, flurry_segment_residues and flurry_segment_meta, no
// flurry_segment_strict) gains the table at the first connection: its tags are served as before,
// not strict, and strict tags can be created beside them.
TEST_F(PostgresSegmentStoreTest, ADatabaseOfAnOlderFlurryGainsStrictTagsInPlace) {
  AdminSession admin(admin_url());
  admin.exec(
      "CREATE TABLE leaf_alloc (biz_tag varchar(128) NOT NULL DEFAULT '' PRIMARY KEY, "
      "max_id bigint NOT NULL DEFAULT 1, step integer NOT NULL, "
      "description varchar(256) DEFAULT NULL, "
      "update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)");
  admin.exec(
      "CREATE TABLE flurry_segment_residues (biz_tag varchar(128) PRIMARY KEY, delta bigint NOT "
      "NULL, remainder bigint NOT NULL)");
  admin.exec("CREATE TABLE flurry_segment_meta (key varchar(64) PRIMARY KEY, value text NOT NULL)");
  admin.exec("INSERT INTO leaf_alloc(biz_tag, max_id, step) VALUES ('old', 40, 10)");
  EXPECT_EQ(admin.exec("SELECT to_regclass('flurry_segment_strict') IS NULL"), "t");
  auto store = open();
  ASSERT_NE(store, nullptr);
  Result<SegmentTagInfo> old = store->tag(seg_tag("old"));
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_FALSE(old->strict);
  Result<SegmentAllocation> a = store->allocate(seg_tag("old"), 10);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->start, 40u);
  EXPECT_EQ(admin.exec("SELECT to_regclass('flurry_segment_strict') IS NOT NULL"), "t");
  SegmentTagSpec spec = spec_of("new");
  spec.strict = true;
  ASSERT_TRUE(store->create_tag(spec).ok());
  EXPECT_TRUE(store->tag(seg_tag("new"))->strict);
  EXPECT_EQ(admin.exec("SELECT string_agg(biz_tag, ',') FROM flurry_segment_strict"), "new");
}

TEST_F(PostgresSegmentStoreTest, SessionsCommitSynchronouslyWhateverTheDatabaseSays) {
  backend_.server().exec("postgres",
                         "ALTER DATABASE " + backend_.database() + " SET synchronous_commit = off");
  AdminSession admin(admin_url());  // a new session sees the database's default
  EXPECT_EQ(admin.exec("SHOW synchronous_commit"), "off");
  auto store = open(SegmentStoreOptions{.timeout = 1500ms});
  ASSERT_NE(store, nullptr);
  Result<std::string> sync = internal::postgres_segment_store_setting(*store, "synchronous_commit");
  ASSERT_TRUE(sync.ok()) << sync.status().to_string();
  EXPECT_EQ(*sync, "on");
  EXPECT_EQ(*internal::postgres_segment_store_setting(*store, "statement_timeout"), "1500ms");
  EXPECT_EQ(*internal::postgres_segment_store_setting(*store, "lock_timeout"), "1500ms");
  // The allocation runs on that session.
  ASSERT_TRUE(store->create_tag(spec_of("t")).ok());
  ASSERT_TRUE(store->allocate(seg_tag("t"), 10).ok());
  EXPECT_EQ(*internal::postgres_segment_store_setting(*store, "synchronous_commit"), "on");
}

TEST_F(PostgresSegmentStoreTest, BaseStepsBeyondLeafsIntegerColumnAreRefused) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  const Status st = store->create_tag(spec_of("huge", 1, 2147483648));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("2147483647"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("step"), std::string::npos) << st.message();
  EXPECT_EQ(store->tag(seg_tag("huge")).status().code(), StatusCode::kNotFound);
  // An allocation may still ask for more than 32 bits: max_id is a bigint.
  ASSERT_TRUE(store->create_tag(spec_of("wide", 1, 2147483647)).ok());
  Result<SegmentAllocation> a = store->allocate(seg_tag("wide"), kMaxSegmentStep);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->end, 1 + kMaxSegmentStep);
}

// Stores that connect at the same time into an empty database create the tables once between
// them, without an error.
TEST_F(PostgresSegmentStoreTest, ConcurrentFirstConnectionsCreateTheTables) {
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<SegmentStore>> stores;
  for (int i = 0; i < kThreads; ++i) stores.push_back(open(SegmentStoreOptions{.timeout = 10s}));
  std::latch go(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      Result<std::vector<SegmentTagInfo>> tags = stores[static_cast<std::size_t>(t)]->list_tags();
      if (!tags.ok()) errors[static_cast<std::size_t>(t)] = tags.status().to_string();
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[static_cast<std::size_t>(t)], "");
}

// The server ends the idle session (an operator, a restart, an idle timeout): the next call
// notices before sending and works on a new connection.
TEST_F(PostgresSegmentStoreTest, ASessionEndedWhileIdleIsReplacedWithoutAnError) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->create_tag(spec_of("t", 1, 10)).ok());
  AdminSession admin(admin_url());
  for (int i = 0; i < 3; ++i) {
    const std::string pid = store_pid(admin);
    ASSERT_FALSE(pid.empty());
    EXPECT_EQ(admin.exec("SELECT pg_terminate_backend(" + pid + ", 5000)"), "t");
    Result<SegmentAllocation> a = store->allocate(seg_tag("t"), 10);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    EXPECT_EQ(a->start, 1u + 10u * static_cast<std::uint64_t>(i));
  }
}

// The store keeps its own ID and the cluster's identity; when a new connection reaches another
// store (here: its ID replaced behind it, and the session ended), the allocation that noticed is
// refused with nothing allocated, and identity() then tells the new store, which allocates.
TEST_F(PostgresSegmentStoreTest, AnotherStoreBehindTheLocationIsNoticedBeforeAnyAllocation) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  // Before the first connection only the address is known, and asking never connects.
  Result<SegmentStoreIdentity> known = store->identity(Blocking::kNever);
  ASSERT_TRUE(known.ok());
  EXPECT_TRUE(known->store_id.empty());
  EXPECT_NE(known->address.find("dbname=" + backend_.database()), std::string::npos)
      << known->address;
  Result<SegmentStoreIdentity> first = store->identity(Blocking::kAllowed);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_TRUE(internal::is_segment_store_id(first->store_id)) << first->store_id;
  EXPECT_TRUE(first->place.starts_with("postgres-cluster:")) << first->place;
  EXPECT_NE(first->place.find("/" + backend_.database() + "/public.leaf_alloc"), std::string::npos)
      << first->place;
  ASSERT_TRUE(store->create_tag(spec_of("t", 1, 10)).ok());
  AdminSession admin(admin_url());
  EXPECT_EQ(admin.exec("SELECT value FROM flurry_segment_meta WHERE key = 'store_id'"),
            first->store_id);
  const std::string other = "store-id:0123456789abcdef0123456789abcdef";
  admin.exec("UPDATE flurry_segment_meta SET value = '" + other + "' WHERE key = 'store_id'");
  const std::string pid = store_pid(admin);
  ASSERT_FALSE(pid.empty());
  EXPECT_EQ(admin.exec("SELECT pg_terminate_backend(" + pid + ", 5000)"), "t");
  const Status st = store->allocate(seg_tag("t"), 10).status();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_NE(st.message().find("another store"), std::string::npos) << st.message();
  EXPECT_EQ(admin.exec("SELECT max_id FROM leaf_alloc WHERE biz_tag = 't'"), "1");
  Result<SegmentStoreIdentity> now = store->identity(Blocking::kAllowed);
  ASSERT_TRUE(now.ok()) << now.status().to_string();
  EXPECT_EQ(now->store_id, other);
  EXPECT_EQ(now->place, first->place);
  Result<SegmentAllocation> a = store->allocate(seg_tag("t"), 10);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->start, 1u);
}

// A session that stops answering mid-call (SIGSTOP): the call gives up at the timeout with
// UNAVAILABLE, the next one works on a new connection, and a range whose outcome was unknown is
// never handed out again.
TEST_F(PostgresSegmentStoreTest, AHungSessionCostsTheTimeoutAndNoRangeTwice) {
  auto store = open(SegmentStoreOptions{.timeout = 500ms});
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->create_tag(spec_of("t", 1, 10)).ok());
  Result<SegmentAllocation> before = store->allocate(seg_tag("t"), 10);
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  AdminSession admin(admin_url());
  const std::string pid = store_pid(admin);
  ASSERT_FALSE(pid.empty());
  ASSERT_EQ(::kill(std::stoi(pid), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const Status st = store->allocate(seg_tag("t"), 10).status();
  const auto took = since(start);
  ::kill(std::stoi(pid), SIGCONT);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
  EXPECT_GE(took, 450ms);
  EXPECT_LT(took, 1500ms);
  Result<SegmentAllocation> after = store->allocate(seg_tag("t"), 10);
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_GE(after->start, before->end);
}

// A server that is down: every call fails within the timeout with UNAVAILABLE, retryable; once it
// is back, the same store object allocates again, above every range before.
TEST(PostgresSegmentStoreServerTest, AStoppedServerIsUnavailableAndTheStoreReconnects) {
  PostgresServer server;  // its own, to stop and start
  const std::string database = server.create_database();
  SegmentStoreSpec spec;
  spec.kind = SegmentStoreSpec::Kind::kPostgres;
  spec.postgres_url =
      "postgresql://postgres:s3cret-pw@127.0.0.1:" + std::to_string(server.port()) + "/" + database;
  Result<std::unique_ptr<SegmentStore>> opened =
      open_segment_store(spec, SegmentStoreOptions{.timeout = 500ms});
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  SegmentStore& store = **opened;
  ASSERT_TRUE(store.create_tag(spec_of("t", 1, 100)).ok());
  Result<SegmentAllocation> first = store.allocate(seg_tag("t"), 100);
  ASSERT_TRUE(first.ok()) << first.status().to_string();

  server.stop();
  for (int i = 0; i < 3; ++i) {  // the broken connection, then no server at all
    const auto start = std::chrono::steady_clock::now();
    const Status st = store.allocate(seg_tag("t"), 100).status();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
    EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
    EXPECT_TRUE(st.retryable());
    EXPECT_LT(since(start), 1000ms) << st.to_string();
    EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("s3cret"), std::string::npos) << st.message();
  }
  EXPECT_EQ(store.tag(seg_tag("t")).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.list_tags().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.create_tag(spec_of("u")).code(), StatusCode::kUnavailable);

  server.start();
  ASSERT_NE(spec.postgres_url.find(":" + std::to_string(server.port()) + "/"), std::string::npos)
      << "the server came back on another port";
  Result<SegmentAllocation> again = store.allocate(seg_tag("t"), 100);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_GE(again->start, first->end);
  EXPECT_EQ(again->end - again->start, 100u);
}

#endif  // FLURRY_SEGMENT_SERVERS

}  // namespace
}  // namespace flurry

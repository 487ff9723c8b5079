// Segment mode never trusts a store below what it handed this host (store floors), proves the
// residues of a tag's stores, and remembers unknown tags briefly. Real SQLite stores in temporary
// directories, edited behind the service's back with the sqlite3 API as an operator would; the
// service runs on a fake monotonic clock.
#include "segment/segment_floor.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/durable_file.h"
#include "fake_clock.h"
#include "flurry/host_dir.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "segment/cursor.h"
#include "segment/stores.h"
#include "segment_testing.h"
#include "segment_values.h"
#include "test_store.h"

namespace flurry {

using flurry::testing::count_of;
using flurry::testing::seg_tag;
namespace {

using std::chrono::milliseconds;
using testing::eventually;
using testing::FakeClock;
using testing::FakeMonotonicClock;
using testing::sqlite_store;
using testing::TempDir;

// Runs `sql` on the SQLite file as an operator's sqlite3 shell would.
void exec(const std::filesystem::path& file, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  EXPECT_EQ(rc, SQLITE_OK) << (error != nullptr ? error : "") << " in " << sql;
  sqlite3_free(error);
  sqlite3_close(db);
}

std::uint64_t max_id_of(SegmentStore& store, std::string_view tag) {
  Result<SegmentTagInfo> info = store.tag(seg_tag(tag));
  EXPECT_TRUE(info.ok()) << info.status().to_string();
  return info.ok() ? info->max_id : 0;
}

// One key, as earlier versions kept floors.
internal::SegmentFloorKeys K(const std::string& key) {
  return {{key}, {}};
}

// A floor file as earlier versions wrote it: one per (location text, tag).
void write_legacy_floor(const std::filesystem::path& file, const std::string& key,
                        const std::string& tag, std::uint64_t floor) {
  const std::string body = "flurry-segment-floor 1\nstore " + key + "\ntag " + tag + "\nfloor " +
                           std::to_string(floor) + "\ndelta 1\nremainder 0\n";
  char check[17];
  std::snprintf(check, sizeof check, "%016llx",
                static_cast<unsigned long long>(internal::fnv1a64(body)));
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file) << body << "check " << check << "\n";
}

class SegmentFloorTest : public ::testing::Test {
 protected:
  // A service over the SQLite files `files` (in dir_), floors in dir_/floors.
  std::unique_ptr<SegmentService> open(const std::vector<std::string>& files,
                                       SegmentOptions options = {}) {
    std::vector<std::unique_ptr<SegmentStore>> stores;
    for (const std::string& f : files) stores.push_back(sqlite_store(dir_.path() / f));
    if (options.floor_dir.empty()) options.floor_dir = dir_.path() / "floors";
    options.max_wait = milliseconds(100);
    options.on_store_regressed = [this](const Status& st) {
      std::lock_guard lock(mu_);
      reported_.push_back(st);
    };
    Result<std::unique_ptr<SegmentService>> svc =
        SegmentService::create(std::move(stores), std::move(options), Clocks{wall_, mono_});
    EXPECT_TRUE(svc.ok()) << svc.status().to_string();
    return svc.ok() ? std::move(*svc) : nullptr;
  }

  static SegmentTagSpec spec(std::uint64_t start, std::uint64_t step, std::uint64_t delta = 1,
                             std::uint64_t remainder = 0) {
    SegmentTagSpec s;
    s.tag = "t";
    s.start = start;
    s.step = step;
    s.delta = delta;
    s.remainder = remainder;
    return s;
  }

  void create(const std::string& file, const SegmentTagSpec& s) {
    auto store = sqlite_store(dir_.path() / file);
    ASSERT_TRUE(store->create_tag(s).ok());
  }

  // Takes every ID the tag's buffers hold, all recorded in `seen_`: every one must be new.
  void drain(SegmentService& svc) {
    ASSERT_TRUE(eventually([&] {
      Result<SegmentTagState> st = svc.inspect("t");
      return st.ok() && !st->fetching;
    }));
    const std::uint64_t left = svc.inspect("t")->remaining;
    if (left == 0) return;
    std::vector<std::uint64_t> ids(left);
    ASSERT_TRUE(svc.next(seg_tag("t"), count_of(ids.size()), ids).ok());
    for (std::uint64_t id : ids) EXPECT_TRUE(seen_.insert(id).second) << "issued twice: " << id;
    // Taking them may have started a prefetch: let it land, so the store's max_id is final.
    ASSERT_TRUE(eventually([&] { return !svc.inspect("t")->fetching; }));
  }

  void take(SegmentService& svc, std::size_t n) {
    std::vector<std::uint64_t> ids(n);
    const Status st = svc.next(seg_tag("t"), count_of(ids.size()), ids);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (std::uint64_t id : ids) EXPECT_TRUE(seen_.insert(id).second) << "issued twice: " << id;
  }

  // Once the buffers are used up, the store below the floor is refused: STORE_REGRESSED (503).
  // IDs still in the buffers (a prefetch may have landed before the store was moved back) are
  // taken first, every one unique.
  void expect_refused(SegmentService& svc, std::string_view names = "") {
    std::vector<std::uint64_t> one(1, 0);
    Status st;
    for (int i = 0; i < 100000; ++i) {
      one[0] = 0;
      st = svc.next(seg_tag("t"), count_of(one.size()), one);
      if (st.ok()) {
        EXPECT_TRUE(seen_.insert(one[0]).second) << "issued twice: " << one[0];
        continue;
      }
      if (st.reason() == Reason::kStoreRegressed) break;
      mono_.advance(std::chrono::seconds(3));  // past the retry's backoff
    }
    EXPECT_EQ(st.reason(), Reason::kStoreRegressed) << st.to_string();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable);
    EXPECT_TRUE(st.retryable());
    if (!names.empty()) {
      EXPECT_NE(st.message().find(names), std::string::npos) << st.message();
    }
    EXPECT_EQ(one[0], 0u);
  }

  // After a repair, the tag serves again once the retry's backoff has passed.
  void expect_recovered(SegmentService& svc, std::uint64_t at_least) {
    std::vector<std::uint64_t> one(1);
    Status st = svc.next(seg_tag("t"), count_of(one.size()), one);
    for (int i = 0; i < 50 && !st.ok(); ++i) {
      mono_.advance(std::chrono::seconds(3));
      std::this_thread::sleep_for(milliseconds(2));
      st = svc.next(seg_tag("t"), count_of(one.size()), one);
    }
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_GE(one[0], at_least);
    EXPECT_TRUE(seen_.insert(one[0]).second) << one[0];
  }

  TempDir dir_;
  FakeClock wall_{TimePoint(std::chrono::seconds(1'800'000'000))};
  FakeMonotonicClock mono_;
  std::set<std::uint64_t> seen_;
  std::mutex mu_;
  std::vector<Status> reported_;
};

TEST_F(SegmentFloorTest, MaxIdMovedDownIsRefusedUntouchedThenServedAfterRepair) {
  create("s.db", spec(1, 10));
  auto svc = open({"s.db"});
  take(*svc, 25);
  drain(*svc);
  const auto store = sqlite_store(dir_.path() / "s.db");
  const std::uint64_t floor = max_id_of(*store, "t");
  exec(dir_.path() / "s.db", "UPDATE leaf_alloc SET max_id = 1");
  expect_refused(*svc, "max_id 1, below " + std::to_string(floor));
  // Nothing was written to the store: it stays as the operator left it.
  EXPECT_EQ(max_id_of(*store, "t"), 1u);
  EXPECT_GE(svc->inspect("t")->store_regressed, 1u);
  {
    std::lock_guard lock(mu_);
    ASSERT_FALSE(reported_.empty());
    EXPECT_EQ(reported_.front().reason(), Reason::kStoreRegressed);
  }
  // Still refused a little below the floor; served from the floor on.
  exec(dir_.path() / "s.db", "UPDATE leaf_alloc SET max_id = " + std::to_string(floor - 1));
  expect_refused(*svc);
  exec(dir_.path() / "s.db", "UPDATE leaf_alloc SET max_id = " + std::to_string(floor));
  expect_recovered(*svc, floor);
}

TEST_F(SegmentFloorTest, RestoredBackupIsRefusedAcrossARestart) {
  create("s.db", spec(1, 100));
  {
    auto svc = open({"s.db"});
    take(*svc, 10);
  }
  std::filesystem::copy_file(dir_.path() / "s.db", dir_.path() / "backup.db");
  {
    auto svc = open({"s.db"});
    take(*svc, 500);
    drain(*svc);
  }
  std::filesystem::copy_file(dir_.path() / "backup.db", dir_.path() / "s.db",
                             std::filesystem::copy_options::overwrite_existing);
  auto svc = open({"s.db"});  // a restart: the floor comes from the host-local file
  expect_refused(*svc, "went backwards");
}

TEST_F(SegmentFloorTest, DeletedTagAndDeletedFileAreRefusedNotRecreatedFromOne) {
  create("s.db", spec(1, 10));
  {
    auto svc = open({"s.db"});
    take(*svc, 30);
    drain(*svc);
    // The tag's row deleted while serving.
    exec(dir_.path() / "s.db", "DELETE FROM leaf_alloc WHERE biz_tag = 't'");
    expect_refused(*svc, "is gone from it");
  }
  // A restart: the tag is in no store, but this host gave out its IDs: 503, not 404.
  {
    auto svc = open({"s.db"});
    std::vector<std::uint64_t> one(1);
    const Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
    EXPECT_EQ(st.reason(), Reason::kStoreRegressed) << st.to_string();
  }
  // segments.db deleted and the tag created again from 1: refused, never served from 1.
  std::filesystem::remove(dir_.path() / "s.db");
  create("s.db", spec(1, 10));
  auto svc = open({"s.db"});
  expect_refused(*svc, "max_id 1");
  const std::uint64_t floor = *seen_.rbegin() + 1;
  exec(dir_.path() / "s.db", "UPDATE leaf_alloc SET max_id = " + std::to_string(floor + 1000));
  expect_recovered(*svc, floor);
}

TEST_F(SegmentFloorTest, CorruptFloorFileIsRefusedNeverReadAsNothing) {
  create("s.db", spec(1, 10));
  {
    auto svc = open({"s.db"});
    take(*svc, 5);
  }
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path() / "floors")) {
    if (e.path().filename().string().starts_with("floors-")) {
      std::ofstream(e.path()) << "floor 0\n";
      ++files;
    }
  }
  ASSERT_EQ(files, 1u);  // the tag's file: under the store ID and under the file's real path
  auto svc = open({"s.db"});
  std::vector<std::uint64_t> one(1);
  Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
  for (int i = 0; i < 20 && st.ok(); ++i) st = svc->next(seg_tag("t"), count_of(one.size()), one);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("segment store floor"), std::string::npos) << st.to_string();
}

TEST_F(SegmentFloorTest, ResiduesMustBeProvenAcrossStoresInAnyOrder) {
  // Created in each store on its own: delta 1 each (no residue rows).
  create("a.db", spec(1, 10));
  create("b.db", spec(1, 10));
  for (const auto& order :
       {std::vector<std::string>{"a.db", "b.db"}, std::vector<std::string>{"b.db", "a.db"}}) {
    auto svc = open(order);
    std::vector<std::uint64_t> one(1);
    const Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
    EXPECT_NE(st.message().find("a.db"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("b.db"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("below the number of stores"), std::string::npos);
  }
}

TEST_F(SegmentFloorTest, SameRemainderOrDifferentDeltasAreRefused) {
  create("a.db", spec(1, 10, 2, 1));
  create("b.db", spec(1, 10, 2, 1));
  {
    auto svc = open({"a.db", "b.db"});
    std::vector<std::uint64_t> one(1);
    const Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
    EXPECT_NE(st.message().find("share remainder 1"), std::string::npos) << st.message();
  }
  exec(dir_.path() / "b.db", "UPDATE flurry_segment_residues SET delta = 3, remainder = 0");
  auto svc = open({"b.db", "a.db"});
  std::vector<std::uint64_t> one(1);
  const Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
  EXPECT_NE(st.message().find("one delta"), std::string::npos) << st.message();
}

TEST_F(SegmentFloorTest, ProvenResiduesServeInEitherOrderAndAreCheckedAtEveryRange) {
  create("a.db", spec(1, 10, 2, 0));
  create("b.db", spec(1, 10, 2, 1));
  {
    auto svc = open({"b.db", "a.db"});  // the reverse of the remainders: order does not matter
    take(*svc, 30);
    for (std::uint64_t id : seen_) EXPECT_EQ(id % 2, 1u);
    drain(*svc);
    // A store's residue changed behind the node's back: its next range is refused (it now
    // shares remainder 0 with store a), and store a carries the tag.
    exec(dir_.path() / "b.db", "UPDATE flurry_segment_residues SET remainder = 0");
    const std::uint64_t errors_before = svc->inspect("t")->store_errors;
    std::vector<std::uint64_t> one(1);
    bool even = false;
    for (int i = 0; i < 10000 && !even; ++i) {
      const Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
      if (!st.ok()) {
        mono_.advance(std::chrono::seconds(3));
        continue;
      }
      EXPECT_TRUE(seen_.insert(one[0]).second) << "issued twice: " << one[0];
      even = one[0] % 2 == 0;
    }
    EXPECT_TRUE(even);
    EXPECT_GT(svc->inspect("t")->store_errors, errors_before);
  }
}

TEST_F(SegmentFloorTest, UnknownTagsCostOneStoreReadPerTtl) {
  SegmentOptions o;
  o.unknown_tag_ttl = milliseconds(1000);
  create("s.db", spec(1, 10));
  auto svc = open({"s.db"}, o);
  std::vector<std::uint64_t> one(1);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(svc->next(seg_tag("nope"), count_of(one.size()), one).code(), StatusCode::kNotFound);
    EXPECT_EQ(svc->stored_tag(seg_tag("nope")).status().code(), StatusCode::kNotFound);
  }
  EXPECT_EQ(svc->lookup_counts().store_reads, 1u);
  EXPECT_EQ(svc->lookup_counts().unknown_hits, 199u);
  // Even an event-loop caller gets the remembered answer without a store call.
  EXPECT_EQ(svc->next(seg_tag("nope"), count_of(one.size()), one, Blocking::kNever).code(),
            StatusCode::kNotFound);
  mono_.advance(milliseconds(1001));
  EXPECT_EQ(svc->next(seg_tag("nope"), count_of(one.size()), one).code(), StatusCode::kNotFound);
  EXPECT_EQ(svc->lookup_counts().store_reads, 2u);
  // Creating the tag here makes it known at once.
  SegmentTagSpec s = spec(1, 10);
  s.tag = "nope";
  ASSERT_TRUE(svc->create_tag(s).ok());
  EXPECT_TRUE(svc->next(seg_tag("nope"), count_of(one.size()), one).ok());
}

TEST_F(SegmentFloorTest, ConcurrentFirstLookupsOfOneTagShareOneRead) {
  create("s.db", spec(1, 10));
  auto svc = open({"s.db"});
  std::vector<std::future<Status>> callers;
  for (int i = 0; i < 16; ++i) {
    callers.push_back(std::async(std::launch::async, [&] {
      std::vector<std::uint64_t> one(1);
      return svc->next(seg_tag("missing"), count_of(one.size()), one);
    }));
  }
  for (auto& c : callers) EXPECT_EQ(c.get().code(), StatusCode::kNotFound);
  // One read by the first caller; the others waited for it or found it remembered.
  EXPECT_EQ(svc->lookup_counts().store_reads, 1u);
}

// A restored backup opened through other spellings of its path: the file's real path and its
// store ID both find the floor the first spelling left. (SQLite refuses paths through symbolic
// links, so spellings differ by "." and "..".)
TEST_F(SegmentFloorTest, AnotherSpellingOfTheFileFindsItsFloor) {
  create("s.db", spec(1, 10));
  std::filesystem::copy_file(dir_.path() / "s.db", dir_.path() / "backup.db");
  {
    auto svc = open({"s.db"});
    take(*svc, 35);
    drain(*svc);
  }
  std::filesystem::copy_file(dir_.path() / "backup.db", dir_.path() / "s.db",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::create_directory(dir_.path() / "sub");
  // One file, one identity, however the path is written.
  const SegmentStoreIdentity plain =
      *sqlite_store(dir_.path() / "s.db")->identity(Blocking::kNever);
  const SegmentStoreIdentity other =
      *sqlite_store(dir_.path() / "sub/.././s.db")->identity(Blocking::kNever);
  EXPECT_EQ(plain.address, "sqlite-file:" + (dir_.path() / "s.db").string());
  EXPECT_EQ(other.address, plain.address);
  EXPECT_EQ(other.store_id, plain.store_id);
  for (const char* spelling : {"sub/../s.db", "./s.db", "sub/.././s.db"}) {
    auto svc = open({spelling});
    expect_refused(*svc, "went backwards");
  }
  // A new, empty store in the file's place (its own store ID) is still refused by the path.
  std::filesystem::remove(dir_.path() / "s.db");
  create("s.db", spec(1, 10));
  auto svc = open({"sub/../s.db"});
  expect_refused(*svc, "max_id 1");
}

// A copy of the store at another path carries the store's ID: refused below the original's floor.
TEST_F(SegmentFloorTest, RestoredCopyAtAnotherPathIsFoundByItsStoreId) {
  create("s.db", spec(1, 10));
  std::filesystem::copy_file(dir_.path() / "s.db", dir_.path() / "copy.db");
  {
    auto svc = open({"s.db"});
    take(*svc, 25);
    drain(*svc);
  }
  const auto original = sqlite_store(dir_.path() / "s.db");
  const auto copy = sqlite_store(dir_.path() / "copy.db");
  const Result<SegmentStoreIdentity> a = original->identity(Blocking::kAllowed);
  const Result<SegmentStoreIdentity> b = copy->identity(Blocking::kAllowed);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->store_id, b->store_id);
  EXPECT_TRUE(internal::is_segment_store_id(a->store_id)) << a->store_id;
  EXPECT_NE(a->address, b->address);
  auto svc = open({"copy.db"});
  expect_refused(*svc, "went backwards");
  EXPECT_EQ(max_id_of(*copy, "t"), 1u);  // untouched
}

// Two stores of one service that are one store copied (one store ID) are refused, naming both.
TEST_F(SegmentFloorTest, TwoStoresWithOneStoreIdAreRefused) {
  create("a.db", spec(1, 10, 2, 0));
  std::filesystem::copy_file(dir_.path() / "a.db", dir_.path() / "b.db");
  exec(dir_.path() / "b.db", "UPDATE flurry_segment_residues SET remainder = 1");
  auto svc = open({"a.db", "b.db"});
  std::vector<std::uint64_t> one(1);
  const Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
  EXPECT_NE(st.message().find("carry one store ID"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("b.db"), std::string::npos) << st.message();
}

// The floors of a store are known host-wide: a process with another floor directory (another data
// directory), sharing only the host directory, is refused too; without it, it would not be.
TEST_F(SegmentFloorTest, HostWideFloorIsSeenThroughAnotherFloorDirectory) {
  std::filesystem::create_directory(dir_.path() / "host");
  Result<HostDir> host = HostDir::open(dir_.path() / "host");
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  create("s.db", spec(1, 10));
  std::filesystem::copy_file(dir_.path() / "s.db", dir_.path() / "backup.db");
  {
    SegmentOptions options;
    options.floor_dir = dir_.path() / "floors-a";
    options.host_dir = *host;
    auto svc = open({"s.db"}, options);
    take(*svc, 45);
    drain(*svc);
  }
  std::filesystem::copy_file(dir_.path() / "backup.db", dir_.path() / "s.db",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove_all(dir_.path() / "floors-a");  // the first data directory is gone
  {
    SegmentOptions options;
    options.floor_dir = dir_.path() / "floors-b";
    options.host_dir = *host;
    auto svc = open({"s.db"}, options);
    expect_refused(*svc, "went backwards");
  }
  {
    // The same without the host directory: nothing remembered, the store serves from 1 again.
    SegmentOptions options;
    options.floor_dir = dir_.path() / "floors-c";
    auto svc = open({"s.db"}, options);
    std::vector<std::uint64_t> one(1);
    ASSERT_TRUE(svc->next(seg_tag("t"), count_of(one.size()), one).ok());
    EXPECT_EQ(one[0], 1u);
  }
  // A corrupt host-wide floor is never read as "nothing remembered": refused, the file named.
  std::size_t corrupted = 0;
  for (const auto& e : std::filesystem::directory_iterator(host->own())) {
    if (e.path().filename().string().starts_with("segfloors-")) {
      std::filesystem::remove(e.path());
      std::ofstream(e.path()) << "garbage\n";
      ++corrupted;
    }
  }
  ASSERT_EQ(corrupted, 1u);
  exec(dir_.path() / "s.db", "UPDATE leaf_alloc SET max_id = 1000000");
  SegmentOptions options;
  options.floor_dir = dir_.path() / "floors-d";
  options.host_dir = *host;
  auto svc = open({"s.db"}, options);
  std::vector<std::uint64_t> one(1);
  const Status st = svc->next(seg_tag("t"), count_of(one.size()), one);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.to_string();
  EXPECT_NE(st.message().find(host->own().string()), std::string::npos) << st.message();
}

// Floors written by earlier versions, keyed by the location's text, still count after an upgrade;
// the next range is remembered under the store's identity.
TEST_F(SegmentFloorTest, FloorsKeyedByTheLocationTextStillCount) {
  create("s.db", spec(1, 10));
  const std::string text = "sqlite:" + (dir_.path() / "s.db").string();
  write_legacy_floor(internal::SegmentFloors(dir_.path() / "floors").path_for(text, "t"), text, "t",
                     5000);
  auto svc = open({"s.db"});
  expect_refused(*svc, "below 5000");
  exec(dir_.path() / "s.db", "UPDATE leaf_alloc SET max_id = 5000");
  expect_recovered(*svc, 5000);
  const auto store = sqlite_store(dir_.path() / "s.db");
  const internal::SegmentFloorKeys keys =
      internal::segment_floor_keys(*store->identity(Blocking::kNever), store->describe());
  ASSERT_EQ(keys.keys.size(), 2u);
  internal::SegmentFloors fresh(dir_.path() / "floors");
  for (const std::string& key : keys.keys) {
    EXPECT_GE(fresh.get({{key}, {}}, "t")->floor, 5010u) << key;
  }
}

// Two processes of one host share the floor directory: a floor never goes down, whoever writes
// last, and each sees the other's raise.
TEST(SegmentFloorsTest, ProcessesOfOneHostShareFloorsThatNeverGoDown) {
  TempDir dir;
  internal::SegmentFloors a(dir.path() / "floors");
  internal::SegmentFloors b(dir.path() / "floors");
  ASSERT_TRUE(a.raise(K("sqlite:/s.db"), "t", 1000, 2, 1).ok());
  ASSERT_TRUE(b.raise(K("sqlite:/s.db"), "t", 400, 2, 1).ok());  // b's older, lower range
  Result<internal::SegmentFloorEntry> got = b.get(K("sqlite:/s.db"), "t");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->floor, 1000u);
  EXPECT_EQ(got->delta, 2u);
  EXPECT_EQ(got->remainder, 1u);
  // Another store, another tag: nothing remembered.
  EXPECT_EQ(a.get(K("sqlite:/other.db"), "t")->floor, 0u);
  EXPECT_EQ(a.get(K("sqlite:/s.db"), "u")->floor, 0u);
  // A third process starting later reads it from the file.
  internal::SegmentFloors c(dir.path() / "floors");
  EXPECT_EQ(c.get(K("sqlite:/s.db"), "t")->floor, 1000u);
  // Memory only: nothing shared.
  internal::SegmentFloors mem({});
  EXPECT_EQ(mem.get(K("sqlite:/s.db"), "t")->floor, 0u);
  ASSERT_TRUE(mem.raise(K("sqlite:/s.db"), "t", 7, 1, 0).ok());
  EXPECT_EQ(mem.get(K("sqlite:/s.db"), "t")->floor, 7u);
  EXPECT_TRUE(mem.tag_path("t").empty());
  // A file written for another tag under this name is refused, never read as "no floor".
  std::filesystem::copy_file(a.tag_path("t"), a.tag_path("u"));
  Status st = a.get(K("sqlite:/s.db"), "u").status();
  EXPECT_EQ(st.reason(), Reason::kCorrupt) << st.to_string();
  // So is an earlier version's file of another store under this store's name.
  write_legacy_floor(a.path_for("sqlite:/s.db", "v"), "sqlite:/s.db", "v", 10);
  EXPECT_EQ(a.get(K("sqlite:/s.db"), "v")->floor, 10u);
  std::filesystem::copy_file(a.path_for("sqlite:/s.db", "v"), a.path_for("sqlite:/x.db", "v"));
  st = a.get(K("sqlite:/x.db"), "v").status();
  EXPECT_EQ(st.reason(), Reason::kCorrupt) << st.to_string();
}

// The cursor keeps 24 bits of the range's epoch; the check against the 64-bit epoch means a caller
// stalled across 2^24 range switches (or across the 4 of the record ring) never takes its
// claimed index as one of a live range.
TEST(SegmentCursorTest, TheEpochNeverWrapsOntoALiveRange) {
  using internal::segment_claim_is_current;
  using internal::segment_cursor_start;
  constexpr std::uint64_t kWrap = std::uint64_t{1} << 24;
  constexpr std::uint64_t kWriting = ~std::uint64_t{0};
  // An ordinary claim: index 3 of epoch 7.
  EXPECT_TRUE(segment_claim_is_current(7, segment_cursor_start(7) + 3, 7, 7));
  // Past the 24-bit wrap the cursor's bits repeat, and a current claim still works.
  EXPECT_EQ(segment_cursor_start(kWrap + 7), segment_cursor_start(7));
  EXPECT_TRUE(
      segment_claim_is_current(kWrap + 7, segment_cursor_start(kWrap + 7), kWrap + 7, kWrap + 7));
  // Stalled before its fetch_add across 2^24 switches: the cursor's bits match, the range does
  // not.
  EXPECT_FALSE(
      segment_claim_is_current(7, segment_cursor_start(kWrap + 7) + 3, kWrap + 7, kWrap + 7));
  // Stalled after its fetch_add across 4 switches: the record belongs to epoch 11 now.
  EXPECT_FALSE(segment_claim_is_current(7, segment_cursor_start(7) + 3, 11, 11));
  // The record being rewritten, or rewritten between the two reads of its stamp.
  EXPECT_FALSE(segment_claim_is_current(7, segment_cursor_start(7), kWriting, kWriting));
  EXPECT_FALSE(segment_claim_is_current(7, segment_cursor_start(7), 7, 11));
  // A switch under way: the cursor moved to epoch 8 before the caller saw 8 published.
  EXPECT_FALSE(segment_claim_is_current(7, segment_cursor_start(8), 8, 8));
  // The index never reaches the epoch bits (ranges hold at most 2^38 IDs, callers stop at 2^39).
  static_assert((internal::kSegmentIndexMask >> 39) == 1);
}

TEST(SegmentTagNameTest, DotAndDotDotAreRefused) {
  for (const char* bad : {".", ".."}) {
    const Status st = SegmentTag::of(bad).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("not tag names"), std::string::npos) << st.message();
  }
  EXPECT_TRUE(SegmentTag::of("...").ok());
  EXPECT_TRUE(SegmentTag::of(".a").ok());
}

}  // namespace
}  // namespace flurry

// Node registries on real files: the SQLite registry (claims, fencing, expiry, horizon hand-off,
// failures of the database file), the static registry (file lock, state file) and pod ordinals.
// Lease times run on a fake clock; every database is a real SQLite file in a temporary directory.
#include "flurry/registry.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/timefmt.h"
#include "test_store.h"

namespace flurry {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::FakeClock;
using testing::TempDir;

constexpr std::string_view kLayoutText =
    "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";

TimePoint at(std::string_view iso) {
  return parse_time(iso).value();
}

HorizonRecord record_for(std::uint64_t node, std::int64_t horizon) {
  return HorizonRecord{std::string(kLayoutText), node, 0, {horizon}};
}

// Runs one SQL statement on the database directly, as an operator (or a bug) might.
void sql(const fs::path& db_path, const std::string& statement, const std::string& text = "") {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, statement.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  if (sqlite3_bind_parameter_count(stmt) > 0) {
    sqlite3_bind_text(stmt, 1, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  EXPECT_EQ(sqlite3_step(stmt), SQLITE_DONE) << sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

class SqliteRegistryTest : public ::testing::Test {
 protected:
  SqliteRegistryTest() : clock_(at("2026-01-01T00:00:00Z")), db_(dir_.path() / "registry.db") {}

  std::unique_ptr<NodeRegistry> open(std::chrono::milliseconds ttl = 10s) {
    Result<std::unique_ptr<NodeRegistry>> r =
        open_sqlite_registry(db_.string(), ttl, clock_, kLayoutText);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  static Claim claim(NodeRegistry& registry, std::string_view owner, std::uint64_t count = 16) {
    Result<Claim> c = registry.claim(owner, count);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(c).value() : Claim{};
  }

  static void expect_lease_lost(const Status& st) {
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.to_string();
    EXPECT_EQ(st.reason(), Reason::kLeaseLost) << st.to_string();
  }

  TempDir dir_;
  FakeClock clock_;
  fs::path db_;
};

TEST_F(SqliteRegistryTest, ClaimsTheLowestFreeNodeAcrossRegistryObjects) {
  auto first = open();
  auto second = open();  // another process on the same file
  const Claim a = claim(*first, "host:1");
  EXPECT_EQ(a.lease.node, 0u);
  EXPECT_EQ(a.lease.token, 1u);
  EXPECT_EQ(a.lease.owner, "host:1");
  EXPECT_EQ(a.lease.ttl, 10s);
  EXPECT_FALSE(a.inherited.has_value());
  const Claim b = claim(*second, "host:2");
  EXPECT_EQ(b.lease.node, 1u);
  EXPECT_EQ(b.lease.token, 1u);
  EXPECT_EQ(claim(*first, "host:1").lease.node, 2u);
  EXPECT_EQ(first->describe(), "sqlite:" + db_.string());
}

TEST_F(SqliteRegistryTest, ReleaseFreesTheNodeAndKeepsItsHorizon) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  ASSERT_EQ(a.lease.node, 0u);
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(0, 123456)).ok());
  ASSERT_TRUE(registry->release(a.lease).ok());

  const Claim b = claim(*open(), "b");
  EXPECT_EQ(b.lease.node, 0u);
  EXPECT_GT(b.lease.token, a.lease.token);
  ASSERT_TRUE(b.inherited.has_value());
  EXPECT_EQ(*b.inherited, record_for(0, 123456));

  // The released lease is gone for its old holder.
  expect_lease_lost(registry->renew(a.lease));
  expect_lease_lost(registry->save_horizon(a.lease, record_for(0, 999999)));
}

TEST_F(SqliteRegistryTest, TokensIncreaseOnEveryClaimOfANode) {
  auto registry = open();
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    const Claim c = claim(*registry, "a");
    EXPECT_EQ(c.lease.node, 0u);
    EXPECT_GT(c.lease.token, last);
    last = c.lease.token;
    ASSERT_TRUE(registry->release(c.lease).ok());
  }
}

TEST_F(SqliteRegistryTest, ExpiredLeaseGoesToAnotherOwnerAndFencesTheOldOne) {
  auto old_registry = open();
  auto new_registry = open();
  const Claim old_claim = claim(*old_registry, "old:1");
  ASSERT_TRUE(old_registry->save_horizon(old_claim.lease, record_for(0, 1000)).ok());

  clock_.advance(9999ms);  // not yet expired
  EXPECT_EQ(claim(*new_registry, "probe").lease.node, 1u);
  clock_.advance(1ms);  // expires_ms <= now: free
  const Claim new_claim = claim(*new_registry, "new:2");
  ASSERT_EQ(new_claim.lease.node, 0u);
  EXPECT_EQ(new_claim.lease.token, old_claim.lease.token + 1);
  ASSERT_TRUE(new_claim.inherited.has_value());
  EXPECT_EQ(*new_claim.inherited, record_for(0, 1000));

  const Status renew = old_registry->renew(old_claim.lease);
  expect_lease_lost(renew);
  EXPECT_NE(renew.message().find("node 0 was claimed by another owner"), std::string::npos)
      << renew.message();
  EXPECT_NE(renew.message().find("token 2 > 1"), std::string::npos) << renew.message();
  EXPECT_NE(renew.message().find("new:2"), std::string::npos) << renew.message();
  expect_lease_lost(old_registry->save_horizon(old_claim.lease, record_for(0, 5000)));
  expect_lease_lost(old_registry->release(old_claim.lease));

  EXPECT_TRUE(new_registry->renew(new_claim.lease).ok());
  EXPECT_TRUE(new_registry->save_horizon(new_claim.lease, record_for(0, 2000)).ok());
  EXPECT_TRUE(new_registry->release(new_claim.lease).ok());
  // The old owner's refused save left no trace: the next owner inherits the new owner's record.
  const Claim third = claim(*old_registry, "third:3");
  EXPECT_EQ(third.lease.node, 0u);
  ASSERT_TRUE(third.inherited.has_value());
  EXPECT_EQ(*third.inherited, record_for(0, 2000));
}

TEST_F(SqliteRegistryTest, ClaimInheritsExactlyTheSavedRecord) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  HorizonRecord record{"time:41@1ms,clock:4,worker:8,seq:10;epoch=2025-01-01T00:00:00.000Z",
                       0,
                       3,
                       {-1, 5, 77, 123456789012, -1, 0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1}};
  ASSERT_TRUE(registry->save_horizon(a.lease, record).ok());
  record.horizons[3] = 123456789999;  // the last save wins
  ASSERT_TRUE(registry->save_horizon(a.lease, record).ok());
  clock_.advance(1h);  // the process died without releasing
  const Claim b = claim(*open(), "b");
  ASSERT_EQ(b.lease.node, 0u);
  ASSERT_TRUE(b.inherited.has_value());
  EXPECT_EQ(*b.inherited, record);
}

TEST_F(SqliteRegistryTest, RenewAfterExpiryTakesTheNodeBackIfNobodyClaimedIt) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  clock_.advance(30s);
  EXPECT_TRUE(registry->renew(a.lease).ok());
  // Renewed from now: the node is not free to others.
  EXPECT_EQ(claim(*open(), "b").lease.node, 1u);
  clock_.advance(9s);
  EXPECT_EQ(claim(*open(), "c").lease.node, 2u);
  EXPECT_TRUE(registry->save_horizon(a.lease, record_for(0, 1)).ok());
}

TEST_F(SqliteRegistryTest, RenewChecksTheOwnerToo) {
  auto registry = open();
  Lease lease = claim(*registry, "a").lease;
  lease.owner = "impostor";
  const Status st = registry->renew(lease);
  expect_lease_lost(st);
  EXPECT_NE(st.message().find("\"impostor\""), std::string::npos) << st.message();
}

TEST_F(SqliteRegistryTest, NoFreeNodeIsResourceExhausted) {
  auto registry = open();
  EXPECT_EQ(claim(*registry, "a", 2).lease.node, 0u);
  EXPECT_EQ(claim(*registry, "b", 2).lease.node, 1u);
  const Result<Claim> third = registry->claim("c", 2);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().reason(), Reason::kNoFreeNode);
  EXPECT_TRUE(third.status().retryable());
  EXPECT_NE(third.status().message().find("all 2 node IDs"), std::string::npos)
      << third.status().message();
  // A larger node count finds room above.
  EXPECT_EQ(claim(*registry, "c", 3).lease.node, 2u);
  EXPECT_EQ(registry->claim("d", 0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SqliteRegistryTest, FillsGapsBeforeGoingHigher) {
  auto registry = open();
  std::vector<Lease> leases;
  for (int i = 0; i < 5; ++i) leases.push_back(claim(*registry, "a").lease);
  ASSERT_TRUE(registry->release(leases[1]).ok());
  ASSERT_TRUE(registry->release(leases[3]).ok());
  EXPECT_EQ(claim(*registry, "b").lease.node, 1u);
  EXPECT_EQ(claim(*registry, "b").lease.node, 3u);
  EXPECT_EQ(claim(*registry, "b").lease.node, 5u);
}

TEST_F(SqliteRegistryTest, UnreadableHorizonFailsTheClaimWithDataLoss) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(0, 42)).ok());
  ASSERT_TRUE(registry->release(a.lease).ok());
  sql(db_, "UPDATE nodes SET horizon = 'flurry-horizon 1\nlayout x\n' WHERE node = 0");

  const Result<Claim> c = registry->claim("b", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss) << c.status().to_string();
  EXPECT_EQ(c.status().reason(), Reason::kCorrupt);
  EXPECT_NE(c.status().message().find("node 0"), std::string::npos) << c.status().message();

  // A record that parses but belongs to another node is refused too.
  sql(db_, "UPDATE nodes SET horizon = ?1 WHERE node = 0", format_horizon_record(record_for(5, 1)));
  EXPECT_EQ(registry->claim("b", 16).status().code(), StatusCode::kDataLoss);

  // The failed claims changed nothing: once repaired, node 0 is claimed with the next token.
  sql(db_, "UPDATE nodes SET horizon = ?1 WHERE node = 0", format_horizon_record(record_for(0, 7)));
  const Claim b = claim(*registry, "b");
  EXPECT_EQ(b.lease.node, 0u);
  EXPECT_EQ(b.lease.token, a.lease.token + 1);
  ASSERT_TRUE(b.inherited.has_value());
  EXPECT_EQ(*b.inherited, record_for(0, 7));
}

TEST_F(SqliteRegistryTest, SaveRejectsARecordForAnotherNode) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  EXPECT_EQ(registry->save_horizon(a.lease, record_for(3, 1)).code(), StatusCode::kInvalidArgument);
}

TEST_F(SqliteRegistryTest, MissingDirectoryIsAnError) {
  const fs::path path = dir_.path() / "missing" / "registry.db";
  const auto r = open_sqlite_registry(path.string(), 10s, clock_, kLayoutText);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_EQ(r.status().reason(), Reason::kIo);
  EXPECT_NE(r.status().message().find(path.string()), std::string::npos) << r.status().message();
}

// A directory belongs to one kind of registry: each would not see the other's horizons.
TEST_F(SqliteRegistryTest, DirectoryOfStaticNodesIsRefused) {
  {
    auto st = open_static_registry(dir_.path().string(), 4, kLayoutText);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    Result<Claim> c = (*st)->claim("static", 1024);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    HorizonRecord r{"flurry", 4, 0, {77}};
    ASSERT_TRUE((*st)->save_horizon(c->lease, r).ok());
    ASSERT_TRUE((*st)->release(c->lease).ok());
  }
  auto sqlite = open_sqlite_registry(db_.string(), 10s, clock_, kLayoutText);
  ASSERT_FALSE(sqlite.ok());
  EXPECT_EQ(sqlite.status().reason(), Reason::kStateMismatch);
  EXPECT_NE(sqlite.status().message().find("horizon-node-4.state"), std::string::npos)
      << sqlite.status().message();
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(SqliteRegistryTest, StaticNodeInARegistryDirectoryIsRefused) {
  ASSERT_TRUE(open_sqlite_registry(db_.string(), 10s, clock_, kLayoutText).ok());
  auto st = open_static_registry(dir_.path().string(), 0, kLayoutText);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().reason(), Reason::kStateMismatch);
  EXPECT_NE(st.status().message().find("registry.db"), std::string::npos) << st.status().message();
}

TEST_F(SqliteRegistryTest, BadArgumentsAreRejected) {
  EXPECT_EQ(open_sqlite_registry(db_.string(), 0ms, clock_, kLayoutText).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(open_sqlite_registry("", 10s, clock_, kLayoutText).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(open_sqlite_registry(":memory:", 10s, clock_, kLayoutText).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(SqliteRegistryTest, FileThatIsNotADatabaseIsDataLoss) {
  {
    std::ofstream out(db_);
    for (int i = 0; i < 100; ++i) out << "this is not a database file, it is a text file\n";
  }
  const auto r = open_sqlite_registry(db_.string(), 10s, clock_, kLayoutText);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().to_string();
  EXPECT_EQ(r.status().reason(), Reason::kCorrupt);
}

// A directory on the database's path that turns into a regular file: every next operation
// fails (whoever runs the test, root included), and works again once the path is restored.
TEST_F(SqliteRegistryTest, UnreachableFileFailsTheNextOperation) {
  const fs::path sub = dir_.path() / "sub";
  fs::create_directory(sub);
  db_ = sub / "registry.db";
  auto registry = open();
  const Claim a = claim(*registry, "a");

  fs::rename(sub, dir_.path() / "moved");
  { std::ofstream(sub) << "a regular file\n"; }
  for (const Status& st :
       {registry->renew(a.lease), registry->save_horizon(a.lease, record_for(0, 1)),
        registry->claim("b", 16).status()}) {
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
    EXPECT_EQ(st.reason(), Reason::kIo) << st.to_string();
    EXPECT_TRUE(st.retryable());
    EXPECT_NE(st.message().find(db_.string()), std::string::npos) << st.message();
  }

  fs::remove(sub);
  fs::rename(dir_.path() / "moved", sub);
  EXPECT_TRUE(registry->renew(a.lease).ok());
}

TEST_F(SqliteRegistryTest, DatabaseReplacedByADirectoryFailsTheNextOperation) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db_.string() + suffix);
  fs::create_directory(db_);
  const Status st = registry->renew(a.lease);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(db_.string()), std::string::npos) << st.to_string();

  // A database file that disappeared is not replaced by an empty one behind the owners' backs.
  fs::remove(db_);
  const Status gone = registry->renew(a.lease);
  EXPECT_EQ(gone.code(), StatusCode::kUnavailable) << gone.to_string();
  EXPECT_EQ(gone.reason(), Reason::kIo) << gone.to_string();
  EXPECT_FALSE(fs::exists(db_));
}

TEST_F(SqliteRegistryTest, ConcurrentClaimsGetDifferentNodes) {
  open();  // creates the file
  constexpr int kPerThread = 8;
  std::vector<std::uint64_t> nodes[2];
  std::vector<std::string> errors[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      auto r = open_sqlite_registry(db_.string(), 10s, clock_, kLayoutText);
      if (!r.ok()) {
        errors[t].push_back(r.status().to_string());
        return;
      }
      for (int i = 0; i < kPerThread; ++i) {
        Result<Claim> c = (*r)->claim("thread:" + std::to_string(t), 64);
        if (c.ok()) {
          nodes[t].push_back(c->lease.node);
        } else {
          errors[t].push_back(c.status().to_string());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_TRUE(e.empty()) << e.front();
  std::set<std::uint64_t> all(nodes[0].begin(), nodes[0].end());
  all.insert(nodes[1].begin(), nodes[1].end());
  EXPECT_EQ(all.size(), nodes[0].size() + nodes[1].size());
  EXPECT_EQ(all.size(), 2u * kPerThread);
  EXPECT_EQ(*all.rbegin(), 2u * kPerThread - 1);
}

// The whole point: a generator on a node whose process died, then a new owner whose clock is
// behind. Every ID the new owner issues is above every ID the old one issued, even those the
// cut-off old owner keeps issuing after the node changed hands.
TEST_F(SqliteRegistryTest, NewOwnerOfADeadNodeIssuesAboveEveryOldId) {
  const Layout layout = Layout::parse("flurry").value();
  FakeClock clock_a(at("2026-03-01T00:00:00Z"));
  FakeClock clock_b(at("2026-03-01T00:00:00Z"));
  GeneratorOptions options;
  options.background_horizon = false;

  auto registry_a = open();
  const Claim claim_a = claim(*registry_a, "a:1", layout.node_count());
  ASSERT_EQ(claim_a.lease.node, 0u);
  LeasedHorizonStore store_a(*registry_a, claim_a);
  EXPECT_EQ(store_a.describe(), "sqlite:" + db_.string() + " (node 0, token 1)");
  EXPECT_EQ(store_a.load().status().code(), StatusCode::kNotFound);
  auto gen_a = Generator::create(layout, options, clock_a, store_a);
  ASSERT_TRUE(gen_a.ok()) << gen_a.status().to_string();

  std::vector<std::uint64_t> old_ids;
  for (int i = 0; i < 5000; ++i) {
    if (i == 2500) clock_a.advance(1500ms);  // the horizon moves on through the registry
    Result<std::uint64_t> id = (*gen_a)->next();
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    old_ids.push_back(*id);
  }
  ASSERT_TRUE(store_a.load().ok());  // the last saved record

  // Process A is cut off: its lease expires, process B gets node 0 with A's horizon.
  clock_.advance(11s);
  auto registry_b = open();
  const Claim claim_b = claim(*registry_b, "b:2", layout.node_count());
  ASSERT_EQ(claim_b.lease.node, 0u);
  ASSERT_TRUE(claim_b.inherited.has_value());
  EXPECT_EQ(*claim_b.inherited, store_a.load().value());

  clock_b.set(clock_a.now() - 500ms);  // B's clock is behind A's
  LeasedHorizonStore store_b(*registry_b, claim_b);
  auto gen_b = Generator::create(layout, options, clock_b, store_b);
  ASSERT_TRUE(gen_b.ok()) << gen_b.status().to_string();

  // A keeps issuing below the horizon it had made durable, but can no longer extend it.
  for (int i = 0; i < 1000; ++i) {
    Result<std::uint64_t> id = (*gen_a)->next();
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    old_ids.push_back(*id);
  }
  clock_a.advance(5s);
  const Result<std::uint64_t> refused = (*gen_a)->next();
  ASSERT_FALSE(refused.ok());
  // The registry refused the write for good: the generator passes its code and reason on (not
  // just "not persisted"), so the caller sees that the lease is gone.
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition)
      << refused.status().to_string();
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseLost) << refused.status().to_string();
  EXPECT_TRUE(is_lease_gone(refused.status()));

  std::vector<std::uint64_t> new_ids;
  for (int i = 0; i < 5000; ++i) {
    Result<std::uint64_t> id = (*gen_b)->next();
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    new_ids.push_back(*id);
  }
  EXPECT_LT(*std::max_element(old_ids.begin(), old_ids.end()),
            *std::min_element(new_ids.begin(), new_ids.end()));
  EXPECT_TRUE(std::is_sorted(new_ids.begin(), new_ids.end()));
  for (std::uint64_t id : new_ids) EXPECT_EQ(layout.decompose(id).value().node, 0u);
  EXPECT_FALSE((*gen_a)->close().ok());  // its tight final save is fenced off too
  EXPECT_TRUE((*gen_b)->close().ok());
}

// ---- one layout per registry, and registries that go backwards ----

constexpr std::string_view kOtherLayout =
    "time:41@1ms,seq:12,node:10;epoch=2025-01-01T00:00:00.000Z";

TEST_F(SqliteRegistryTest, BelongsToTheLayoutItWasFirstOpenedWith) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  auto other = open_sqlite_registry(db_.string(), 10s, clock_, kOtherLayout);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.status().reason(), Reason::kStateMismatch);
  EXPECT_NE(other.status().message().find(std::string(kLayoutText)), std::string::npos)
      << other.status().message();
  EXPECT_NE(other.status().message().find(std::string(kOtherLayout)), std::string::npos)
      << other.status().message();
  // Checked again at every claim: a file replaced by another layout's registry is refused too.
  sql(db_, "UPDATE meta SET value = ?1 WHERE key = 'layout'", std::string(kOtherLayout));
  Result<Claim> c = registry->claim("b", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().reason(), Reason::kStateMismatch) << c.status().to_string();
  (void)a;
}

TEST_F(SqliteRegistryTest, RegistryFromBeforeLayoutsWereRecordedIsCheckedByItsHorizons) {
  {
    auto registry = open();
    const Claim a = claim(*registry, "a");
    ASSERT_TRUE(registry->save_horizon(a.lease, record_for(0, 42)).ok());
    ASSERT_TRUE(registry->release(a.lease).ok());
  }
  sql(db_, "DROP TABLE meta");
  auto other = open_sqlite_registry(db_.string(), 10s, clock_, kOtherLayout);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("the horizon of node 0 says so"), std::string::npos)
      << other.status().message();
  EXPECT_TRUE(open_sqlite_registry(db_.string(), 10s, clock_, kLayoutText).ok());
}

TEST_F(SqliteRegistryTest, VanishedRowIsARegressionNotJustALostLease) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  sql(db_, "DELETE FROM nodes");
  const Status renew = registry->renew(a.lease);
  EXPECT_EQ(renew.code(), StatusCode::kFailedPrecondition) << renew.to_string();
  EXPECT_EQ(renew.reason(), Reason::kRegistryRegressed) << renew.to_string();
  EXPECT_TRUE(is_lease_gone(renew));
  EXPECT_EQ(registry->save_horizon(a.lease, record_for(0, 7)).reason(), Reason::kRegistryRegressed);
}

// After a vanished row the next claim starts at token 1 again: its first save must not be
// compared with what the lost lease saved under the same number.
TEST_F(SqliteRegistryTest, ClaimAfterAVanishedRowStartsAFreshBaseline) {
  auto registry = open();
  const Claim first = claim(*registry, "a");
  ASSERT_TRUE(registry->save_horizon(first.lease, record_for(0, 5000)).ok());
  sql(db_, "DELETE FROM nodes");
  const Claim second = claim(*registry, "a");
  ASSERT_EQ(second.lease.token, first.lease.token);
  const Status save = registry->save_horizon(second.lease, record_for(0, 6000));
  EXPECT_TRUE(save.ok()) << save.to_string();
}

TEST_F(SqliteRegistryTest, TokenBelowTheLeaseIsARegression) {
  auto registry = open();
  const Claim first = claim(*registry, "a");
  ASSERT_TRUE(registry->release(first.lease).ok());
  const Claim second = claim(*registry, "a");
  ASSERT_EQ(second.lease.token, 2u);
  sql(db_, "UPDATE nodes SET token = 1");  // as a copy of the file from before the second claim
  const Status renew = registry->renew(second.lease);
  EXPECT_EQ(renew.reason(), Reason::kRegistryRegressed) << renew.to_string();
  EXPECT_NE(renew.message().find("below this lease's 2"), std::string::npos) << renew.message();
}

TEST_F(SqliteRegistryTest, HorizonRestoredBelowTheLastSaveIsARegression) {
  auto registry = open();
  const Claim a = claim(*registry, "a");
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(0, 1000)).ok());
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(0, 2000)).ok());
  // A copy of the file restored from when the horizon was 1000: same token, older horizon.
  sql(db_, "UPDATE nodes SET horizon = ?1", format_horizon_record(record_for(0, 1000)));
  EXPECT_TRUE(registry->renew(a.lease).ok());  // the lease itself looks fine
  const Status save = registry->save_horizon(a.lease, record_for(0, 3000));
  EXPECT_EQ(save.code(), StatusCode::kFailedPrecondition) << save.to_string();
  EXPECT_EQ(save.reason(), Reason::kRegistryRegressed) << save.to_string();
  EXPECT_NE(save.message().find("horizon 1000"), std::string::npos) << save.message();
  EXPECT_NE(save.message().find("horizon 2000"), std::string::npos) << save.message();
  // Lowering its own horizon (a tight close) is not a regression.
  sql(db_, "UPDATE nodes SET horizon = ?1", format_horizon_record(record_for(0, 2000)));
  EXPECT_TRUE(registry->save_horizon(a.lease, record_for(0, 1500)).ok());
}

// ---- static registry ----

class StaticRegistryTest : public ::testing::Test {
 protected:
  std::unique_ptr<NodeRegistry> open(std::uint64_t node) {
    auto r = open_static_registry((dir_.path() / "state").string(), node, kLayoutText);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  TempDir dir_;
};

TEST_F(StaticRegistryTest, ClaimReturnsTheNodeWithItsFileHorizon) {
  auto registry = open(7);
  const fs::path file = FileHorizonStore::path_for(dir_.path() / "state", 7);
  EXPECT_EQ(registry->describe(), "static:" + file.string());
  const Result<Claim> first = registry->claim("a", 1024);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_EQ(first->lease.node, 7u);
  EXPECT_EQ(first->lease.token, 1u);
  EXPECT_FALSE(first->inherited.has_value());
  EXPECT_TRUE(registry->renew(first->lease).ok());
  ASSERT_TRUE(registry->save_horizon(first->lease, record_for(7, 99)).ok());
  EXPECT_TRUE(fs::exists(file));
  EXPECT_EQ(registry->save_horizon(first->lease, record_for(6, 99)).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry->release(first->lease).ok());
  EXPECT_EQ(registry->save_horizon(first->lease, record_for(7, 100)).reason(), Reason::kLeaseLost);

  const Result<Claim> again = open(7)->claim("b", 1024);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_TRUE(again->inherited.has_value());
  EXPECT_EQ(*again->inherited, record_for(7, 99));
}

TEST_F(StaticRegistryTest, SecondClaimOfTheSameNodeFailsWhileTheFirstHoldsIt) {
  auto first = open(3);
  auto second = open(3);
  const Result<Claim> held = first->claim("host:100", 1024);
  ASSERT_TRUE(held.ok()) << held.status().to_string();
  const Result<Claim> refused = second->claim("host:200", 1024);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().reason(), Reason::kNoFreeNode);
  const std::string& msg = refused.status().message();
  EXPECT_NE(msg.find("node 3 is already in use by another process on this host"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("held by \"host:100\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("horizon-node-3.state.lock"), std::string::npos) << msg;
  // Another node is independent.
  EXPECT_TRUE(open(4)->claim("host:200", 1024).ok());

  ASSERT_TRUE(first->release(held->lease).ok());
  EXPECT_TRUE(second->claim("host:200", 1024).ok());
}

TEST_F(StaticRegistryTest, DestroyingTheRegistryDropsTheLock) {
  {
    auto first = open(3);
    ASSERT_TRUE(first->claim("a", 16).ok());
  }
  EXPECT_TRUE(open(3)->claim("b", 16).ok());
}

TEST_F(StaticRegistryTest, NodeOutsideTheLayoutIsInvalid) {
  const Result<Claim> c = open(16)->claim("a", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("0-15"), std::string::npos) << c.status().message();
}

TEST_F(StaticRegistryTest, CorruptStateFileFailsTheClaim) {
  auto registry = open(2);
  fs::create_directories(dir_.path() / "state");
  std::ofstream(FileHorizonStore::path_for(dir_.path() / "state", 2)) << "garbage\n";
  const Result<Claim> c = registry->claim("a", 16);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(c.status().reason(), Reason::kCorrupt);
  // The failed claim did not keep the lock.
  fs::remove(FileHorizonStore::path_for(dir_.path() / "state", 2));
  EXPECT_TRUE(open(2)->claim("b", 16).ok());
}

// The fencing token lives beside the state file, so it keeps growing across processes; a token
// file that cannot be read is never taken as "no token yet".
TEST_F(StaticRegistryTest, TokensGrowAcrossProcessesAndAnUnreadableTokenFileFailsTheClaim) {
  const fs::path token_file =
      fs::path(FileHorizonStore::path_for(dir_.path() / "state", 5).string() + ".token");
  for (std::uint64_t want = 1; want <= 3; ++want) {
    auto registry = open(5);  // a new handle each time, as a restarted process
    const Result<Claim> c = registry->claim("a", 16);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->lease.token, want);
    ASSERT_TRUE(registry->release(c->lease).ok());
  }
  for (const char* bad : {"garbage\n", "", "-1\n", "18446744073709551615\n"}) {
    SCOPED_TRACE(bad);
    std::ofstream(token_file, std::ios::trunc) << bad;
    const Result<Claim> c = open(5)->claim("a", 16);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().reason(), Reason::kCorrupt) << c.status().to_string();
    EXPECT_NE(c.status().message().find(".token"), std::string::npos) << c.status().message();
  }
  // The failed claims kept no lock.
  std::ofstream(token_file, std::ios::trunc) << "41\n";
  const Result<Claim> c = open(5)->claim("a", 16);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->lease.token, 42u);
}

TEST_F(StaticRegistryTest, StateDirectoryBelongsToOneLayout) {
  auto registry = open(1);
  const fs::path dir = dir_.path() / "state";
  EXPECT_TRUE(fs::exists(dir / "layout"));
  auto other = open_static_registry(dir.string(), 2, kOtherLayout);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().reason(), Reason::kStateMismatch);
  EXPECT_NE(other.status().message().find(std::string(kLayoutText)), std::string::npos)
      << other.status().message();
  EXPECT_NE(other.status().message().find(std::string(kOtherLayout)), std::string::npos)
      << other.status().message();
  EXPECT_TRUE(open_static_registry(dir.string(), 2, kLayoutText).ok());
}

TEST_F(StaticRegistryTest, StateDirectoryFromBeforeLayoutsWereRecordedIsCheckedByItsFiles) {
  const fs::path dir = dir_.path() / "state";
  fs::create_directories(dir);
  ASSERT_TRUE(FileHorizonStore(FileHorizonStore::path_for(dir, 3)).save(record_for(3, 5)).ok());
  auto other = open_static_registry(dir.string(), 4, kOtherLayout);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("horizon-node-3.state"), std::string::npos)
      << other.status().message();
  EXPECT_FALSE(fs::exists(dir / "layout"));
  EXPECT_TRUE(open_static_registry(dir.string(), 4, kLayoutText).ok());
  EXPECT_TRUE(fs::exists(dir / "layout"));
}

TEST(HostnameTest, TakesTheTrailingOrdinal) {
  EXPECT_EQ(node_from_hostname("flurry-7").value(), 7u);
  EXPECT_EQ(node_from_hostname("web-0").value(), 0u);
  EXPECT_EQ(node_from_hostname("my-flurry-set-12").value(), 12u);
  EXPECT_EQ(node_from_hostname("a-18446744073709551615").value(), 18446744073709551615u);
}

TEST(HostnameTest, RejectsNamesWithoutAnOrdinal) {
  for (std::string_view name : {"flurry", "flurry-", "flurry-x7", "flurry-7x", "", "-7", "flurry--",
                                "a-18446744073709551616"}) {
    const Result<std::uint64_t> r = node_from_hostname(name);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << name;
    std::string quoted = "\"";
    quoted += name;
    quoted += '"';
    EXPECT_NE(r.status().message().find(quoted), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace flurry

// One data directory, one registry identity: the identities the registries name (without
// secrets), the record written once in the directory, and open_registry() refusing a directory
// recorded for another registry. Real files in a temporary directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "flurry/layout.h"
#include "flurry/open_registry.h"
#include "flurry/timefmt.h"
#include "test_store.h"

namespace flurry {
namespace {

namespace fs = std::filesystem;
using testing::FakeClock;
using testing::TempDir;

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

const Layout& layout() {
  static const Layout l = Layout::parse("flurry").value();
  return l;
}

std::string identity_of(const RegistryOptions& o) {
  Result<std::string> id = registry_identity(o, layout());
  EXPECT_TRUE(id.ok()) << id.status().to_string();
  return id.ok() ? *id : std::string();
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(RegistryIdentityTest, NamesEachRegistryWithoutSecrets) {
  RegistryOptions sqlite;
  EXPECT_EQ(identity_of(sqlite), "sqlite:registry.db");

  RegistryOptions fixed;
  fixed.kind = RegistryKind::kStatic;
  fixed.node = 7;
  EXPECT_EQ(identity_of(fixed), "static");  // static nodes share a directory
  fixed.node.reset();
  fixed.node_from_hostname = true;
  EXPECT_EQ(identity_of(fixed), "static");

  RegistryOptions etcd;
  etcd.kind = RegistryKind::kEtcd;
  etcd.cluster = "blue";
  etcd.etcd_endpoints = {{"127.0.0.1", 2380}, {"127.0.0.1", 2379}};
  EXPECT_EQ(identity_of(etcd), "etcd:cluster=blue;prefix=/flurry/blue");
  RegistryOptions reordered = etcd;  // the same cluster, its members listed the other way round
  reordered.etcd_endpoints = {{"127.0.0.1", 2379}, {"127.0.0.1", 2380}};
  EXPECT_EQ(identity_of(reordered), identity_of(etcd));
  RegistryOptions grown = etcd;  // a member added: still the same cluster
  grown.etcd_endpoints.push_back({"127.0.0.1", 2381});
  EXPECT_EQ(identity_of(grown), identity_of(etcd));
  RegistryOptions green = etcd;
  green.cluster = "green";
  EXPECT_NE(identity_of(green), identity_of(etcd));

  RegistryOptions pg;
  pg.kind = RegistryKind::kPostgres;
  pg.postgres_url = "postgresql://alice:s3cret-pw@127.0.0.1:5433/ids?options=-csearch_path%3Dfl";
  const std::string url_form = identity_of(pg);
  EXPECT_EQ(url_form,
            "postgres:host=127.0.0.1;port=5433;dbname=ids;user=alice;options=-csearch_path=fl");
  EXPECT_EQ(url_form.find("s3cret"), std::string::npos);
  pg.postgres_url =
      "host=127.0.0.1 port=5433 dbname=ids user=alice password=s3cret-pw "
      "options=-csearch_path=fl";
  EXPECT_EQ(identity_of(pg), url_form);  // the key=value form names the same database
  // TLS settings and secrets name no other database: moving to verify-full (a client certificate
  // with a passphrase, a passfile) keeps the identity, and none of it shows.
  pg.postgres_url =
      "postgresql://alice@127.0.0.1:5433/ids?options=-csearch_path%3Dfl&sslmode=verify-full"
      "&sslrootcert=/etc/ca.pem&sslcert=/etc/c.pem&sslkey=/etc/c.key&sslpassword=k3y-pass"
      "&passfile=/etc/pgpass";
  EXPECT_EQ(identity_of(pg), url_form);
  EXPECT_EQ(identity_of(pg).find("k3y-pass"), std::string::npos);
  pg.postgres_url = "postgresql://alice@127.0.0.1:5433/other";
  EXPECT_NE(identity_of(pg), url_form);
}

TEST(RegistryIdentityTest, BadOptionsAreRefusedAsByCheckRegistryOptions) {
  RegistryOptions etcd;
  etcd.kind = RegistryKind::kEtcd;  // no endpoints
  EXPECT_EQ(registry_identity(etcd, layout()).status().code(), StatusCode::kInvalidArgument);
}

TEST(RegistryIdentityTest, RecordedOnceThenCompared) {
  TempDir dir;
  ASSERT_TRUE(check_data_dir_identity(dir.path(), "sqlite:registry.db").ok());
  EXPECT_EQ(file_text(dir.path() / "registry-identity"), "sqlite:registry.db\n");
  EXPECT_TRUE(check_data_dir_identity(dir.path(), "sqlite:registry.db").ok());

  const Status other = check_data_dir_identity(dir.path(), "etcd:cluster=blue");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.reason(), Reason::kStateMismatch);
  EXPECT_HAS(other.message(), "sqlite:registry.db");
  EXPECT_HAS(other.message(), "etcd:cluster=blue");
  EXPECT_HAS(other.message(), "--data-dir");
  EXPECT_HAS(other.message(), "same registry settings");
  // The refusal leaves the record alone.
  EXPECT_EQ(file_text(dir.path() / "registry-identity"), "sqlite:registry.db\n");
  // No temporary files stay behind.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(RegistryIdentityTest, UnreadableRecordIsNeverTakenForNone) {
  TempDir dir;
  std::ofstream(dir.path() / "registry-identity") << "";
  const Status empty = check_data_dir_identity(dir.path(), "sqlite:registry.db");
  EXPECT_EQ(empty.reason(), Reason::kCorrupt) << empty.to_string();
  std::ofstream(dir.path() / "registry-identity") << "a\nb\n";
  EXPECT_EQ(check_data_dir_identity(dir.path(), "a").reason(), Reason::kCorrupt);
}

// Processes racing on a new directory: exactly one identity wins, the others compare with it.
TEST(RegistryIdentityTest, RacingFirstUsesAgreeOnOneRecord) {
  TempDir dir;
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      ok[static_cast<std::size_t>(i)] =
          check_data_dir_identity(dir.path(), "etcd:cluster=c" + std::to_string(i)).ok();
    });
  }
  for (std::thread& t : threads) t.join();
  int winners = 0;
  for (int v : ok) winners += v;
  EXPECT_EQ(winners, 1);
  const std::string recorded = file_text(dir.path() / "registry-identity");
  EXPECT_EQ(recorded.rfind("etcd:cluster=c", 0), 0u) << recorded;
}

TEST(RegistryIdentityTest, OpenRegistryRefusesADirectoryOfAnotherRegistry) {
  TempDir dir;
  FakeClock clock(parse_time("2026-01-01T00:00:00Z").value());
  RegistryOptions sqlite;
  sqlite.data_dir = dir.path() / "data";
  {
    Result<std::unique_ptr<NodeRegistry>> r =
        open_registry(sqlite, layout(), Clocks{clock, SteadyClock::instance()}, "");
    ASSERT_TRUE(r.ok()) << r.status().to_string();
  }
  RegistryOptions fixed = sqlite;
  fixed.kind = RegistryKind::kStatic;
  fixed.node = 3;
  Result<std::unique_ptr<NodeRegistry>> refused =
      open_registry(fixed, layout(), Clocks{clock, SteadyClock::instance()}, "");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().reason(), Reason::kStateMismatch);
  EXPECT_HAS(refused.status().message(), "\"static\"");
  EXPECT_HAS(refused.status().message(), "sqlite:registry.db");
  EXPECT_FALSE(fs::exists(sqlite.data_dir / "horizon-node-3.state"));
  Result<std::unique_ptr<NodeRegistry>> again =
      open_registry(sqlite, layout(), Clocks{clock, SteadyClock::instance()}, "");
  EXPECT_TRUE(again.ok()) << again.status().to_string();
}

TEST(RegistryIdentityTest, DefaultDataDirIsAbsolute) {
  const fs::path d = default_data_dir();
  EXPECT_TRUE(d.is_absolute()) << d;
  EXPECT_EQ(d.filename(), "flurry");
  EXPECT_EQ(RegistryOptions{}.data_dir, d);
}

}  // namespace
}  // namespace flurry

// The PostgreSQL node registry against a real server (tests/testing/postgres_server.h), beyond the
// conformance suite: the password never shows, a stopped or hung server costs a bounded
// UNAVAILABLE and the registry reconnects once it is back, claims pass rows that others hold
// locked, concurrent first opens create the schema once, lease times are the database's, and a
// registry that went backwards or lost its tables is reported as such; over TLS (verify-full,
// client certificates, scram with a passfile), every refusal names its cause.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "flurry/registry.h"
#include "flurry/status.h"
#include "postgres_server.h"

namespace flurry {
namespace {

using namespace std::chrono_literals;
using testing::PostgresServer;

constexpr std::string_view kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";
constexpr std::uint64_t kNodeCount = 16;

HorizonRecord record_for(std::uint64_t node, std::int64_t horizon) {
  return HorizonRecord{std::string(kLayout), node, 0, {horizon}};
}

std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// An admin connection of the test's own, for what an operator (or another session) does beside
// the registry: holding row locks, reading the registry's sessions.
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

class PostgresRegistryTest : public ::testing::Test {
 protected:
  PostgresRegistryTest()
      : server_(PostgresServer::shared()), database_(server_.create_database()) {}
  ~PostgresRegistryTest() override { server_.drop_database(database_); }

  std::unique_ptr<NodeRegistry> open(std::chrono::milliseconds ttl = 10s,
                                     std::string_view layout = kLayout) {
    Result<std::unique_ptr<NodeRegistry>> r =
        open_postgres_registry(url(), ttl, layout, SteadyClock::instance());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : nullptr;
  }
  static Claim claim(NodeRegistry& registry, std::string_view owner,
                     std::uint64_t count = kNodeCount) {
    Result<Claim> c = registry.claim(owner, count);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(c).value() : Claim{};
  }
  std::string url() const { return server_.url(database_); }
  long sql(const std::string& statement) { return server_.exec(database_, statement); }

  PostgresServer& server_;
  std::string database_;
};

TEST_F(PostgresRegistryTest, DescribeAndMessagesHideThePassword) {
  // The test server trusts every local connection: the password is sent and ignored.
  const std::string with_password =
      "postgresql://postgres:s3cret-pw@127.0.0.1:" + std::to_string(server_.port()) + "/" +
      database_;
  Result<std::unique_ptr<NodeRegistry>> r =
      open_postgres_registry(with_password, 10s, kLayout, SteadyClock::instance());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string described = (*r)->describe();
  EXPECT_EQ(described, "postgres:postgresql://postgres:***@127.0.0.1:" +
                           std::to_string(server_.port()) + "/" + database_);
  ASSERT_TRUE((*r)->claim("a", kNodeCount).ok());

  Result<std::unique_ptr<NodeRegistry>> other = open_postgres_registry(
      with_password, 10s, "time:41@1ms,seq:12,node:10;epoch=2025-01-01Z", SteadyClock::instance());
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().reason(), Reason::kStateMismatch) << other.status().to_string();
  EXPECT_NE(other.status().message().find("***"), std::string::npos) << other.status().message();
  EXPECT_EQ(other.status().message().find("s3cret"), std::string::npos) << other.status().message();

  // Key=value form, and an unreachable server's message.
  const std::string keywords =
      "host=127.0.0.1 port=1 dbname=x user=u password=s3cret-pw connect_timeout=1";
  Result<std::unique_ptr<NodeRegistry>> down =
      open_postgres_registry(keywords, 3s, kLayout, SteadyClock::instance());
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().to_string();
  // A dead database is UNAVAILABLE / IO, as the PostgreSQL segment store says it (src/db).
  EXPECT_EQ(down.status().reason(), Reason::kIo) << down.status().to_string();
  EXPECT_EQ(down.status().message().find("s3cret"), std::string::npos) << down.status().message();
  EXPECT_NE(down.status().message().find("password=***"), std::string::npos)
      << down.status().message();
}

TEST_F(PostgresRegistryTest, BadArgumentsAreRefusedBeforeConnecting) {
  EXPECT_EQ(
      open_postgres_registry("mysql://db/x", 10s, kLayout, SteadyClock::instance()).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(open_postgres_registry(url(), 0ms, kLayout, SteadyClock::instance()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(open_postgres_registry(url(), 10s, "", SteadyClock::instance()).status().code(),
            StatusCode::kInvalidArgument);
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  EXPECT_EQ(registry->claim("a", 0).status().code(), StatusCode::kInvalidArgument);
}

// Lease times are the database server's: the expiry is its now() plus the TTL.
TEST_F(PostgresRegistryTest, LeaseExpiryIsTheDatabasesNowPlusTheTtl) {
  auto registry = open(7s);
  ASSERT_NE(registry, nullptr);
  const Claim a = claim(*registry, "a");
  AdminSession admin(url());
  const std::string left = admin.exec(
      "SELECT round(extract(epoch FROM expires_at - now()) * 1000) FROM flurry_nodes WHERE node "
      "= " +
      std::to_string(a.lease.node));
  const long ms = std::stol(left);
  EXPECT_GT(ms, 6000) << left;
  EXPECT_LE(ms, 7000) << left;
  // After a renewal too.
  sql("UPDATE flurry_nodes SET expires_at = now() + interval '1 second'");
  ASSERT_TRUE(registry->renew(a.lease).ok());
  EXPECT_GT(std::stol(admin.exec("SELECT round(extract(epoch FROM expires_at - now()) * 1000) "
                                 "FROM flurry_nodes WHERE node = " +
                                 std::to_string(a.lease.node))),
            6000);
}

// Rows another session holds locked are passed by, not waited for; a renewal of a locked row
// gives up within its bound.
TEST_F(PostgresRegistryTest, ClaimsPassLockedRowsAndLockedRenewalsAreBounded) {
  const auto ttl = 1500ms;
  auto registry = open(ttl);
  ASSERT_NE(registry, nullptr);
  const Claim a = claim(*registry, "a");
  const Claim b = claim(*registry, "b");
  ASSERT_EQ(a.lease.node, 0u);
  ASSERT_EQ(b.lease.node, 1u);
  ASSERT_TRUE(registry->release(a.lease).ok());

  AdminSession admin(url());
  admin.exec("BEGIN");
  admin.exec("SELECT node FROM flurry_nodes WHERE node IN (0, 1) FOR UPDATE");
  auto start = std::chrono::steady_clock::now();
  const Claim c = claim(*registry, "c");
  EXPECT_EQ(c.lease.node, 2u) << "node 0 is free but locked: passed by";
  EXPECT_LT(since(start), 1000ms);

  start = std::chrono::steady_clock::now();
  const Status renewed = registry->renew(b.lease);
  const auto took = since(start);
  EXPECT_EQ(renewed.code(), StatusCode::kUnavailable) << renewed.to_string();
  EXPECT_TRUE(renewed.retryable());
  EXPECT_LT(took, ttl) << "a renewal waited past the lease for a locked row";
  admin.exec("ROLLBACK");
  EXPECT_TRUE(registry->renew(b.lease).ok());
  const Claim d = claim(*registry, "d");
  EXPECT_EQ(d.lease.node, 0u);
}

// Many processes starting at once on a new database: the tables are created once, by one of them
// (concurrent CREATE TABLE IF NOT EXISTS can fail on the catalog's unique index). Several rounds,
// each on a new database, the threads released together.
TEST_F(PostgresRegistryTest, ConcurrentFirstOpensCreateTheSchemaOnce) {
  constexpr int kRounds = 5;
  constexpr int kThreads = 8;
  for (int round = 0; round < kRounds; ++round) {
    const std::string database = server_.create_database();
    const std::string db_url = server_.url(database);
    std::vector<std::string> errors(kThreads);
    std::latch go(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        go.arrive_and_wait();
        std::string& error = errors[static_cast<std::size_t>(t)];
        Result<std::unique_ptr<NodeRegistry>> r =
            open_postgres_registry(db_url, 10s, kLayout, SteadyClock::instance());
        if (!r.ok()) {
          error = r.status().to_string();
          return;
        }
        const std::string owner = std::string("thread:").append(std::to_string(t));
        Result<Claim> c = (*r)->claim(owner, kNodeCount);
        if (!c.ok()) error = c.status().to_string();
      });
    }
    for (auto& th : threads) th.join();
    for (const std::string& e : errors) EXPECT_EQ(e, "") << "round " << round;
    EXPECT_EQ(server_.exec(database, "SELECT 1 FROM flurry_nodes"), kThreads);
    server_.drop_database(database);
  }
}

// A row with an owner but no expiry (edited by hand) holds no lease: listed free, and claimable.
TEST_F(PostgresRegistryTest, ARowWithoutAnExpiryHoldsNoLease) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  const Claim a = claim(*registry, "a", 1);
  ASSERT_EQ(sql("UPDATE flurry_nodes SET expires_at = NULL"), 1);
  Result<RegistryListing> listed = registry->list();
  ASSERT_TRUE(listed.ok()) << listed.status().to_string();
  ASSERT_EQ(listed->nodes.size(), 1u);
  EXPECT_FALSE(listed->nodes[0].live);
  EXPECT_FALSE(listed->nodes[0].expires_unix_ms.has_value());
  const Claim b = claim(*registry, "b", 1);
  EXPECT_EQ(b.lease.node, a.lease.node);
  EXPECT_GT(b.lease.token, a.lease.token);
}

TEST_F(PostgresRegistryTest, AVanishedRowOrALowerTokenIsARegression) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  const Claim a = claim(*registry, "a");
  const Claim b = claim(*registry, "b");
  ASSERT_EQ(sql("DELETE FROM flurry_nodes WHERE node = " + std::to_string(a.lease.node)), 1);
  Status st = registry->renew(a.lease);
  EXPECT_EQ(st.reason(), Reason::kRegistryRegressed) << st.to_string();
  EXPECT_TRUE(is_lease_gone(st));
  ASSERT_EQ(sql("UPDATE flurry_nodes SET token = 0, owner = 'b' WHERE node = " +
                std::to_string(b.lease.node)),
            1);
  st = registry->save_horizon(b.lease, record_for(b.lease.node, 5));
  EXPECT_EQ(st.reason(), Reason::kRegistryRegressed) << st.to_string();
}

TEST_F(PostgresRegistryTest, AHorizonBelowTheLastSaveUnderTheSameLeaseIsARegression) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  const Claim a = claim(*registry, "a");
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(a.lease.node, 500)).ok());
  ASSERT_TRUE(registry->save_horizon(a.lease, record_for(a.lease.node, 600)).ok());
  // As if the database were restored from a backup taken between the two saves.
  ASSERT_EQ(sql("UPDATE flurry_nodes SET horizon = E'" +
                [&] {
                  std::string text = format_horizon_record(record_for(a.lease.node, 500));
                  std::string escaped;
                  for (char ch : text)
                    escaped += ch == '\n' ? std::string("\\n") : std::string(1, ch);
                  return escaped;
                }() +
                "' WHERE node = " + std::to_string(a.lease.node)),
            1);
  const Status st = registry->save_horizon(a.lease, record_for(a.lease.node, 700));
  EXPECT_EQ(st.reason(), Reason::kRegistryRegressed) << st.to_string();
  EXPECT_NE(st.message().find("600"), std::string::npos) << st.message();
}

// An SQL error that waiting cannot fix is INTERNAL with PostgreSQL's message, not a lease lost.
TEST_F(PostgresRegistryTest, MissingTablesAreAnInternalErrorWithPostgresMessage) {
  auto registry = open();
  ASSERT_NE(registry, nullptr);
  const Claim a = claim(*registry, "a");
  sql("DROP TABLE flurry_nodes");
  const Status st = registry->renew(a.lease);
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.to_string();
  EXPECT_NE(st.message().find("flurry_nodes"), std::string::npos) << st.message();
  EXPECT_FALSE(is_lease_gone(st));
}

// A role without the right to the registry's tables: PERMISSION_DENIED naming the table, not an
// INTERNAL error (the same mapping as the segment store's, src/db/postgres_session.h).
TEST_F(PostgresRegistryTest, ARoleWithoutPrivilegesIsPermissionDenied) {
  ASSERT_NE(open(), nullptr);  // the tables, created by the superuser
  sql("DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'flurry_no_rights') "
      "THEN CREATE ROLE flurry_no_rights LOGIN; END IF; END $$");
  const std::string url =
      "postgresql://flurry_no_rights@127.0.0.1:" + std::to_string(server_.port()) + "/" + database_;
  Result<std::unique_ptr<NodeRegistry>> r =
      open_postgres_registry(url, 10s, kLayout, SteadyClock::instance());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().to_string();
  EXPECT_NE(r.status().message().find("permission denied"), std::string::npos)
      << r.status().message();
}

// A listening socket that never answers: the connection attempt gives up at the deadline.
TEST_F(PostgresRegistryTest, AServerThatNeverAnswersCostsABoundedUnavailable) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 16), 0);  // the kernel completes handshakes; nobody ever answers
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string silent =
      "postgresql://postgres@127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x";
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<NodeRegistry>> r =
      open_postgres_registry(silent, 900ms, kLayout, SteadyClock::instance());
  const auto took = since(start);
  ::close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_GE(took, 250ms);  // the bound is ttl / 3 = 300 ms
  EXPECT_LT(took, 900ms) << r.status().to_string();
}

// A backend process that stops answering mid-lease (SIGSTOP): the renewal gives up within its
// bound, and the next one works on a new connection.
TEST_F(PostgresRegistryTest, AHungSessionCostsABoundedUnavailableThenReconnects) {
  const auto ttl = 1500ms;
  auto registry = open(ttl);
  ASSERT_NE(registry, nullptr);
  const Claim a = claim(*registry, "a");
  AdminSession admin(url());
  const std::string pid = admin.exec(
      "SELECT pid FROM pg_stat_activity WHERE application_name = 'flurry' AND datname = '" +
      database_ + "'");
  ASSERT_FALSE(pid.empty());
  ASSERT_EQ(::kill(std::stoi(pid), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const Status st = registry->renew(a.lease);
  const auto took = since(start);
  ::kill(std::stoi(pid), SIGCONT);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
  EXPECT_LT(took, ttl) << st.to_string();
  EXPECT_GE(took, 400ms) << st.to_string();  // the bound is ttl / 3 = 500 ms
  const Status again = registry->renew(a.lease);
  EXPECT_TRUE(again.ok()) << again.to_string();
}

// A server that is down: every operation fails fast with UNAVAILABLE, retryable; once it is back,
// the same registry objects work again without being reopened.
TEST(PostgresRegistryServerTest, AStoppedServerIsUnavailableAndTheRegistryReconnects) {
  PostgresServer server;  // its own, to stop and start
  const std::string database = server.create_database();
  const auto ttl = 1500ms;
  Result<std::unique_ptr<NodeRegistry>> opened =
      open_postgres_registry(server.url(database), ttl, kLayout, SteadyClock::instance());
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  NodeRegistry& registry = **opened;
  Result<Claim> a = registry.claim("a", kNodeCount);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(registry.save_horizon(a->lease, record_for(a->lease.node, 100)).ok());

  server.stop();
  for (int i = 0; i < 3; ++i) {  // the broken connection, then no server at all
    const auto start = std::chrono::steady_clock::now();
    const Status st = registry.renew(a->lease);
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.to_string();
    EXPECT_TRUE(st.retryable());
    EXPECT_LT(since(start), ttl / 3 + 200ms) << st.to_string();
    EXPECT_NE(st.message().find("127.0.0.1"), std::string::npos) << st.message();
  }
  EXPECT_EQ(registry.claim("b", kNodeCount).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(registry.save_horizon(a->lease, record_for(a->lease.node, 200)).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(registry.list().status().code(), StatusCode::kUnavailable);
  Result<std::unique_ptr<NodeRegistry>> closed =
      open_postgres_registry(server.url(database), ttl, kLayout, SteadyClock::instance());
  EXPECT_EQ(closed.status().code(), StatusCode::kUnavailable) << closed.status().to_string();

  server.start();
  const Status renewed = registry.renew(a->lease);
  EXPECT_TRUE(renewed.ok()) << renewed.to_string();
  ASSERT_TRUE(registry.save_horizon(a->lease, record_for(a->lease.node, 300)).ok());
  ASSERT_TRUE(registry.release(a->lease).ok());
  Result<Claim> b = registry.claim("b", kNodeCount);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->lease.node, a->lease.node);
  ASSERT_TRUE(b->inherited.has_value());
  EXPECT_EQ(*b->inherited, record_for(a->lease.node, 300));
}

// ---- PostgreSQL over TLS (PostgresServer::shared_tls: ssl=on, hostssl only) ----

class PostgresTlsTest : public ::testing::Test {
 protected:
  PostgresTlsTest() : server_(PostgresServer::shared_tls()), database_(server_.create_database()) {}
  ~PostgresTlsTest() override { server_.drop_database(database_); }

  // Role `user` on this database with `query` (after the TLS parameters' '?').
  [[nodiscard]] std::string url(std::string_view user, const std::string& query) const {
    return "postgresql://" + std::string(user) + "@127.0.0.1:" + std::to_string(server_.port()) +
           "/" + database_ + "?" + query;
  }
  [[nodiscard]] std::string ca(const char* name = "ca") const {
    return (server_.certs_dir() / (std::string(name) + ".pem")).string();
  }
  static Result<std::unique_ptr<NodeRegistry>> open(const std::string& url) {
    return open_postgres_registry(url, 10s, kLayout, SteadyClock::instance());
  }
  // A refused open: UNAVAILABLE / IO whose message says `cause` and shows none of `secrets`.
  static void expect_refused(const std::string& url, std::string_view cause,
                             std::initializer_list<std::string_view> secrets = {}) {
    Result<std::unique_ptr<NodeRegistry>> r = open(url);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
    EXPECT_EQ(r.status().reason(), Reason::kIo) << r.status().to_string();
    EXPECT_NE(r.status().message().find(cause), std::string::npos) << r.status().message();
    for (std::string_view secret : secrets) {
      EXPECT_EQ(r.status().message().find(secret), std::string::npos) << r.status().message();
    }
  }

  PostgresServer& server_;
  std::string database_;
};

// verify-full checks the name: a certificate the CA signed for another host is refused, naming
// both names; the right one is taken again once the server presents it.
TEST_F(PostgresTlsTest, VerifyFullRefusesACertificateForAnotherHost) {
  server_.use_certificate("wronghost");
  expect_refused(server_.url(database_),
                 "server certificate for \"elsewhere.invalid\" (and 1 other name) does not "
                 "match host name \"127.0.0.1\"");
  server_.use_certificate("server");
  Result<std::unique_ptr<NodeRegistry>> r = open(server_.url(database_));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
}

TEST_F(PostgresTlsTest, VerifyFullRefusesAServerSignedByAnotherCa) {
  expect_refused(url("flurry", "sslmode=verify-full&sslrootcert=" + ca("other-ca")),
                 "certificate verify failed");
}

// No sslrootcert file: libpq names the file it looked for, never falls back to no check.
TEST_F(PostgresTlsTest, AMissingRootCertificateIsNamed) {
  const std::string missing = (server_.certs_dir() / "nowhere.pem").string();
  expect_refused(url("flurry", "sslmode=verify-full&sslrootcert=" + missing), missing);
}

// The server takes TCP over TLS only (no `host` line in pg_hba.conf), and role "flurry" only with
// its client certificate.
TEST_F(PostgresTlsTest, PlainTextAndAMissingClientCertificateAreRefused) {
  expect_refused(url("flurry", "sslmode=disable"), "no encryption");
  expect_refused(url("flurry", "sslmode=verify-full&sslrootcert=" + ca()),
                 "connection requires a valid client certificate");
}

// scram-sha-256 with the password read from a passfile: it works, and no printed form shows the
// password; a wrong one is refused naming the cause, without the password either.
TEST_F(PostgresTlsTest, ScramWithAPasswordFromAPassfile) {
  testing::TempDir dir;
  const auto passfile = dir.path() / "pgpass";
  const auto write_passfile = [&](const std::string& password) {
    std::ofstream(passfile, std::ios::trunc)
        << "127.0.0.1:" << server_.port() << ":*:flurry_pw:" << password << "\n";
    ::chmod(passfile.c_str(), 0600);  // libpq ignores a passfile others can read
  };
  const std::string with_passfile = url(
      "flurry_pw", "sslmode=verify-full&sslrootcert=" + ca() + "&passfile=" + passfile.string());
  write_passfile(PostgresServer::kPasswordUserPassword);
  Result<std::unique_ptr<NodeRegistry>> r = open(with_passfile);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Result<Claim> claimed = (*r)->claim("a", kNodeCount);
  ASSERT_TRUE(claimed.ok()) << claimed.status().to_string();
  EXPECT_EQ((*r)->describe().find(PostgresServer::kPasswordUserPassword), std::string::npos);
  EXPECT_NE((*r)->describe().find("passfile=" + passfile.string()), std::string::npos)
      << (*r)->describe();

  write_passfile("not-the-password");
  expect_refused(with_passfile, "password authentication failed for user \"flurry_pw\"",
                 {"not-the-password", PostgresServer::kPasswordUserPassword});
  // The same password in the URL is masked in the message and in describe().
  const std::string in_url =
      "postgresql://flurry_pw:wrong-pw-123@127.0.0.1:" + std::to_string(server_.port()) + "/" +
      database_ + "?sslmode=verify-full&sslrootcert=" + ca();
  expect_refused(in_url, "password authentication failed", {"wrong-pw-123"});
}

// sslmode=require against a server that has no TLS: refused, saying so (never plain text).
TEST_F(PostgresRegistryTest, RequireAgainstAServerWithoutTlsFailsClearly) {
  Result<std::unique_ptr<NodeRegistry>> r =
      open_postgres_registry(url() + "?sslmode=require", 10s, kLayout, SteadyClock::instance());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_NE(r.status().message().find("server does not support SSL, but SSL was required"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace flurry

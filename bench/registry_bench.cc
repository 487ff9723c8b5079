// registry_bench: what a node-ID registry costs, per backend, through the NodeRegistry API the
// server uses: claim and release (a process starting and stopping), renew and save_horizon (a
// running node's steady load). Each backend is measured beside a reference on the same server in
// the same run: one plain durable single-row write with that backend's own client (SQLite: a
// committed UPSERT with synchronous=FULL; etcd: a put; PostgreSQL: an autocommitted UPDATE). etcd
// is also measured over TLS with client certificates and authentication (EtcdTlsAuth), beside
// plain etcd; that needs flurry_tls.so: run with FLURRY_MODULE_DIR=<build>/apps/flurry.
//
// Real servers, started here on loopback like the tests start them (tests/testing): a
// single-member etcd with its data in a temporary directory, and a PostgreSQL cluster (initdb) run
// as the postgres user with fsync on, so a commit costs what it costs in production on this disk;
// PostgreSQL twice, plain and over TLS (sslmode=verify-full, a client certificate), so that the
// cost of TLS is read off one run.
// Latencies are per call: median and p99 as counters (microseconds), besides Google Benchmark's
// mean. Not a test: nothing here is registered with ctest.
#include <benchmark/benchmark.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "etcd_server.h"
#include "flurry/clock.h"
#include "flurry/registry.h"
#include "postgres_server.h"
#include "registry/etcd_client.h"
#include "test_store.h"

namespace flurry {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kLayout = "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z";
constexpr milliseconds kTtl{10000};
constexpr int kIterations = 300;

[[noreturn]] void die(const std::string& what) {
  std::cerr << "registry_bench: " << what << "\n";
  std::exit(1);
}

template <typename T>
T must(Result<T> r, std::string_view what) {
  if (!r.ok()) die(std::string(what) + ": " + r.status().to_string());
  return std::move(r).value();
}

void must(const Status& st, std::string_view what) {
  if (!st.ok()) die(std::string(what) + ": " + st.to_string());
}

// Per-call latencies of one benchmark run, reported as median and p99 counters.
class Latencies {
 public:
  void add(Clock::duration d) { samples_.push_back(d); }
  void report(benchmark::State& state, const std::string& prefix) {
    if (samples_.empty()) return;
    std::sort(samples_.begin(), samples_.end());
    const auto at = [&](double q) {
      const auto i = static_cast<std::size_t>(q * static_cast<double>(samples_.size() - 1));
      return std::chrono::duration<double, std::micro>(samples_[i]).count();
    };
    state.counters[prefix + "p50_us"] = at(0.5);
    state.counters[prefix + "p99_us"] = at(0.99);
  }

 private:
  std::vector<Clock::duration> samples_;
};

// Times `f` into `latencies` and into the benchmark's manual time.
template <typename F>
void timed(benchmark::State& state, Latencies& latencies, F&& f) {
  const auto t0 = Clock::now();
  f();
  const auto d = Clock::now() - t0;
  latencies.add(d);
  state.SetIterationTime(std::chrono::duration<double>(d).count());
}

// ---- The backends ----

std::unique_ptr<NodeRegistry> open_sqlite(const testing::TempDir& dir) {
  return must(open_sqlite_registry((dir.path() / "registry.db").string(), kTtl,
                                   SystemClock::coarse(), kLayout),
              "sqlite");
}

std::unique_ptr<NodeRegistry> open_etcd(const std::string& cluster) {
  EtcdRegistryOptions options;
  options.endpoints = {must(testing::EtcdServer::shared().endpoint(), "etcd server")};
  options.cluster = cluster;
  options.ttl = kTtl;
  return must(open_etcd_registry(options, kLayout, flurry::SystemClock::coarse()), "etcd");
}

// The same over TLS (client certificates) as a user with a role: the secured server of the tests
// (etcd_server.h), whose tokens expire 2 s after their last use.
std::unique_ptr<NodeRegistry> open_etcd_tls_auth(const std::string& cluster) {
  const testing::EtcdServer& server = testing::EtcdServer::secured();
  EtcdRegistryOptions options;
  options.endpoints = {must(server.endpoint(), "secured etcd server")};
  options.cluster = cluster;
  options.ttl = kTtl;
  options.tls = server.client_tls();
  options.user = "flurry";
  options.password = testing::EtcdServer::password_of("flurry");
  return must(open_etcd_registry(options, kLayout, flurry::SystemClock::coarse()), "etcd TLS+auth");
}

testing::PostgresServer& postgres() {
  static testing::PostgresServer server(/*durable=*/true);
  return server;
}

// The same cluster settings over TLS: sslmode=verify-full with the test CA and a client
// certificate (make_certs.sh's P-256 keys), TCP over TLS only.
testing::PostgresServer& postgres_tls() {
  static testing::PostgresServer server(/*durable=*/true, testing::PostgresServer::Security::kTls);
  return server;
}

std::unique_ptr<NodeRegistry> open_postgres(testing::PostgresServer& server,
                                            const std::string& database) {
  return must(open_postgres_registry(server.url(database), kTtl, kLayout, SteadyClock::instance()),
              "postgres");
}

enum class Backend { kSqlite, kEtcd, kEtcdTlsAuth, kPostgres, kPostgresTls };

// A fresh registry of `backend` (its own file, key prefix or database), for one benchmark.
struct Fresh {
  explicit Fresh(Backend backend) {
    static int counter = 0;
    const std::string name = "bench" + std::to_string(++counter);
    switch (backend) {
      case Backend::kSqlite:
        registry = open_sqlite(dir);
        break;
      case Backend::kEtcd:
        registry = open_etcd(name);
        break;
      case Backend::kEtcdTlsAuth:
        registry = open_etcd_tls_auth(name);
        break;
      case Backend::kPostgres:
        registry = open_postgres(postgres(), postgres().create_database());
        break;
      case Backend::kPostgresTls:
        registry = open_postgres(postgres_tls(), postgres_tls().create_database());
        break;
    }
  }
  testing::TempDir dir;
  std::unique_ptr<NodeRegistry> registry;
};

// ---- The registry's operations ----

void BM_ClaimRelease(benchmark::State& state, Backend backend) {
  Fresh fresh(backend);
  NodeRegistry& r = *fresh.registry;
  Latencies claims;
  Latencies releases;
  for (auto _ : state) {
    Claim claim;
    auto t0 = Clock::now();
    claim = must(r.claim("bench:1", 1024), "claim");
    auto t1 = Clock::now();
    must(r.release(claim.lease), "release");
    auto t2 = Clock::now();
    claims.add(t1 - t0);
    releases.add(t2 - t1);
    state.SetIterationTime(std::chrono::duration<double>(t2 - t0).count());
  }
  claims.report(state, "claim_");
  releases.report(state, "release_");
}

void BM_Renew(benchmark::State& state, Backend backend) {
  Fresh fresh(backend);
  const Claim claim = must(fresh.registry->claim("bench:1", 1024), "claim");
  Latencies latencies;
  for (auto _ : state) {
    timed(state, latencies, [&] { must(fresh.registry->renew(claim.lease), "renew"); });
  }
  latencies.report(state, "");
  must(fresh.registry->release(claim.lease), "release");
}

void BM_SaveHorizon(benchmark::State& state, Backend backend) {
  Fresh fresh(backend);
  const Claim claim = must(fresh.registry->claim("bench:1", 1024), "claim");
  HorizonRecord record{std::string(kLayout), claim.lease.node, 0, {1000}};
  Latencies latencies;
  for (auto _ : state) {
    record.horizons[0] += 500;
    timed(state, latencies,
          [&] { must(fresh.registry->save_horizon(claim.lease, record), "save_horizon"); });
  }
  latencies.report(state, "");
  must(fresh.registry->release(claim.lease), "release");
}

// ---- References: one plain durable write with the backend's own client ----

void BM_SqliteReferenceWrite(benchmark::State& state) {
  testing::TempDir dir;
  sqlite3* db = nullptr;
  if (sqlite3_open((dir.path() / "ref.db").c_str(), &db) != SQLITE_OK) die("sqlite open");
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; "
               "CREATE TABLE kv(k INTEGER PRIMARY KEY, v INTEGER)",
               nullptr, nullptr, nullptr);
  Latencies latencies;
  for (auto _ : state) {
    timed(state, latencies, [&] {
      if (sqlite3_exec(db, "INSERT INTO kv VALUES(1, 1) ON CONFLICT(k) DO UPDATE SET v = v + 1",
                       nullptr, nullptr, nullptr) != SQLITE_OK) {
        die(std::string("sqlite write: ") + sqlite3_errmsg(db));
      }
    });
  }
  latencies.report(state, "");
  sqlite3_close(db);
}

void BM_EtcdReferencePut(benchmark::State& state) {
  const std::unique_ptr<internal::EtcdClient> owned = testing::EtcdServer::shared().client();
  const internal::EtcdClient& client = *owned;
  internal::EtcdTxn put;
  put.success.push_back(internal::EtcdOp::put("/bench/reference", "1"));
  Latencies latencies;
  for (auto _ : state) {
    timed(state, latencies, [&] { must(client.txn(put), "etcd put"); });
  }
  latencies.report(state, "");
}

void BM_PostgresReferenceUpdate(benchmark::State& state) {
  const std::string database = postgres().create_database();
  PGconn* conn = PQconnectdb(postgres().url(database).c_str());
  if (PQstatus(conn) != CONNECTION_OK) die(std::string("postgres: ") + PQerrorMessage(conn));
  PQclear(
      PQexec(conn, "CREATE TABLE kv(k int primary key, v bigint); INSERT INTO kv VALUES(1, 0)"));
  Latencies latencies;
  for (auto _ : state) {
    timed(state, latencies, [&] {
      PGresult* r = PQexec(conn, "UPDATE kv SET v = v + 1 WHERE k = 1");
      if (PQresultStatus(r) != PGRES_COMMAND_OK)
        die(std::string("postgres: ") + PQerrorMessage(conn));
      PQclear(r);
    });
  }
  latencies.report(state, "");
  PQfinish(conn);
}

#define FLURRY_REGISTRY_BENCH(fn, backend) \
  BENCHMARK_CAPTURE(fn, backend, Backend::k##backend)->UseManualTime()->Iterations(kIterations)

FLURRY_REGISTRY_BENCH(BM_ClaimRelease, Sqlite);
FLURRY_REGISTRY_BENCH(BM_Renew, Sqlite);
FLURRY_REGISTRY_BENCH(BM_SaveHorizon, Sqlite);
BENCHMARK(BM_SqliteReferenceWrite)->UseManualTime()->Iterations(kIterations);
FLURRY_REGISTRY_BENCH(BM_ClaimRelease, Etcd);
FLURRY_REGISTRY_BENCH(BM_Renew, Etcd);
FLURRY_REGISTRY_BENCH(BM_SaveHorizon, Etcd);
BENCHMARK(BM_EtcdReferencePut)->UseManualTime()->Iterations(kIterations);
FLURRY_REGISTRY_BENCH(BM_ClaimRelease, EtcdTlsAuth);
FLURRY_REGISTRY_BENCH(BM_Renew, EtcdTlsAuth);
FLURRY_REGISTRY_BENCH(BM_SaveHorizon, EtcdTlsAuth);
FLURRY_REGISTRY_BENCH(BM_ClaimRelease, Postgres);
FLURRY_REGISTRY_BENCH(BM_Renew, Postgres);
FLURRY_REGISTRY_BENCH(BM_SaveHorizon, Postgres);
BENCHMARK(BM_PostgresReferenceUpdate)->UseManualTime()->Iterations(kIterations);
FLURRY_REGISTRY_BENCH(BM_ClaimRelease, PostgresTls);
FLURRY_REGISTRY_BENCH(BM_Renew, PostgresTls);
FLURRY_REGISTRY_BENCH(BM_SaveHorizon, PostgresTls);

}  // namespace
}  // namespace flurry

int main(int argc, char** argv) {
  // The servers start here, on the main thread (their PR_SET_PDEATHSIG follows it).
  (void)flurry::testing::EtcdServer::shared().endpoint();
  (void)flurry::testing::EtcdServer::secured().endpoint();
  (void)flurry::postgres();
  (void)flurry::postgres_tls();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

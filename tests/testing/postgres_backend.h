// The PostgreSQL fixtures of the NodeRegistry conformance suite (registry_backend.h): a fresh
// database on the test binary's one real server (postgres_server.h) per fixture object, plain or
// over TLS.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fake_clock.h"
#include "flurry/registry.h"
#include "flurry/status.h"
#include "postgres_server.h"
#include "registry_backend.h"

namespace flurry::testing {

// Lease times are the database server's clock, which cannot be faked: let_time_pass() moves every
// lease's expiry back instead (through a connection of its own), which is the same to the
// registry. Real time passes between the steps of a test too, hence the expiry slack.
class PostgresBackend : public RegistryBackend {
 public:
  explicit PostgresBackend(FakeClock& clock) : PostgresBackend(clock, PostgresServer::shared()) {}
  ~PostgresBackend() override { server_.drop_database(database_); }
  PostgresBackend(const PostgresBackend&) = delete;
  PostgresBackend& operator=(const PostgresBackend&) = delete;

  std::string name() const override { return "postgres"; }
  RegistryCapabilities capabilities() const override {
    return {.expiry_slack = std::chrono::milliseconds(500)};
  }
  std::chrono::milliseconds ttl() const override { return std::chrono::seconds(10); }
  void let_time_pass(std::chrono::milliseconds d) override {
    server_.exec(database_, "UPDATE flurry_nodes SET expires_at = expires_at - interval '" +
                                std::to_string(d.count()) + " milliseconds'");
  }
  Result<std::unique_ptr<NodeRegistry>> open(std::string_view layout) override {
    return open_postgres_registry(url(), ttl(), layout, SteadyClock::instance());
  }
  void corrupt_horizon(std::uint64_t node) override {
    const long changed = server_.exec(
        database_,
        "UPDATE flurry_nodes SET horizon = E'flurry-horizon 1\\nlayout x\\n' WHERE node = " +
            std::to_string(node) + " AND horizon IS NOT NULL");
    if (changed != 1) std::abort();  // the fixture itself is broken
  }

  [[nodiscard]] std::string url() const { return server_.url(database_); }

 protected:
  PostgresBackend(FakeClock& /*clock*/, PostgresServer& server)
      : server_(server), database_(server_.create_database()) {}

 private:
  PostgresServer& server_;
  std::string database_;
};

// The same over TLS: the test binary's one TLS server (PostgresServer::shared_tls), reached with
// sslmode=verify-full, the test CA and the client certificate of role "flurry" (cert
// authentication; the server refuses plain TCP).
class PostgresTlsBackend final : public PostgresBackend {
 public:
  explicit PostgresTlsBackend(FakeClock& clock)
      : PostgresBackend(clock, PostgresServer::shared_tls()) {}
  std::string name() const override { return "postgres-tls"; }
};

}  // namespace flurry::testing

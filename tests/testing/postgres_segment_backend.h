// The PostgreSQL fixture of the SegmentStore conformance suite (segment_backend.h): a fresh
// database on the test binary's one real server (postgres_server.h) per fixture object, reached
// through a URL with a password (the test server trusts local connections and ignores it), so that
// every case also checks that the password never shows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "postgres_server.h"
#include "segment_backend.h"

namespace flurry::testing {

class PostgresSegmentBackend : public SegmentBackend {
 public:
  PostgresSegmentBackend() : PostgresSegmentBackend(PostgresServer::shared()) {}
  ~PostgresSegmentBackend() override { server_.drop_database(database_); }
  PostgresSegmentBackend(const PostgresSegmentBackend&) = delete;
  PostgresSegmentBackend& operator=(const PostgresSegmentBackend&) = delete;

  std::string name() const override { return "postgres"; }
  std::string location() const override { return url_with(password()); }
  std::filesystem::path data_dir() const override { return "/nonexistent"; }
  std::string description() const override { return url_with("***"); }
  std::string password() const override { return "s3cret-pw"; }
  std::uint64_t max_base_step() const override { return 2147483647; }

  [[nodiscard]] PostgresServer& server() { return server_; }
  [[nodiscard]] const std::string& database() const { return database_; }

 protected:
  explicit PostgresSegmentBackend(PostgresServer& server)
      : server_(server), database_(server_.create_database()) {}

 private:
  // TLS mode: role "flurry" over verify-full with its client certificate (cert authentication:
  // the password is not asked for, and must still never show).
  [[nodiscard]] std::string url_with(const std::string& password) const {
    const std::string at = "@127.0.0.1:" + std::to_string(server_.port()) + "/" + database_;
    if (server_.tls()) {
      return "postgresql://flurry:" + password + at + "?" + server_.tls_query("flurry");
    }
    return "postgresql://postgres:" + password + at;
  }

  PostgresServer& server_;
  std::string database_;
};

// The same over TLS (PostgresServer::shared_tls: sslmode=verify-full, the test CA, the client
// certificate of role "flurry").
class PostgresTlsSegmentBackend final : public PostgresSegmentBackend {
 public:
  PostgresTlsSegmentBackend() : PostgresSegmentBackend(PostgresServer::shared_tls()) {}
  std::string name() const override { return "postgres-tls"; }
};

}  // namespace flurry::testing

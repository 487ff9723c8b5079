// The fixture interface of the NodeRegistry conformance suite (tests/unit/
// registry_conformance_test.cc): what the suite needs from a backend, and nothing more.
//
// Each backend adds one class that implements RegistryBackend and is constructible as
// Backend(clock), then one entry in the suite's type list (sqlite and static here; the ones that
// need a server in their own headers). An object owns one fresh storage location (a temp directory,
// a database, a key prefix) for the lifetime of the test; every open() is another handle on that
// same storage, as another process on the same host or cluster would have.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "fake_clock.h"
#include "flurry/registry.h"
#include "flurry/status.h"
#include "test_store.h"

namespace flurry::testing {

// Where a backend's contract differs; the suite checks each side of a difference (it skips
// nothing).
struct RegistryCapabilities {
  // Leases run out ttl after their last claim or renewal on the fake wall clock, and an expired
  // node ID can be claimed by another handle. False: a lease lasts until release (static).
  bool leases_expire = true;
  // claim(owner, n) hands out any of node IDs 0..n-1. False: the backend has one fixed node ID
  // (node 0 in these fixtures), so at most one lease exists at a time (static).
  bool node_count_limited_by_layout = true;
  // How late after its TTL a lease may still be seen live: zero where lease times come from the
  // fake clock; more where the registry's own clock decides (real time passes between steps).
  std::chrono::milliseconds expiry_slack{0};
  // release_node(node, /*force=*/true) takes a live lease away and fences its holder. False: the
  // holder's lease is a lock only stopping it frees (static).
  bool forced_release = true;
};

class RegistryBackend {
 public:
  virtual ~RegistryBackend() = default;

  // For messages: "sqlite", "static".
  [[nodiscard]] virtual std::string name() const = 0;
  [[nodiscard]] virtual RegistryCapabilities capabilities() const = 0;
  // The TTL its handles lease node IDs with.
  [[nodiscard]] virtual std::chrono::milliseconds ttl() const = 0;
  // Makes `d` pass as the registry's leases see it (the fake clock; or the registry's own time,
  // where the backend cannot be given a fake one).
  virtual void let_time_pass(std::chrono::milliseconds d) = 0;
  // A new handle on this backend's storage for `layout` (the layout text a registry belongs to).
  // Each call is another "process": handles share the storage and nothing else.
  [[nodiscard]] virtual Result<std::unique_ptr<NodeRegistry>> open(std::string_view layout) = 0;
  // Replaces the stored horizon record of `node` (saved before) with an unreadable one, behind
  // every handle's back, as a bad disk or a bad manual edit would.
  virtual void corrupt_horizon(std::uint64_t node) = 0;
};

// Sqlite: DIR/registry.db, lease times on the fake wall clock.
class SqliteBackend final : public RegistryBackend {
 public:
  explicit SqliteBackend(FakeClock& clock) : clock_(clock), db_(dir_.path() / "registry.db") {}

  std::string name() const override { return "sqlite"; }
  RegistryCapabilities capabilities() const override { return {}; }
  std::chrono::milliseconds ttl() const override { return ttl_; }
  void let_time_pass(std::chrono::milliseconds d) override { clock_.advance(d); }
  Result<std::unique_ptr<NodeRegistry>> open(std::string_view layout) override {
    return open_sqlite_registry(db_.string(), ttl_, clock_, layout);
  }
  void corrupt_horizon(std::uint64_t node) override {
    sqlite3* db = nullptr;
    if (sqlite3_open(db_.c_str(), &db) != SQLITE_OK) std::abort();
    const std::string sql =
        "UPDATE nodes SET horizon = 'flurry-horizon 1\nlayout x\n' WHERE node = " +
        std::to_string(node);
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    const int changed = sqlite3_changes(db);
    sqlite3_close(db);
    if (rc != SQLITE_OK || changed != 1) std::abort();  // the fixture itself is broken
  }

 private:
  TempDir dir_;
  std::chrono::milliseconds ttl_{10000};
  FakeClock& clock_;
  std::filesystem::path db_;
};

// Static: node 0 in DIR/state; leases never expire, so time is the fake clock's only.
class StaticBackend final : public RegistryBackend {
 public:
  explicit StaticBackend(FakeClock& clock) : clock_(clock) {}

  std::string name() const override { return "static"; }
  RegistryCapabilities capabilities() const override {
    return {.leases_expire = false, .node_count_limited_by_layout = false, .forced_release = false};
  }
  std::chrono::milliseconds ttl() const override { return std::chrono::milliseconds(0); }
  void let_time_pass(std::chrono::milliseconds d) override { clock_.advance(d); }
  Result<std::unique_ptr<NodeRegistry>> open(std::string_view layout) override {
    return open_static_registry(state_dir().string(), kNode, layout);
  }
  void corrupt_horizon(std::uint64_t node) override {
    const std::filesystem::path file = FileHorizonStore::path_for(state_dir(), node);
    if (!std::filesystem::exists(file)) std::abort();  // the fixture itself is broken
    std::ofstream(file, std::ios::trunc) << "flurry-horizon 1\nlayout x\n";
  }

 private:
  static constexpr std::uint64_t kNode = 0;
  std::filesystem::path state_dir() const { return dir_.path() / "state"; }
  FakeClock& clock_;
  TempDir dir_;
};

}  // namespace flurry::testing

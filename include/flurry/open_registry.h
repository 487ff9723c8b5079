// Choosing and opening a node registry from typed settings: the one place that knows every
// backend. A new backend adds a RegistryKind, its settings and a case in open_registry().
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry {

enum class RegistryKind {
  // Node IDs leased from <data_dir>/registry.db, shared by the processes of one host.
  kSqlite,
  // A fixed node ID (configured, or the host name's trailing ordinal); its horizon in data_dir.
  kStatic,
  // Node IDs leased from an etcd cluster, shared by processes on many hosts.
  kEtcd,
  // Node IDs leased from a PostgreSQL database (postgres_url), shared by processes on many hosts.
  kPostgres,
};

// "sqlite", "static", "etcd", "postgres".
[[nodiscard]] std::string_view to_string(RegistryKind kind) noexcept;
// The inverse of to_string(RegistryKind). INVALID_ARGUMENT naming the known kinds otherwise.
[[nodiscard]] Result<RegistryKind> parse_registry_kind(std::string_view text);

struct RegistryOptions {
  RegistryKind kind = RegistryKind::kSqlite;
  // Where the registry keeps its files (sqlite: registry.db; static: the node's horizon file; all:
  // this host's copy of the horizons, local-horizons/). Created when missing.
  std::filesystem::path data_dir = "./flurry-data";
  // Leasing registries (sqlite, etcd, postgres): how long a lease lives without renewal. etcd: at
  // least 2 s.
  std::chrono::milliseconds lease_ttl{10000};
  // etcd registry: the cluster's members as HOST:PORT (parse_etcd_endpoints); required for etcd,
  // not given for the other registries.
  std::vector<std::string> etcd_endpoints;
  // etcd registry: the registry's name within the cluster (its keys live under
  // /flurry/<cluster>/): 1-64 of [A-Za-z0-9._-]. Processes with one cluster name share node IDs.
  std::string cluster = "default";
  // Static registry: the node ID, or (node_from_hostname) the trailing ordinal of the host name
  // ("flurry-7" -> 7), as a Kubernetes StatefulSet names its pods. Exactly one of them.
  std::optional<std::uint64_t> node;
  bool node_from_hostname = false;
  // PostgreSQL registry: the libpq connection string, a URL (postgresql://user@host:5432/dbname,
  // or postgres://) or key=value pairs (host=... dbname=...). Required for it, refused otherwise.
  std::string postgres_url;
};

// Checks the options against each other and the layout without touching the disk or the network:
// the static registry's node (given, in range, not together with node_from_hostname), no node for
// a leasing registry, a lease TTL of at least 500 ms (etcd: 2000 ms), etcd endpoints (each
// HOST:PORT) and a cluster name for etcd and no endpoints otherwise, a well-formed postgres_url
// for the postgres registry and none for the others. INVALID_ARGUMENT naming the setting (never
// quoting the URL, which may hold a password).
[[nodiscard]] Status check_registry_options(const RegistryOptions& options, const Layout& layout);

// "HOST:PORT,HOST:PORT,...": etcd endpoints separated by commas (spaces around them are
// ignored), each HOST:PORT or [IPV6]:PORT with a port of 1-65535. INVALID_ARGUMENT naming the bad
// one; an empty list is refused.
[[nodiscard]] Result<std::vector<std::string>> parse_etcd_endpoints(std::string_view text);

// Creates data_dir if needed and opens the registry the options name, for `layout`. `hostname`
// is used by node_from_hostname only. Lease times come from `clock` (the wall clock: leases are
// shared between processes). Errors: those of check_registry_options and of the backend's open
// function (registry.h), with a prefix naming the registry.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_registry(const RegistryOptions& options,
                                                                  const Layout& layout,
                                                                  Clock& clock,
                                                                  std::string_view hostname);

}  // namespace flurry

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
#include "flurry/horizon_floor.h"
#include "flurry/host_dir.h"
#include "flurry/host_port.h"
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

// The data directory used when none is configured, an absolute path so that the working
// directory never becomes part of a registry's identity: $XDG_STATE_HOME/flurry when
// XDG_STATE_HOME is set to an absolute path; otherwise /var/lib/flurry for root and
// $HOME/.local/state/flurry for other users (the home directory from the password database when
// HOME is unset or relative).
[[nodiscard]] std::filesystem::path default_data_dir();

struct RegistryOptions {
  RegistryKind kind = RegistryKind::kSqlite;
  // Where the registry keeps its files (sqlite: registry.db; static: the node's horizon file; all:
  // this host's copy of the horizons, local-horizons/, and the registry identity the directory
  // belongs to, registry-identity). Created when missing. Default: default_data_dir().
  std::filesystem::path data_dir = default_data_dir();
  // The directory every flurry process of this host shares, whatever its user, registry or data
  // directory (host_dir.h): the host guards and the host-wide horizon records live there, so a
  // process never issues as a node ID another one on the host holds, and starts above what any
  // process of the host issued under that node ID. Default: default_host_dir() (/var/tmp).
  std::filesystem::path host_dir = default_host_dir();
  // Leasing registries (sqlite, etcd, postgres): how long a lease lives without renewal. etcd: at
  // least 2 s.
  std::chrono::milliseconds lease_ttl{10000};
  // etcd registry: the cluster's members (their client addresses: plain HTTP, or all https://),
  // typed where their text enters (parse_etcd_endpoints); required for etcd, not given for the
  // other registries.
  std::vector<EtcdEndpoint> etcd_endpoints;
  // etcd registry: TLS files for https:// endpoints (refused with plain ones; registry.h).
  EtcdTlsFiles etcd_tls;
  // etcd registry: the etcd user and the file holding its password (both or neither). The
  // password is read by open_registry (read through internal::read_secret_file: mode 600, at most
  // 4 KiB, visible ASCII), never kept in the options or printed.
  std::string etcd_user;
  std::optional<std::filesystem::path> etcd_password_file;
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
// HOST:PORT) and a cluster name for etcd and no endpoints otherwise, etcd TLS files only with
// https:// endpoints (and cert and key together), etcd_user and etcd_password_file together and
// only for etcd, a well-formed postgres_url for the postgres registry and none for the others.
// INVALID_ARGUMENT naming the setting (never quoting the URL, which may hold a password).
[[nodiscard]] Status check_registry_options(const RegistryOptions& options, const Layout& layout);

// "HOST:PORT,HOST:PORT,...": etcd endpoints separated by commas (spaces around them are
// ignored), each parse_etcd_endpoint (registry.h): [http://|https://]HOST:PORT or [IPV6]:PORT with
// a port of 1-65535. INVALID_ARGUMENT naming the bad one; an empty list, and https:// endpoints
// mixed with plain ones, are refused.
[[nodiscard]] Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(std::string_view text);

// The identity of the registry the options name, one line without secrets, so that two processes
// with equal identities lease their node IDs from one registry:
//   sqlite:registry.db              (the file inside the data directory)
//   static                          (static nodes may share a directory; one node ID twice on a
//                                    host is the host guard's to refuse, host_guard.h)
//   etcd:cluster=NAME;prefix=/flurry/NAME;endpoints=H:P,H:P   (endpoints sorted)
//   postgres:host=H;port=P;dbname=D;user=U;options=O          (as libpq parses postgres_url;
//                                                              no password, empty when not given)
// Errors: those of check_registry_options.
[[nodiscard]] Result<std::string> registry_identity(const RegistryOptions& options,
                                                    const Layout& layout);

// One data directory belongs to one registry identity: a second registry beside the first would
// hand out the same node IDs again. Records `identity` in <data_dir>/registry-identity when the
// directory has none yet (created once, durably; of two processes racing, one wins and the other
// compares), and otherwise compares it with the recorded one. FAILED_PRECONDITION /
// STATE_MISMATCH naming both identities and how to proceed when they differ; DATA_LOSS / CORRUPT
// when the file is unreadable; UNAVAILABLE / IO when it cannot be read or written.
[[nodiscard]] Status check_data_dir_identity(const std::filesystem::path& data_dir,
                                             std::string_view identity);

// Which registry of the ones the options name: each scope has its own node IDs, layout and leases.
enum class RegistryScope {
  // The node IDs of the snowflake generator.
  kNodeIds,
  // The timestamp oracle's one node ID, whose lease makes its leader (flurry/timestamp_oracle.h):
  // etcd keys under /flurry/<cluster>/tso/, PostgreSQL tables flurry_tso_nodes and
  // flurry_tso_meta, SQLite <data_dir>/tso-registry.db, static <data_dir>/tso/ (node 0 whatever
  // node the options give: one process per data directory leads).
  kTimestampOracle,
};

// Creates data_dir if needed, checks it belongs to the registry the options name
// (check_data_dir_identity) and opens that registry's `scope`, for `layout`. `hostname`
// is used by node_from_hostname only. Lease times come from `clocks.wall` (leases are shared
// between processes); the PostgreSQL registry's operation deadlines from `clocks.monotonic`. The
// PostgreSQL URL and the etcd endpoints are parsed once, here, and handed to the backend parsed.
// Errors: those of check_registry_options and of the backend's open function (registry.h), with a
// prefix naming the registry.
[[nodiscard]] Result<std::unique_ptr<NodeRegistry>> open_registry(
    const RegistryOptions& options, const Layout& layout, Clocks clocks, std::string_view hostname,
    RegistryScope scope = RegistryScope::kNodeIds);

// This host's memory of the node horizons for the registry `options` name (horizon_floor.h): the
// copies in <data_dir>/local-horizons/ keyed by the registry's identity, and the host-wide records
// in options.host_dir (opened here, HostDir::open). Errors: those of registry_identity and
// HostDir::open (prefixed "the host directory (host_dir): ...").
[[nodiscard]] Result<std::unique_ptr<HorizonFloor>> open_horizon_floor(
    const RegistryOptions& options, const Layout& layout,
    RegistryScope scope = RegistryScope::kNodeIds);

}  // namespace flurry

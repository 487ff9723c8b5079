#include "flurry/open_registry.h"

#include <array>
#include <system_error>

#include "core/private_files.h"
#include "core/quote.h"
#include "postgres_conninfo.h"
#include "registry/etcd_client.h"

namespace flurry {
namespace {

constexpr std::array<RegistryKind, 4> kKinds = {RegistryKind::kSqlite, RegistryKind::kStatic,
                                                RegistryKind::kEtcd, RegistryKind::kPostgres};
constexpr std::chrono::milliseconds kMinLeaseTtl{500};
// etcd's leases have whole seconds, 2 at least.
constexpr std::chrono::milliseconds kMinEtcdLeaseTtl{2000};

// The static registry's node ID: configured, or the host name's trailing ordinal.
Result<std::uint64_t> static_node(const RegistryOptions& options, const Layout& layout,
                                  std::string_view hostname) {
  if (!options.node_from_hostname) return *options.node;
  Result<std::uint64_t> n = node_from_hostname(hostname);
  if (!n.ok()) return n.status().with_prefix("node_from_hostname");
  if (*n >= layout.node_count()) {
    return InvalidArgument("node_from_hostname: node " + std::to_string(*n) +
                           " (from the host name " + internal::quote(hostname) +
                           ") is out of range: the layout has node IDs 0-" +
                           std::to_string(layout.node_count() - 1));
  }
  return *n;
}

}  // namespace

std::string_view to_string(RegistryKind kind) noexcept {
  switch (kind) {
    case RegistryKind::kSqlite:
      return "sqlite";
    case RegistryKind::kStatic:
      return "static";
    case RegistryKind::kEtcd:
      return "etcd";
    case RegistryKind::kPostgres:
      return "postgres";
  }
  return "unknown";
}

Result<RegistryKind> parse_registry_kind(std::string_view text) {
  std::string known;
  for (RegistryKind kind : kKinds) {
    if (to_string(kind) == text) return kind;
    known += known.empty() ? "" : " or ";
    known += to_string(kind);
  }
  return InvalidArgument(internal::quote(text) + " is not one of " + known);
}

Result<std::vector<std::string>> parse_etcd_endpoints(std::string_view text) {
  std::vector<std::string> out;
  const auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    const std::string_view one =
        trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (one.empty()) {
      return InvalidArgument(internal::quote(text) +
                             " has an empty endpoint; expected HOST:PORT[,HOST:PORT...]");
    }
    Result<internal::EtcdEndpoint> ep = internal::parse_etcd_endpoint(one);
    if (!ep.ok()) return ep.status();
    out.emplace_back(one);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

Status check_registry_options(const RegistryOptions& options, const Layout& layout) {
  const std::string kind(to_string(options.kind));
  if (options.kind != RegistryKind::kEtcd && !options.etcd_endpoints.empty()) {
    return InvalidArgument("etcd_endpoints: only used with the etcd registry, not the " + kind +
                           " registry");
  }
  if (options.kind == RegistryKind::kPostgres) {
    if (options.postgres_url.empty()) {
      return InvalidArgument(
          "postgres_url: the postgres registry needs a connection string "
          "(postgresql://user@host:5432/dbname, or key=value pairs such as host=... dbname=...)");
    }
    if (Status st = internal::check_postgres_url(options.postgres_url); !st.ok()) {
      return InvalidArgument("postgres_url: " + st.message());
    }
  } else if (!options.postgres_url.empty()) {
    return InvalidArgument("postgres_url: only used with the postgres registry, not the " + kind +
                           " registry");
  }
  if (options.kind == RegistryKind::kStatic) {
    if (!options.node && !options.node_from_hostname) {
      return InvalidArgument(
          "registry: the static registry needs node (a fixed node ID) or node_from_hostname");
    }
    if (options.node && options.node_from_hostname) {
      return InvalidArgument("node: node and node_from_hostname exclude each other");
    }
    if (options.node && *options.node >= layout.node_count()) {
      return InvalidArgument("node: " + std::to_string(*options.node) +
                             " is out of range: the layout has node IDs 0-" +
                             std::to_string(layout.node_count() - 1));
    }
    return OkStatus();
  }
  if (options.node) {
    return InvalidArgument("node: a node ID is only given with the static registry; the " + kind +
                           " registry leases one");
  }
  if (options.node_from_hostname) {
    return InvalidArgument("node_from_hostname: only used with the static registry; the " + kind +
                           " registry leases node IDs");
  }
  if (options.lease_ttl < kMinLeaseTtl) {
    return InvalidArgument("lease_ttl: " + std::to_string(options.lease_ttl.count()) +
                           " ms is too short (at least " + std::to_string(kMinLeaseTtl.count()) +
                           " ms)");
  }
  if (options.kind == RegistryKind::kEtcd) {
    if (options.etcd_endpoints.empty()) {
      return InvalidArgument(
          "etcd_endpoints: the etcd registry needs the endpoints of etcd (HOST:PORT,...)");
    }
    for (const std::string& endpoint : options.etcd_endpoints) {
      if (Status st = internal::parse_etcd_endpoint(endpoint).status(); !st.ok()) {
        return st.with_prefix("etcd_endpoints");
      }
    }
    if (Status st = internal::check_etcd_cluster_name(options.cluster); !st.ok()) {
      return st.with_prefix("cluster");
    }
    if (options.lease_ttl < kMinEtcdLeaseTtl) {
      return InvalidArgument("lease_ttl: " + std::to_string(options.lease_ttl.count()) +
                             " ms is too short for the etcd registry (at least " +
                             std::to_string(kMinEtcdLeaseTtl.count()) +
                             " ms: etcd's leases have whole seconds, 2 at least)");
    }
  }
  return OkStatus();
}

Result<std::unique_ptr<NodeRegistry>> open_registry(const RegistryOptions& options,
                                                    const Layout& layout, Clock& clock,
                                                    std::string_view hostname) {
  if (Status st = check_registry_options(options, layout); !st.ok()) return st;
  if (Status st = internal::open_data_dir(options.data_dir); !st.ok()) return st;
  switch (options.kind) {
    case RegistryKind::kStatic: {
      Result<std::uint64_t> node = static_node(options, layout, hostname);
      if (!node.ok()) return node.status();
      Result<std::unique_ptr<NodeRegistry>> r =
          open_static_registry(options.data_dir.string(), *node, layout.to_string());
      if (!r.ok()) return r.status().with_prefix("cannot open the static registry");
      return r;
    }
    case RegistryKind::kSqlite: {
      const std::string path = (options.data_dir / "registry.db").string();
      Result<std::unique_ptr<NodeRegistry>> r =
          open_sqlite_registry(path, options.lease_ttl, clock, layout.to_string());
      if (!r.ok()) {
        return r.status().with_prefix("cannot open the sqlite registry " + internal::quote(path));
      }
      return r;
    }
    case RegistryKind::kEtcd: {
      EtcdRegistryOptions etcd;
      etcd.endpoints = options.etcd_endpoints;
      etcd.cluster = options.cluster;
      etcd.ttl = options.lease_ttl;
      Result<std::unique_ptr<NodeRegistry>> r = open_etcd_registry(etcd, layout.to_string());
      if (!r.ok()) return r.status().with_prefix("cannot open the etcd registry");
      return r;
    }
    case RegistryKind::kPostgres: {
      // The registry's messages name the server, its password masked.
      Result<std::unique_ptr<NodeRegistry>> r =
          open_postgres_registry(options.postgres_url, options.lease_ttl, layout.to_string());
      if (!r.ok()) return r.status().with_prefix("cannot open the postgres registry");
      return r;
    }
  }
  return InvalidArgument("unknown registry kind");
}

}  // namespace flurry

#include "flurry/open_registry.h"

#include <array>
#include <system_error>

#include "core/quote.h"
#include "postgres_conninfo.h"

namespace flurry {
namespace {

constexpr std::array<RegistryKind, 3> kKinds = {RegistryKind::kSqlite, RegistryKind::kStatic,
                                                RegistryKind::kPostgres};
constexpr std::chrono::milliseconds kMinLeaseTtl{500};

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

Status check_registry_options(const RegistryOptions& options, const Layout& layout) {
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
    return InvalidArgument("postgres_url: only used with the postgres registry, not the " +
                           std::string(to_string(options.kind)) + " registry");
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
  const std::string kind(to_string(options.kind));
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
  return OkStatus();
}

Result<std::unique_ptr<NodeRegistry>> open_registry(const RegistryOptions& options,
                                                    const Layout& layout, Clock& clock,
                                                    std::string_view hostname) {
  if (Status st = check_registry_options(options, layout); !st.ok()) return st;
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) {
    return Status(Reason::kIo, "cannot create the data directory " +
                                   internal::quote(options.data_dir.string()) + ": " +
                                   ec.message());
  }
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

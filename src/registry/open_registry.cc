#include "flurry/open_registry.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "core/durable_file.h"
#include "core/private_files.h"
#include "core/quote.h"
#include "db/postgres_conninfo.h"
#include "etcd_client.h"
#include "postgres_registry.h"

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

// What names a PostgreSQL registry: the server, the database and what selects the schema
// (the user, through search_path's "$user", and options such as -csearch_path=...). Never the
// password.
std::string postgres_identity(const internal::PostgresUrl& url) {
  std::string out = "postgres:";
  for (const char* key : {"host", "hostaddr", "port", "dbname", "user", "options"}) {
    const std::string value = url.setting(key);
    if (std::string_view(key) == "hostaddr" && value.empty()) continue;
    out += key;
    out += "=" + value + ";";
  }
  out.pop_back();
  return out;
}

// The options checked (check_registry_options), with the values parsed on the way: the
// PostgreSQL URL (the etcd endpoints are typed in RegistryOptions already), handed down as such so
// that nothing below parses or checks them again.
struct CheckedOptions {
  std::optional<internal::PostgresUrl> postgres_url;
};

Result<CheckedOptions> check_options(const RegistryOptions& options, const Layout& layout);

// The options as `scope` reads them: the oracle's static registry leads as node 0 of its own
// directory, whatever node the options give the node IDs.
RegistryOptions scoped_options(const RegistryOptions& options, RegistryScope scope) {
  RegistryOptions scoped = options;
  if (scope == RegistryScope::kTimestampOracle && scoped.kind == RegistryKind::kStatic) {
    scoped.node = 0;
    scoped.node_from_hostname = false;
  }
  return scoped;
}

std::string identity_of(const RegistryOptions& options, const CheckedOptions& checked) {
  switch (options.kind) {
    case RegistryKind::kSqlite:
      return "sqlite:registry.db";
    case RegistryKind::kStatic:
      // Not the node: static nodes share a directory (a horizon file and lock each), and one
      // node ID twice on a host is the host guard's to refuse (host_guard.h).
      return "static";
    case RegistryKind::kEtcd:
      // Not the endpoints: members are added, replaced and listed in any order without the
      // cluster becoming another one, and a restart after such a change must not be refused.
      return "etcd:cluster=" + options.cluster + ";prefix=/flurry/" + options.cluster;
    case RegistryKind::kPostgres:
      return postgres_identity(*checked.postgres_url);
  }
  return "unknown";
}

constexpr std::string_view kIdentityFile = "registry-identity";
constexpr std::size_t kMaxIdentityFile = 4096;

Result<std::string> read_identity(const std::filesystem::path& file) {
  Result<std::string> text = internal::read_small_file(file, kMaxIdentityFile);
  if (!text.ok()) return text.status();
  std::string identity = *text;
  if (!identity.empty() && identity.back() == '\n') identity.pop_back();
  if (identity.empty() || identity.find('\n') != std::string::npos) {
    return Status(Reason::kCorrupt,
                  internal::quote(file.string(), 1024) +
                      " does not hold one registry identity; restore it, or remove it to let the "
                      "next process record its own (only when no other registry ever used this "
                      "directory)");
  }
  return identity;
}

// Creates `file` with `content` unless it exists: written and fsynced under a unique temporary
// name, then linked into place (link() fails when the name exists, so one writer wins).
// Returns true when this call created it.
Result<bool> create_once(const std::filesystem::path& file, std::string_view content) {
  static std::atomic<unsigned> attempts{0};
  const std::filesystem::path tmp = file.string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                    std::to_string(attempts.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return internal::io_error("cannot create", tmp, errno);
  Status st;
  for (std::string_view left = content; st.ok() && !left.empty();) {
    const ssize_t n = ::write(fd, left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = internal::io_error("cannot write", tmp, errno);
    } else {
      left.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  if (st.ok() && ::fsync(fd) != 0) st = internal::io_error("cannot fsync", tmp, errno);
  if (::close(fd) != 0 && st.ok()) st = internal::io_error("cannot close", tmp, errno);
  bool created = false;
  if (st.ok()) {
    if (::link(tmp.c_str(), file.c_str()) == 0) {
      created = true;
    } else if (errno != EEXIST) {
      st = internal::io_error("cannot create", file, errno);
    }
  }
  ::unlink(tmp.c_str());
  if (!st.ok()) return st;
  if (created) {
    const std::filesystem::path dir = file.parent_path();
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return internal::io_error("cannot open", dir, errno);
    const bool synced = ::fsync(dfd) == 0;
    const int err = errno;
    ::close(dfd);
    if (!synced) return internal::io_error("cannot fsync", dir, err);
  }
  return created;
}

}  // namespace

std::filesystem::path default_data_dir() {
  if (const char* xdg = std::getenv("XDG_STATE_HOME");
      xdg != nullptr && std::filesystem::path(xdg).is_absolute()) {
    return std::filesystem::path(xdg) / "flurry";
  }
  if (::geteuid() == 0) return "/var/lib/flurry";
  std::filesystem::path home;
  if (const char* h = std::getenv("HOME"); h != nullptr && std::filesystem::path(h).is_absolute()) {
    home = h;
  } else if (const passwd* pw = ::getpwuid(::geteuid());
             pw != nullptr && pw->pw_dir != nullptr &&
             std::filesystem::path(pw->pw_dir).is_absolute()) {
    home = pw->pw_dir;
  } else {
    return "/var/lib/flurry";  // no home: the system's place (creating it may need rights)
  }
  return home / ".local" / "state" / "flurry";
}

Result<std::string> registry_identity(const RegistryOptions& options, const Layout& layout) {
  Result<CheckedOptions> checked = check_options(options, layout);
  if (!checked.ok()) return checked.status();
  return identity_of(options, *checked);
}

Status check_data_dir_identity(const std::filesystem::path& data_dir, std::string_view identity) {
  const std::filesystem::path file = data_dir / kIdentityFile;
  Result<std::string> recorded = read_identity(file);
  if (!recorded.ok() && recorded.status().code() == StatusCode::kNotFound) {
    std::string content(identity);
    content += '\n';
    Result<bool> created = create_once(file, content);
    if (!created.ok()) {
      return created.status().with_prefix(
          "cannot record the registry identity of the data "
          "directory");
    }
    if (*created) return OkStatus();
    recorded = read_identity(file);  // another process recorded one first
  }
  if (!recorded.ok()) {
    return recorded.status().with_prefix(
        "cannot read the registry identity of the data directory " +
        internal::quote(data_dir.string(), 1024));
  }
  if (*recorded == identity) return OkStatus();
  return Status(Reason::kStateMismatch,
                "the data directory " + internal::quote(data_dir.string(), 1024) +
                    " belongs to the registry " + internal::quote(*recorded, 1024) +
                    " (recorded in " + internal::quote(file.string(), 1024) +
                    "), not to the registry " + internal::quote(identity, 1024) +
                    " these settings name: a second registry beside the first would hand out the "
                    "same node IDs again. Use the same registry settings as the processes that "
                    "use this directory, or another data directory (--data-dir)");
}

Result<std::unique_ptr<HorizonFloor>> open_horizon_floor(const RegistryOptions& given,
                                                         const Layout& layout,
                                                         RegistryScope scope) {
  const RegistryOptions options = scoped_options(given, scope);
  Result<std::string> identity = registry_identity(options, layout);
  if (!identity.ok()) return identity.status();
  // The oracle's copies are keyed apart from the node IDs' even when the layouts are equal.
  if (scope == RegistryScope::kTimestampOracle) *identity += ";scope=tso";
  Result<HostDir> host = HostDir::open(options.host_dir);
  if (!host.ok()) return host.status().with_prefix("the host directory (host_dir)");
  return std::make_unique<HorizonFloor>(options.data_dir / "local-horizons",
                                        std::move(identity).value(), layout.to_string(),
                                        std::move(host).value());
}

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

Result<std::vector<EtcdEndpoint>> parse_etcd_endpoints(std::string_view text) {
  std::vector<EtcdEndpoint> out;
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
      return InvalidArgument(internal::quote_redacted(text) +
                             " has an empty endpoint; expected HOST:PORT[,HOST:PORT...]");
    }
    Result<EtcdEndpoint> ep = parse_etcd_endpoint(one);
    if (!ep.ok()) return ep.status();
    out.push_back(std::move(ep).value());
    if (comma == std::string_view::npos) {
      if (Status st = internal::check_etcd_transport(out, {}); !st.ok()) return st;
      return out;
    }
    start = comma + 1;
  }
}

Status check_registry_options(const RegistryOptions& options, const Layout& layout) {
  return check_options(options, layout).status();
}

namespace {

Result<CheckedOptions> check_options(const RegistryOptions& options, const Layout& layout) {
  CheckedOptions checked;
  const std::string kind(to_string(options.kind));
  if (options.kind != RegistryKind::kEtcd) {
    const char* etcd_setting = !options.etcd_endpoints.empty()          ? "etcd_endpoints"
                               : !options.etcd_user.empty()             ? "etcd_user"
                               : options.etcd_password_file.has_value() ? "etcd_password_file"
                               : options.etcd_tls.ca_file.has_value()   ? "etcd_ca_file"
                               : options.etcd_tls.cert_file.has_value() ? "etcd_cert_file"
                               : options.etcd_tls.key_file.has_value()  ? "etcd_key_file"
                                                                        : nullptr;
    if (etcd_setting != nullptr) {
      return InvalidArgument(std::string(etcd_setting) +
                             ": only used with the etcd registry, not the " + kind + " registry");
    }
  }
  if (options.kind == RegistryKind::kPostgres) {
    if (options.postgres_url.empty()) {
      return InvalidArgument(
          "postgres_url: the postgres registry needs a connection string "
          "(postgresql://user@host:5432/dbname, or key=value pairs such as host=... dbname=...)");
    }
    Result<internal::PostgresUrl> url = internal::PostgresUrl::parse(options.postgres_url);
    if (!url.ok()) return InvalidArgument("postgres_url: " + url.status().message());
    checked.postgres_url = std::move(url).value();
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
    return checked;
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
    if (Status st = internal::check_etcd_cluster_name(options.cluster); !st.ok()) {
      return st.with_prefix("cluster");
    }
    if (Status st = internal::check_etcd_transport(options.etcd_endpoints, options.etcd_tls);
        !st.ok()) {
      return st;
    }
    if (options.etcd_user.empty() && options.etcd_password_file) {
      return InvalidArgument("etcd_password_file: given without etcd_user");
    }
    if (!options.etcd_user.empty() && !options.etcd_password_file) {
      return InvalidArgument(
          "etcd_user: given without etcd_password_file (the file that holds its password)");
    }
    if (options.lease_ttl < kMinEtcdLeaseTtl) {
      return InvalidArgument("lease_ttl: " + std::to_string(options.lease_ttl.count()) +
                             " ms is too short for the etcd registry (at least " +
                             std::to_string(kMinEtcdLeaseTtl.count()) +
                             " ms: etcd's leases have whole seconds, 2 at least)");
    }
  }
  return checked;
}

}  // namespace

Result<std::unique_ptr<NodeRegistry>> open_registry(const RegistryOptions& given,
                                                    const Layout& layout, Clocks clocks,
                                                    std::string_view hostname,
                                                    RegistryScope scope) {
  const RegistryOptions options = scoped_options(given, scope);
  const bool tso = scope == RegistryScope::kTimestampOracle;
  Result<CheckedOptions> checked = check_options(options, layout);
  if (!checked.ok()) return checked.status();
  if (Status st = internal::open_data_dir(options.data_dir); !st.ok()) return st;
  if (Status st = check_data_dir_identity(options.data_dir, identity_of(options, *checked));
      !st.ok()) {
    return st;
  }
  switch (options.kind) {
    case RegistryKind::kStatic: {
      Result<std::uint64_t> node = static_node(options, layout, hostname);
      if (!node.ok()) return node.status();
      std::filesystem::path dir = options.data_dir;
      if (tso) {
        dir /= "tso";
        if (Status st = internal::open_data_dir(dir); !st.ok()) return st;
      }
      Result<std::unique_ptr<NodeRegistry>> r =
          open_static_registry(dir.string(), *node, layout.to_string());
      if (!r.ok()) return r.status().with_prefix("cannot open the static registry");
      return r;
    }
    case RegistryKind::kSqlite: {
      const std::string path =
          (options.data_dir / (tso ? "tso-registry.db" : "registry.db")).string();
      Result<std::unique_ptr<NodeRegistry>> r =
          open_sqlite_registry(path, options.lease_ttl, clocks.wall, layout.to_string());
      if (!r.ok()) {
        return r.status().with_prefix("cannot open the sqlite registry " + internal::quote(path));
      }
      return r;
    }
    case RegistryKind::kEtcd: {
      EtcdRegistryOptions etcd;
      etcd.cluster = options.cluster;
      if (tso) etcd.scope = "tso";
      etcd.ttl = options.lease_ttl;
      etcd.tls = options.etcd_tls;
      if (!options.etcd_user.empty()) {
        // Read here, at start, never kept beyond the client: it follows the admin token's rules.
        Result<std::string> password = internal::read_secret_file(
            *options.etcd_password_file, "etcd_password_file", "the etcd password");
        if (!password.ok()) return password.status();
        etcd.user = options.etcd_user;
        etcd.password = std::move(password).value();
      }
      Result<std::unique_ptr<NodeRegistry>> r = internal::open_etcd_registry(
          options.etcd_endpoints, etcd, layout.to_string(), clocks.wall);
      if (!r.ok()) return r.status().with_prefix("cannot open the etcd registry");
      return r;
    }
    case RegistryKind::kPostgres: {
      // The registry's messages name the server, its password masked.
      Result<std::unique_ptr<NodeRegistry>> r =
          internal::open_postgres_registry(std::move(*checked->postgres_url), options.lease_ttl,
                                           layout.to_string(), clocks.monotonic, tso ? "tso" : "");
      if (!r.ok()) return r.status().with_prefix("cannot open the postgres registry");
      return r;
    }
  }
  return InvalidArgument("unknown registry kind");
}

}  // namespace flurry

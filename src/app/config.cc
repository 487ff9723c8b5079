#include "app/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <variant>

#include "core/numbers.h"
#include "core/private_files.h"
#include "core/quote.h"
#include "core/utf8.h"
#include "db/postgres_conninfo.h"
#include "flurry/generator.h"
#include "flurry/host_guard.h"
#include "flurry/host_port.h"
#include "flurry/layout.h"
#include "tls/module_loader.h"

extern char** environ;  // NOLINT: POSIX

namespace flurry::app {

using internal::quote;
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kConfigVariable = "FLURRY_CONFIG";
constexpr std::uint64_t kDayMs = 86'400'000;
// segment_max_wait_ms at most: a request holds a thread of the segment pool while it waits.
constexpr std::uint64_t kMaxSegmentWaitMs = 60'000;

// A value before it is checked against its setting: text from the environment or a flag, or a
// typed TOML value.
struct Raw {
  enum class Type { kText, kInteger, kBool, kString, kOther } type = Type::kText;
  std::string text;          // kText, kString
  std::int64_t integer = 0;  // kInteger
  bool boolean = false;      // kBool
  std::string toml_type;     // what the file held: "an integer", "a table", ...
  std::string source;        // "flag --x", "environment variable FLURRY_X", "file.toml:3"
};

// A setting's value as TOML writes it; monostate when unset (node).
using TomlValue = std::variant<std::monostate, std::string, std::int64_t, bool>;

// One key: how it is read into a Config and written back. `read` checks the value on its own
// and returns a message without key or source (the caller adds them).
struct Setting {
  std::string_view key;
  std::string_view arg;
  std::string_view help;
  bool is_switch;
  Status (*read)(Config& config, const Raw& raw);
  TomlValue (*write)(const Config& config);
};

// ---- Reading one raw value ----

Status type_error(const Raw& raw, std::string_view expected) {
  return InvalidArgument("expected " + std::string(expected) + ", got " + raw.toml_type);
}

using internal::invalid_utf8_at;

// Non-empty text that --print-config can write back as TOML.
Result<std::string> read_text(const Raw& raw) {
  if (raw.type != Raw::Type::kText && raw.type != Raw::Type::kString) {
    return type_error(raw, "a string");
  }
  if (raw.text.empty()) return InvalidArgument("is empty");
  if (const std::size_t at = invalid_utf8_at(raw.text); at != std::string_view::npos) {
    return InvalidArgument("is not valid UTF-8 (at byte " + std::to_string(at) + ")");
  }
  return raw.text;
}

Result<std::uint64_t> parse_whole(std::string_view text) {
  const internal::ParsedUint n = internal::parse_uint(text);
  switch (n.error) {
    case internal::UintError::kNone:
      return n.value;
    case internal::UintError::kEmpty:
      return InvalidArgument("the value is empty; expected a whole number");
    case internal::UintError::kNotDigits:
      return InvalidArgument(quote(text) + " is not a whole number");
    case internal::UintError::kTooLarge:
      break;
  }
  return InvalidArgument(quote(text) + " is too large");
}

Result<std::uint64_t> read_uint(const Raw& raw, std::uint64_t min, std::uint64_t max) {
  std::uint64_t v = 0;
  if (raw.type == Raw::Type::kText) {
    Result<std::uint64_t> parsed = parse_whole(raw.text);
    if (!parsed.ok()) return parsed.status();
    v = *parsed;
  } else if (raw.type == Raw::Type::kInteger) {
    if (raw.integer < 0) {
      return InvalidArgument(std::to_string(raw.integer) + " must not be negative");
    }
    v = static_cast<std::uint64_t>(raw.integer);
  } else {
    return type_error(raw, "an integer");
  }
  if (v < min || v > max) {
    return InvalidArgument(std::to_string(v) + " is out of range (" + std::to_string(min) + " to " +
                           std::to_string(max) + ")");
  }
  return v;
}

Result<bool> read_bool(const Raw& raw) {
  if (raw.type == Raw::Type::kBool) return raw.boolean;
  if (raw.type != Raw::Type::kText) return type_error(raw, "true or false");
  if (raw.text == "true" || raw.text == "1") return true;
  if (raw.text == "false" || raw.text == "0") return false;
  return InvalidArgument(quote(raw.text) + " is not true or false");
}

// Text turned into a typed value by `parse` (a Result-returning function).
template <typename T, typename Parse>
Status read_parsed(const Raw& raw, T& out, Parse parse) {
  Result<std::string> text = read_text(raw);
  if (!text.ok()) return text.status();
  auto parsed = parse(*text);
  if (!parsed.ok()) return parsed.status();
  out = std::move(parsed).value();
  return OkStatus();
}

template <typename T>
Status read_number(const Raw& raw, T& out, std::uint64_t min, std::uint64_t max) {
  Result<std::uint64_t> v = read_uint(raw, min, max);
  if (!v.ok()) return v.status();
  out = static_cast<T>(*v);
  return OkStatus();
}

Status read_ms(const Raw& raw, milliseconds& out, std::uint64_t min, std::uint64_t max) {
  Result<std::uint64_t> v = read_uint(raw, min, max);
  if (!v.ok()) return v.status();
  out = milliseconds(*v);
  return OkStatus();
}

Result<LogLevel> parse_log_level(std::string_view text) {
  for (LogLevel l : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn,
                     LogLevel::kError, LogLevel::kCritical, LogLevel::kOff}) {
    if (to_string(l) == text) return l;
  }
  return InvalidArgument(quote(text) +
                         " is not one of trace, debug, info, warn, error, critical or off");
}

Result<RollbackPolicy> parse_rollback(std::string_view text) {
  Result<RollbackPolicy> p = parse_rollback_policy(text);
  if (!p.ok()) return InvalidArgument(quote(text) + " is not one of wait, fail or clock");
  return p;
}

TomlValue ms_value(milliseconds d) {
  return static_cast<std::int64_t>(d.count());
}

TomlValue number_value(std::uint64_t v) {
  return static_cast<std::int64_t>(v);
}

// An optional file name (admin_token_file, order_key_file): unset until given.
Status read_path(const Raw& raw, std::optional<std::filesystem::path>& out) {
  Result<std::string> t = read_text(raw);
  if (t.ok()) out = std::filesystem::path(*t);
  return t.status();
}

TomlValue path_value(const std::optional<std::filesystem::path>& path) {
  if (!path) return std::monostate{};
  return path->string();
}

// ---- The keys, in documentation order ----

const std::array<Setting, 57> kSettings = {{
    {"listen", "HOST:PORT", "Address to listen on (port 0: any free port)", false,
     [](Config& c, const Raw& r) { return read_parsed(r, c.http.listen, http::parse_listen); },
     [](const Config& c) -> TomlValue { return c.http.listen.to_string(); }},
    {"allowed_hosts", "NAMES",
     "Host names HTTP requests may give in Host besides IP addresses, localhost and the listen "
     "host, separated by commas; * allows any (against DNS rebinding)",
     false,
     [](Config& c, const Raw& r) {
       // Empty from any source: none (as the default).
       if ((r.type == Raw::Type::kText || r.type == Raw::Type::kString) && r.text.empty()) {
         c.http.allowed_hosts.clear();
         return OkStatus();
       }
       return read_parsed(r, c.http.allowed_hosts, http::parse_allowed_hosts);
     },
     [](const Config& c) -> TomlValue {
       if (c.http.allowed_hosts.empty()) return std::monostate{};
       return http::allowed_hosts_text(c.http.allowed_hosts);
     }},
    {"data_dir", "DIR", "Directory of the registry database / horizon files", false,
     [](Config& c, const Raw& r) {
       Result<std::string> t = read_text(r);
       if (t.ok()) c.service.registry.data_dir = *t;
       return t.status();
     },
     [](const Config& c) -> TomlValue { return c.service.registry.data_dir.string(); }},
    {"host_dir", "DIR",
     "Directory every flurry process of this host shares, whatever its user or data directory: "
     "host guards, host-wide horizon records and segment floors (default /var/tmp; sticky when "
     "others "
     "may write)",
     false,
     [](Config& c, const Raw& r) {
       Result<std::string> t = read_text(r);
       if (t.ok()) c.service.registry.host_dir = *t;
       return t.status();
     },
     [](const Config& c) -> TomlValue { return c.service.registry.host_dir.string(); }},
    {"registry", "NAME",
     "Node-ID registry: sqlite (leases on one host), etcd or postgres (leases across hosts) or "
     "static (a fixed node)",
     false,
     [](Config& c, const Raw& r) {
       return read_parsed(r, c.service.registry.kind, parse_registry_kind);
     },
     [](const Config& c) -> TomlValue { return std::string(to_string(c.service.registry.kind)); }},
    {"node", "ID", "Static registry: this node's ID", false,
     [](Config& c, const Raw& r) {
       std::uint64_t node = 0;
       Status st = read_number(r, node, 0, std::uint64_t{1} << 62);
       if (st.ok()) c.service.registry.node = node;
       return st;
     },
     [](const Config& c) -> TomlValue {
       if (!c.service.registry.node) return std::monostate{};
       return number_value(*c.service.registry.node);
     }},
    {"node_from_hostname", "",
     "Static registry: the node ID is the host name's trailing number "
     "(flurry-7 -> 7)",
     true,
     [](Config& c, const Raw& r) {
       Result<bool> b = read_bool(r);
       if (b.ok()) c.service.registry.node_from_hostname = *b;
       return b.status();
     },
     [](const Config& c) -> TomlValue { return c.service.registry.node_from_hostname; }},
    {"etcd_endpoints", "[https://]HOST:PORT[,...]",
     "etcd registry: the etcd members to use, separated by commas (https://: over TLS, all or "
     "none)",
     false,
     [](Config& c, const Raw& r) {
       return read_parsed(r, c.service.registry.etcd_endpoints, parse_etcd_endpoints);
     },
     [](const Config& c) -> TomlValue {
       if (c.service.registry.etcd_endpoints.empty()) return std::monostate{};
       std::string text;
       for (const EtcdEndpoint& endpoint : c.service.registry.etcd_endpoints) {
         text += text.empty() ? "" : ",";
         text += endpoint.to_string();
       }
       return text;
     }},
    {"cluster", "NAME",
     "etcd registry: this registry's name in etcd (keys under /flurry/NAME/); processes with "
     "one name share node IDs",
     false,
     [](Config& c, const Raw& r) {
       Result<std::string> t = read_text(r);
       if (t.ok()) c.service.registry.cluster = *t;
       return t.status();
     },
     [](const Config& c) -> TomlValue { return c.service.registry.cluster; }},
    {"etcd_user", "NAME",
     "etcd registry: the etcd user to authenticate as (with etcd_password_file; unset: no "
     "authentication)",
     false,
     [](Config& c, const Raw& r) {
       Result<std::string> t = read_text(r);
       if (t.ok()) c.service.registry.etcd_user = *t;
       return t.status();
     },
     [](const Config& c) -> TomlValue {
       if (c.service.registry.etcd_user.empty()) return std::monostate{};
       return c.service.registry.etcd_user;
     }},
    {"etcd_password_file", "FILE",
     "etcd registry: file holding etcd_user's password (mode 600; the password itself is never "
     "a setting)",
     false,
     [](Config& c, const Raw& r) { return read_path(r, c.service.registry.etcd_password_file); },
     [](const Config& c) { return path_value(c.service.registry.etcd_password_file); }},
    {"etcd_ca_file", "FILE",
     "etcd registry: CA bundle (PEM) that verifies https:// etcd endpoints (unset: the system's "
     "CAs)",
     false,
     [](Config& c, const Raw& r) { return read_path(r, c.service.registry.etcd_tls.ca_file); },
     [](const Config& c) { return path_value(c.service.registry.etcd_tls.ca_file); }},
    {"etcd_cert_file", "FILE",
     "etcd registry: client certificate (PEM) for https:// etcd endpoints that require one", false,
     [](Config& c, const Raw& r) { return read_path(r, c.service.registry.etcd_tls.cert_file); },
     [](const Config& c) { return path_value(c.service.registry.etcd_tls.cert_file); }},
    {"etcd_key_file", "FILE", "etcd registry: the private key (PEM) of etcd_cert_file", false,
     [](Config& c, const Raw& r) { return read_path(r, c.service.registry.etcd_tls.key_file); },
     [](const Config& c) { return path_value(c.service.registry.etcd_tls.key_file); }},
    {"postgres_url", "URL",
     "Postgres registry: libpq connection string, postgresql://user@host:5432/dbname or "
     "key=value pairs; off the host add ?sslmode=verify-full&sslrootcert=CA (a password is better "
     "kept in a passfile, PGPASSWORD or ~/.pgpass)",
     false,
     [](Config& c, const Raw& r) {
       Result<std::string> t = read_text(r);
       if (t.ok()) c.service.registry.postgres_url = *t;
       return t.status();
     },
     [](const Config& c) -> TomlValue {
       if (c.service.registry.postgres_url.empty()) return std::monostate{};
       return internal::redact_postgres_url(c.service.registry.postgres_url);
     }},
    {"layout", "LAYOUT", "Layout text or preset name (see 'flurry layout --list')", false,
     [](Config& c, const Raw& r) { return read_parsed(r, c.service.layout, Layout::parse); },
     [](const Config& c) -> TomlValue {
       const Layout& l = c.service.layout;
       return l.preset_name().empty() ? l.to_string() : l.preset_name();
     }},
    {"lease_ttl_ms", "MS",
     "Lease time to live (sqlite, etcd: at least 2000, postgres); renewed every third of it", false,
     [](Config& c, const Raw& r) { return read_ms(r, c.service.registry.lease_ttl, 500, kDayMs); },
     [](const Config& c) { return ms_value(c.service.registry.lease_ttl); }},
    {"rollback", "POLICY", "Clock behind by more than max-lead: wait, fail or clock", false,
     [](Config& c, const Raw& r) { return read_parsed(r, c.service.rollback, parse_rollback); },
     [](const Config& c) -> TomlValue { return std::string(to_string(c.service.rollback)); }},
    {"max_lead_ms", "MS", "How far IDs may run ahead of the clock", false,
     [](Config& c, const Raw& r) { return read_ms(r, c.service.max_lead, 0, kDayMs); },
     [](const Config& c) { return ms_value(c.service.max_lead); }},
    {"max_wait_ms", "MS", "Longest a request waits for a clock that stepped back", false,
     [](Config& c, const Raw& r) { return read_ms(r, c.service.max_wait, 0, kDayMs); },
     [](const Config& c) { return ms_value(c.service.max_wait); }},
    {"horizon_window_ms", "MS", "How far ahead the durable horizon is kept (> max-lead)", false,
     [](Config& c, const Raw& r) { return read_ms(r, c.service.horizon_window, 1, 2 * kDayMs); },
     [](const Config& c) { return ms_value(c.service.horizon_window); }},
    {"io_threads", "N", "HTTP I/O threads: one less than the cores, at least 1", false,
     [](Config& c, const Raw& r) { return read_number(r, c.http.io_threads, 1, 256); },
     [](const Config& c) { return number_value(c.http.io_threads); }},
    {"max_batch", "N", "Most IDs per request (at most 1000000)", false,
     [](Config& c, const Raw& r) {
       Result<std::uint64_t> v = read_uint(r, 1, std::numeric_limits<std::uint64_t>::max());
       if (!v.ok()) return v.status();
       if (*v > http::kMaxBatchLimit) {
         return InvalidArgument(std::to_string(*v) + " is more than " +
                                std::to_string(http::kMaxBatchLimit) +
                                ", the most IDs one request may ask for (a response of " +
                                std::to_string(http::kMaxBatchLimit) +
                                " IDs is about 23 MB); ask for more in several requests");
       }
       c.service.max_batch = *v;
       return OkStatus();
     },
     [](const Config& c) { return number_value(c.service.max_batch); }},
    {"max_connections", "N", "Most open HTTP connections", false,
     [](Config& c, const Raw& r) { return read_number(r, c.http.max_connections, 1, 1'000'000); },
     [](const Config& c) { return number_value(c.http.max_connections); }},
    {"idle_timeout_ms", "MS", "Close keep-alive connections idle this long", false,
     [](Config& c, const Raw& r) { return read_ms(r, c.http.idle_timeout, 100, kDayMs); },
     [](const Config& c) { return ms_value(c.http.idle_timeout); }},
    {"header_limit", "BYTES",
     "Largest request header, with a chunked body's chunk-size lines and trailer (larger: 431)",
     false,
     [](Config& c, const Raw& r) { return read_number(r, c.http.header_limit, 512, 1 << 20); },
     [](const Config& c) { return number_value(c.http.header_limit); }},
    {"body_limit", "BYTES", "Largest request body (larger: 413)", false,
     [](Config& c, const Raw& r) {
       return read_number(r, c.http.body_limit, 0, std::uint64_t{64} << 20);
     },
     [](const Config& c) { return number_value(c.http.body_limit); }},
    {"response_budget", "BYTES",
     "Bytes that large responses being written or sent may hold in all (beyond it: 503)", false,
     [](Config& c, const Raw& r) {
       return read_number(r, c.http.response_budget, std::uint64_t{1} << 20,
                          std::uint64_t{1} << 40);
     },
     [](const Config& c) { return number_value(c.http.response_budget); }},
    {"tls_cert_file", "FILE",
     "TLS: the server's certificate chain (PEM) for HTTPS and gRPC; with tls_key_file (unset: "
     "plain text)",
     false, [](Config& c, const Raw& r) { return read_path(r, c.tls.cert_file); },
     [](const Config& c) { return path_value(c.tls.cert_file); }},
    {"tls_key_file", "FILE",
     "TLS: the private key (PEM, unencrypted, not readable by others) of tls_cert_file", false,
     [](Config& c, const Raw& r) { return read_path(r, c.tls.key_file); },
     [](const Config& c) { return path_value(c.tls.key_file); }},
    {"tls_client_ca_file", "FILE",
     "TLS: CA certificates (PEM) that sign client certificates; set, every client must present "
     "one (mTLS)",
     false, [](Config& c, const Raw& r) { return read_path(r, c.tls.client_ca_file); },
     [](const Config& c) { return path_value(c.tls.client_ca_file); }},
    {"grpc_listen", "HOST:PORT",
     "gRPC address to listen on (port 0: any free port; empty: no gRPC server)", false,
     [](Config& c, const Raw& r) {
       if ((r.type == Raw::Type::kText || r.type == Raw::Type::kString) && r.text.empty()) {
         c.grpc.listen.reset();
         return OkStatus();
       }
       http::ListenAddress address;
       Status st = read_parsed(r, address, http::parse_listen);
       if (st.ok()) c.grpc.listen = address;
       return st;
     },
     [](const Config& c) -> TomlValue {
       return c.grpc.listen ? c.grpc.listen->to_string() : std::string();
     }},
    {"grpc_max_streams", "N", "gRPC: concurrent RPCs on one connection at most", false,
     [](Config& c, const Raw& r) {
       return read_number(r, c.grpc.max_concurrent_streams, 1, 100'000);
     },
     [](const Config& c) { return number_value(c.grpc.max_concurrent_streams); }},
    {"grpc_max_message_bytes", "BYTES",
     "gRPC: largest response message (a Next that could exceed it is refused before issuing)",
     false,
     [](Config& c, const Raw& r) {
       return read_number(r, c.grpc.max_message_bytes, std::uint64_t{64} << 10,
                          std::uint64_t{1} << 30);
     },
     [](const Config& c) { return number_value(c.grpc.max_message_bytes); }},
    {"grpc_keepalive_ms", "MS", "gRPC: ping a connection without traffic this often", false,
     [](Config& c, const Raw& r) { return read_ms(r, c.grpc.keepalive, 1000, kDayMs); },
     [](const Config& c) { return ms_value(c.grpc.keepalive); }},
    {"grpc_idle_timeout_ms", "MS", "gRPC: close a connection without any RPC this long", false,
     [](Config& c, const Raw& r) { return read_ms(r, c.grpc.idle_timeout, 1000, kDayMs); },
     [](const Config& c) { return ms_value(c.grpc.idle_timeout); }},
    {"grpc_max_range", "N", "gRPC: most IDs one StreamRange may ask for", false,
     [](Config& c, const Raw& r) {
       return read_number(r, c.grpc.max_range, 1, grpc_api::kMaxStreamRangeLimit);
     },
     [](const Config& c) { return number_value(c.grpc.max_range); }},
    {"tso", "",
     "Run the timestamp oracle: strictly increasing timestamps from one leader elected through "
     "the registry (GET /v1/tso, gRPC flurry.v1.Tso)",
     true,
     [](Config& c, const Raw& r) {
       Result<bool> b = read_bool(r);
       if (b.ok()) c.tso.enabled = *b;
       return b.status();
     },
     [](const Config& c) -> TomlValue { return c.tso.enabled; }},
    {"tso_advertise", "HOST",
     "Timestamp oracle: the host clients and the other servers reach this one at (default: the "
     "listen host, or the host name on a wildcard address)",
     false,
     [](Config& c, const Raw& r) {
       Result<std::string> t = read_text(r);
       if (!t.ok()) return t.status();
       // The host of HOST:PORT, as the one address parser reads it.
       Result<HostPort> checked = parse_host_port(
           (t->find(':') != std::string::npos && !t->starts_with("[") ? "[" + *t + "]" : *t) + ":1",
           HostPortUse::kConnect);
       if (!checked.ok()) {
         return InvalidArgument("not a host name or IP address: " + checked.status().message());
       }
       c.tso.advertise = checked->host;
       return OkStatus();
     },
     [](const Config& c) -> TomlValue {
       if (!c.tso.advertise) return std::monostate{};
       return *c.tso.advertise;
     }},
    {"segment_stores", "STORES",
     "Segment mode: where the tags' counters live, separated by commas: sqlite "
     "(<data_dir>/segments.db), sqlite:PATH or a PostgreSQL URL",
     false,
     [](Config& c, const Raw& r) {
       Result<std::string> t = read_text(r);
       if (!t.ok()) return t.status();
       // Parsed here, once, so that the message names this source; resolve_segments moves the
       // "sqlite" entries into data_dir once it is known (place_segment_stores).
       Result<std::vector<SegmentStoreSpec>> specs = parse_segment_stores(*t, ".");
       if (!specs.ok()) return specs.status();
       c.segments.stores_text = *t;
       c.segments.stores = std::move(specs).value();
       return OkStatus();
     },
     [](const Config& c) -> TomlValue { return redact_segment_stores(c.segments.stores_text); }},
    {"segment_prefetch_percent", "PERCENT",
     "Segment mode: share of a range used before the next one is fetched", false,
     [](Config& c, const Raw& r) {
       Result<std::uint64_t> v = read_uint(r, 1, 99);
       if (v.ok()) c.segments.options.prefetch_at = static_cast<double>(*v) / 100.0;
       return v.status();
     },
     [](const Config& c) {
       return number_value(
           static_cast<std::uint64_t>(std::llround(c.segments.options.prefetch_at * 100)));
     }},
    {"segment_target_duration_ms", "MS",
     "Segment mode: how long one range should last (the step adapts to it)", false,
     [](Config& c, const Raw& r) {
       return read_ms(r, c.segments.options.target_duration, 1, 7 * kDayMs);
     },
     [](const Config& c) { return ms_value(c.segments.options.target_duration); }},
    {"segment_max_step", "N", "Segment mode: the largest step the adaptive step grows to", false,
     [](Config& c, const Raw& r) {
       return read_number(r, c.segments.options.max_step, 1, kMaxSegmentStep);
     },
     [](const Config& c) { return number_value(c.segments.options.max_step); }},
    {"segment_max_wait_ms", "MS",
     "Segment mode: longest a request waits for a tag whose buffers are both empty (then 503)",
     false,
     [](Config& c, const Raw& r) {
       return read_ms(r, c.segments.options.max_wait, 0, kMaxSegmentWaitMs);
     },
     [](const Config& c) { return ms_value(c.segments.options.max_wait); }},
    {"admin_token_file", "FILE",
     "File holding the bearer token POST /v1/segments needs (unset: creating tags over HTTP is "
     "disabled)",
     false, [](Config& c, const Raw& r) { return read_path(r, c.segments.admin_token_file); },
     [](const Config& c) { return path_value(c.segments.admin_token_file); }},
    {"token_file", "FILE",
     "File of bearer tokens, one per line with its scopes: <token> ids,read,admin,orders:decode "
     "(unset: only admin_token_file's token)",
     false, [](Config& c, const Raw& r) { return read_path(r, c.auth.token_file); },
     [](const Config& c) { return path_value(c.auth.token_file); }},
    {"open_scopes", "SCOPES", "Scopes served without a token: none, or a list of ids and read",
     false,
     [](Config& c, const Raw& r) {
       return read_parsed(r, c.auth.open_scopes, ops::parse_open_scopes);
     },
     [](const Config& c) -> TomlValue { return to_string(c.auth.open_scopes); }},
    {"order_key_file", "FILE",
     "Order numbers: file of the AES keys by version (unset: the environment variable "
     "FLURRY_ORDER_KEYS; neither: order numbers are off)",
     false, [](Config& c, const Raw& r) { return read_path(r, c.orders.key_file); },
     [](const Config& c) { return path_value(c.orders.key_file); }},
    {"order_alphabet", "NAME", "Order numbers: digits or base32", false,
     [](Config& c, const Raw& r) {
       return read_parsed(r, c.orders.alphabet, order::parse_order_alphabet);
     },
     [](const Config& c) -> TomlValue { return std::string(order::to_string(c.orders.alphabet)); }},
    {"order_check", "NAME",
     "Order numbers: check character damm, luhn (digits), mod37 (base32) or none (unset: damm "
     "for digits, mod37 for base32)",
     false,
     [](Config& c, const Raw& r) {
       OrderCheck check = OrderCheck::kNone;
       Status st = read_parsed(r, check, order::parse_order_check);
       if (st.ok()) c.orders.check = check;
       return st;
     },
     [](const Config& c) -> TomlValue {
       if (!c.orders.check) return std::monostate{};
       return std::string(order::to_string(*c.orders.check));
     }},
    {"order_length", "N",
     "Order numbers: payload characters (0: the fewest that cover the source's IDs)", false,
     [](Config& c, const Raw& r) {
       Result<std::uint64_t> v = read_uint(r, 0, 64);
       if (v.ok()) c.orders.length = static_cast<std::size_t>(*v);
       return v.status();
     },
     [](const Config& c) { return number_value(c.orders.length); }},
    {"order_prefix", "PREFIX",
     "Order numbers: \"date\" (the ID's YYMMDD) or a literal of 1-8 characters 0-9, A-Z (unset: "
     "none)",
     false,
     [](Config& c, const Raw& r) {
       return read_parsed(r, c.orders.prefix, order::parse_order_prefix);
     },
     [](const Config& c) -> TomlValue {
       if (c.orders.prefix.empty()) return std::monostate{};
       return c.orders.prefix;
     }},
    {"order_segment_prefix", "PREFIXES",
     "Order numbers: the literal prefix of segment tags' numbers, TAG=LITERAL pairs separated by "
     "commas (*=LITERAL: every other tag) or one LITERAL for all; set, every source has a prefix "
     "of its own and numbers of different sources are never equal (unset: tags use order_prefix)",
     false,
     [](Config& c, const Raw& r) {
       return read_parsed(r, c.orders.tag_prefixes, order::parse_order_segment_prefix);
     },
     [](const Config& c) -> TomlValue {
       if (c.orders.tag_prefixes.empty()) return std::monostate{};
       return order::format_order_segment_prefix(c.orders.tag_prefixes);
     }},
    {"order_utc_offset", "OFFSET", "Order numbers: the UTC offset of the date prefix, e.g. +08:00",
     false,
     [](Config& c, const Raw& r) {
       return read_parsed(r, c.orders.utc_offset_minutes, order::parse_utc_offset);
     },
     [](const Config& c) -> TomlValue {
       return order::format_utc_offset(c.orders.utc_offset_minutes);
     }},
    {"order_group", "N", "Order numbers: display group size (0: no grouping)", false,
     [](Config& c, const Raw& r) {
       Result<std::uint64_t> v = read_uint(r, 0, 32);
       if (v.ok()) c.orders.group = static_cast<std::size_t>(*v);
       return v.status();
     },
     [](const Config& c) { return number_value(c.orders.group); }},
    {"order_separator", "CHAR", "Order numbers: the group separator, one of - _ . / or a space",
     false,
     [](Config& c, const Raw& r) {
       if (r.type != Raw::Type::kText && r.type != Raw::Type::kString) {
         return type_error(r, "a string");
       }
       Result<char> sep = order::parse_order_separator(r.text);
       if (sep.ok()) c.orders.separator = *sep;
       return sep.status();
     },
     [](const Config& c) -> TomlValue { return std::string(1, c.orders.separator); }},
    {"log_level", "LEVEL", "trace, debug, info, warn, error, critical or off", false,
     [](Config& c, const Raw& r) { return read_parsed(r, c.log_level, parse_log_level); },
     [](const Config& c) -> TomlValue { return std::string(to_string(c.log_level)); }},
}};

const Setting* find_setting(std::string_view key) {
  for (const Setting& s : kSettings) {
    if (s.key == key) return &s;
  }
  return nullptr;
}

std::string env_name(std::string_view key) {
  std::string out = "FLURRY_";
  for (char c : key) out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return out;
}

std::string flag_name(std::string_view key) {
  std::string out = "--";
  for (char c : key) out += c == '_' ? '-' : c;
  return out;
}

// `value` as one line of TOML, "key = value", written by toml++.
std::string toml_line(std::string_view key, const TomlValue& value) {
  toml::table t;
  std::visit(
      [&](const auto& v) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(v)>, std::monostate>) {
          t.insert(key, v);
        }
      },
      value);
  std::ostringstream out;
  out << t;
  return out.str();
}

// Just the value of toml_line(), for help texts.
std::string toml_text(const TomlValue& value) {
  if (std::holds_alternative<std::monostate>(value)) return "";
  const std::string line = toml_line("k", value);
  return line.substr(line.find('=') + 2);
}

// ---- Messages ----

// Levenshtein distance, for "did you mean" hints.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The known name (a key, or its environment variable with `as_env`) closest to `unknown`, and
// its distance.
std::pair<std::string, std::size_t> closest(std::string_view unknown, bool as_env) {
  std::string best;
  std::size_t best_distance = std::string::npos;
  for (const Setting& s : kSettings) {
    const std::string candidate = as_env ? env_name(s.key) : std::string(s.key);
    const std::size_t d = distance(unknown, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return {best, best_distance};
}

std::string known_keys() {
  std::string out;
  for (const Setting& s : kSettings) {
    out += out.empty() ? "" : ", ";
    out += s.key;
  }
  return out;
}

Status bad(std::string_view key, const Status& why, std::string_view source) {
  return InvalidArgument(std::string(key) + ": " + why.message() + " (" + std::string(source) +
                         ")");
}

// ---- Sources ----

using Sources = std::map<std::string, std::string, std::less<>>;

Status apply(Config& config, const Setting& setting, const Raw& raw, Sources& sources) {
  if (Status st = setting.read(config, raw); !st.ok()) return bad(setting.key, st, raw.source);
  sources[std::string(setting.key)] = raw.source;
  return OkStatus();
}

std::string read_error(const std::string& path) {
  return "cannot read config file " + quote(path, 1024) + ": " + std::strerror(errno);
}

Raw raw_of(const toml::node& v, std::string where) {
  Raw raw;
  raw.source = std::move(where);
  if (v.is_integer()) {
    raw.type = Raw::Type::kInteger;
    raw.integer = v.as_integer()->get();
    raw.toml_type = "an integer";
  } else if (v.is_string()) {
    raw.type = Raw::Type::kString;
    raw.text = v.as_string()->get();
    raw.toml_type = "a string";
  } else if (v.is_boolean()) {
    raw.type = Raw::Type::kBool;
    raw.boolean = v.as_boolean()->get();
    raw.toml_type = "a boolean";
  } else {
    raw.type = Raw::Type::kOther;
    raw.toml_type = v.is_table()            ? "a table"
                    : v.is_array()          ? "an array"
                    : v.is_floating_point() ? "a floating-point number"
                                            : "a date or time";
  }
  return raw;
}

Status apply_file(const std::string& path, Config& config, Sources& sources) {
  std::string text;
  {
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in) return InvalidArgument(read_error(path));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return InvalidArgument(read_error(path));
    text = ss.str();
  }
  toml::table table;
  try {
    table = toml::parse(text, std::string_view(path));
  } catch (const toml::parse_error& e) {
    return InvalidArgument("config file " + path + ":" + std::to_string(e.source().begin.line) +
                           ":" + std::to_string(e.source().begin.column) + ": " +
                           std::string(e.description()));
  }
  for (auto&& [k, v] : table) {
    const std::string key(k.str());
    const std::string where = path + ":" + std::to_string(v.source().begin.line);
    const Setting* setting = find_setting(key);
    if (setting == nullptr) {
      const auto [best, d] = closest(key, false);
      return InvalidArgument(
          "unknown key " + quote(key) + " in config file " + where +
          (d < 3 ? " (did you mean " + quote(best) + "?)" : " (known keys: " + known_keys() + ")"));
    }
    if (Status st = apply(config, *setting, raw_of(v, where), sources); !st.ok()) return st;
  }
  return OkStatus();
}

// The file named by the flag, else by FLURRY_CONFIG.
Result<std::optional<std::string>> config_file(const ConfigInputs& inputs) {
  if (inputs.file) {
    if (inputs.file->empty()) return InvalidArgument("--config: the file name is empty");
    return inputs.file;
  }
  for (const auto& [name, value] : inputs.env) {
    if (name != kConfigVariable) continue;
    if (value.empty()) {
      return InvalidArgument(
          "environment variable FLURRY_CONFIG is empty; unset it or name a "
          "TOML file");
    }
    return std::optional<std::string>(value);
  }
  return std::optional<std::string>();
}

// Known variables apply in key order, so errors do not depend on the order of `environ`;
// unknown FLURRY_* ones become warnings.
Status apply_environment(const ConfigInputs& inputs, Config& config, Sources& sources,
                         std::vector<std::string>& warnings) {
  for (const auto& [name, value] : inputs.env) {
    // FLURRY_ORDER_KEYS holds key material: read at start (load_order_keys), never a setting.
    // FLURRY_HOST_GUARD_SCOPE separates test suites' "hosts" (host_guard.h), never a setting.
    // FLURRY_MODULE_DIR is where modules are looked for first (tls/module_loader.h).
    if (name == internal::kModuleDirVariable && !value.empty() && ::geteuid() == 0) {
      warnings.push_back(
          "environment variable FLURRY_MODULE_DIR is set for a process running as "
          "root: its modules are loaded from " +
          quote(value, 1024) +
          " before the installed ones (when owned by root and not writable by "
          "group or others); unset it unless that is meant");
    }
    if (name.substr(0, 7) != "FLURRY_" || name == kConfigVariable ||
        name == order::kOrderKeysVariable || name == kHostGuardScopeVariable ||
        name == internal::kModuleDirVariable) {
      continue;
    }
    // `name` captured by an init-capture: clang 14 (tools/check-thread-safety.py) cannot capture
    // a structured binding implicitly.
    if (std::any_of(kSettings.begin(), kSettings.end(),
                    [&, &name = name](const Setting& s) { return env_name(s.key) == name; })) {
      continue;
    }
    warnings.push_back("environment variable " + quote(name) +
                       " is not a flurry setting (ignored; the closest is " +
                       closest(name, true).first + ")");
  }
  for (const Setting& s : kSettings) {
    const std::string var = env_name(s.key);
    for (const auto& [name, value] : inputs.env) {
      if (name != var) continue;
      Raw raw;
      raw.text = value;
      raw.source = "environment variable " + var;
      if (Status st = apply(config, s, raw, sources); !st.ok()) return st;
    }
  }
  return OkStatus();
}

// The cross-key rules are those of the service (service::check_service_options); its message names
// the settings, and the sources of the ones the user set are added.
Status check_combinations(const Config& c, const Sources& sources) {
  Status st = service::check_service_options(c.service);
  if (st.ok()) return st;
  // The library's names of settings and their keys here.
  constexpr std::array<std::pair<std::string_view, std::string_view>, 18> kNames = {{
      {"registry", "registry"},
      {"etcd_endpoints", "etcd_endpoints"},
      {"etcd_user", "etcd_user"},
      {"etcd_password_file", "etcd_password_file"},
      {"etcd_ca_file", "etcd_ca_file"},
      {"etcd_cert_file", "etcd_cert_file"},
      {"etcd_key_file", "etcd_key_file"},
      {"cluster", "cluster"},
      {"postgres_url", "postgres_url"},
      {"node_from_hostname", "node_from_hostname"},
      {"node", "node"},
      {"layout", "layout"},
      {"lease_ttl", "lease_ttl_ms"},
      {"rollback", "rollback"},
      {"max_lead", "max_lead_ms"},
      {"max_wait", "max_wait_ms"},
      {"horizon_window", "horizon_window_ms"},
      {"max_batch", "max_batch"},
  }};
  const std::string& message = st.message();
  const auto is_word = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  };
  std::string where;
  for (const auto& [name, key] : kNames) {
    bool mentioned = false;
    for (std::size_t at = message.find(name); at != std::string::npos && !mentioned;
         at = message.find(name, at + 1)) {
      const std::size_t end = at + name.size();
      mentioned = (at == 0 || !is_word(message[at - 1])) &&
                  (end == message.size() || !is_word(message[end]));
    }
    auto it = sources.find(key);
    if (!mentioned || it == sources.end()) continue;  // defaults go unmentioned
    where += where.empty() ? "" : "; ";
    where += std::string(key) + " from " + it->second;
  }
  return InvalidArgument(message + (where.empty() ? "" : " (" + where + ")"));
}

// TLS needs a certificate and its key together; client certificates are checked only over TLS.
Status check_tls(const tls::TlsOptions& tls, const Sources& sources) {
  const auto from = [&sources](std::string_view key) {
    auto it = sources.find(key);
    return it == sources.end() ? std::string()
                               : " (" + std::string(key) + " from " + it->second + ")";
  };
  if (tls.cert_file && !tls.key_file) {
    return InvalidArgument("tls_cert_file is set but tls_key_file is not: TLS needs both" +
                           from("tls_cert_file"));
  }
  if (tls.key_file && !tls.cert_file) {
    return InvalidArgument("tls_key_file is set but tls_cert_file is not: TLS needs both" +
                           from("tls_key_file"));
  }
  if (tls.client_ca_file && !tls.cert_file) {
    return InvalidArgument(
        "tls_client_ca_file is set but tls_cert_file and tls_key_file are not: client "
        "certificates are checked only over TLS" +
        from("tls_client_ca_file"));
  }
  return OkStatus();
}

// Segment mode's settings as typed values: the store list placed in the final data_dir (parsed
// by its setting, or here for the default), max_batch shared with the service, the options
// checked together.
Status resolve_segments(Config& c, const Sources& sources) {
  const auto source_of = [&sources](std::string_view key) {
    auto it = sources.find(key);
    return it == sources.end() ? std::string("default") : it->second;
  };
  if (c.segments.stores.empty()) {  // no source set it: the default text
    Result<std::vector<SegmentStoreSpec>> stores =
        parse_segment_stores(c.segments.stores_text, c.service.registry.data_dir);
    if (!stores.ok()) {
      return bad("segment_stores", stores.status(), source_of("segment_stores"));
    }
    c.segments.stores = std::move(stores).value();
  } else if (Status st = place_segment_stores(c.segments.stores, c.service.registry.data_dir);
             !st.ok()) {
    return bad("segment_stores", st, source_of("segment_stores"));
  }
  c.segments.options.max_batch = c.service.max_batch;
  if (Status st = check_segment_options(c.segments.options); !st.ok()) {
    return InvalidArgument("segment settings: " + st.message());
  }
  return OkStatus();
}

// A PostgreSQL connection that a man in the middle can downgrade to plain text (no sslmode, a
// remote host) is a start warning: libpq reads PGSSLMODE and PGHOST from the process itself.
void warn_downgradable_postgres(const Config& c, std::vector<std::string>& warnings) {
  const char* sslmode = std::getenv("PGSSLMODE");
  const char* host = std::getenv("PGHOST");
  const auto check = [&](const internal::PostgresUrl& url, std::string_view whose) {
    if (auto w = internal::postgres_downgrade_warning(url, whose, sslmode, host)) {
      warnings.push_back(std::move(*w));
    }
  };
  if (c.service.registry.kind == RegistryKind::kPostgres &&
      !c.service.registry.postgres_url.empty()) {
    // A malformed string is open_registry's to refuse, with its own message.
    if (Result<internal::PostgresUrl> url =
            internal::PostgresUrl::parse(c.service.registry.postgres_url);
        url.ok()) {
      check(*url, "postgres_url");
    }
  }
  for (const SegmentStoreSpec& store : c.segments.stores) {
    if (store.parsed_postgres_url) check(*store.parsed_postgres_url, "segment store");
  }
}

// Order numbers: the check character must fit the alphabet; the message names both keys and
// where each came from.
Status resolve_orders(const Config& c, const Sources& sources) {
  if (Status st = order::check_order_prefixes(c.orders, "order_prefix", "order_segment_prefix");
      !st.ok()) {
    return st;
  }
  Status st = order::check_order_settings(c.orders, "order_check", "order_alphabet");
  if (st.ok()) return st;
  std::string where;
  for (std::string_view key : {"order_check", "order_alphabet"}) {
    auto it = sources.find(key);
    where += where.empty() ? "" : "; ";
    where += std::string(key) + " from " + (it == sources.end() ? "default" : it->second);
  }
  return InvalidArgument(st.message() + " (" + where + ")");
}

}  // namespace

std::string_view to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
    case LogLevel::kOff:
      return "off";
  }
  return "info";
}

std::span<const SettingInfo> settings() {
  static const std::vector<SettingInfo> kInfos = [] {
    const Config defaults;
    std::vector<SettingInfo> out;
    for (const Setting& s : kSettings) {
      std::string help(s.help);
      const std::string value = toml_text(s.write(defaults));
      if (!s.is_switch && !value.empty()) help += " (default " + value + ")";
      out.push_back({s.key, flag_name(s.key), env_name(s.key), s.arg, s.is_switch, help});
    }
    return out;
  }();
  return kInfos;
}

std::vector<std::pair<std::string, std::string>> flurry_environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.substr(0, 7) != "FLURRY_") continue;
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return out;
}

Result<LoadedConfig> load_config(const ConfigInputs& inputs) {
  LoadedConfig loaded;
  Config& config = loaded.config;
  Sources sources;
  Result<std::optional<std::string>> file = config_file(inputs);
  if (!file.ok()) return file.status();
  if (*file) {
    if (Status st = apply_file(**file, config, sources); !st.ok()) return st;
  }
  if (Status st = apply_environment(inputs, config, sources, loaded.warnings); !st.ok()) return st;
  for (const FlagValue& f : inputs.flags) {
    const Setting* setting = find_setting(f.key);
    if (setting == nullptr) return InvalidArgument("unknown setting " + quote(f.key));
    Raw raw;
    raw.text = f.value;
    raw.source = "flag " + f.flag;
    if (Status st = apply(config, *setting, raw, sources); !st.ok()) return st;
  }
  if (Status st = check_combinations(config, sources); !st.ok()) return st;
  if (Status st = check_tls(config.tls, sources); !st.ok()) return st;
  if (Status st = resolve_segments(config, sources); !st.ok()) return st;
  if (Status st = resolve_orders(config, sources); !st.ok()) return st;
  warn_downgradable_postgres(config, loaded.warnings);
  return loaded;
}

std::string to_toml(const Config& config) {
  std::string out = "# flurry serve: effective configuration\n";
  for (const Setting& s : kSettings) {
    const TomlValue value = s.write(config);
    if (std::holds_alternative<std::monostate>(value)) {
      out += "# " + std::string(s.key) + " = (not set)\n";
    } else {
      out += toml_line(s.key, value) + "\n";
    }
  }
  return out;
}

}  // namespace flurry::app

// The configuration of `flurry serve`: every setting with its documented default, and the
// loader that merges the sources in the order flags > FLURRY_* environment variables > TOML file
// > defaults.
//
// Every value is validated once, and a bad one is reported with the key and where it came from:
// "lease_ttl_ms: 'abc' is not a whole number (flag --lease-ttl-ms)",
// "max_lead_ms: ... (/etc/flurry.toml:7)", "registry: ... (environment variable FLURRY_REGISTRY)".
// Unknown TOML keys and unknown FLURRY_* variables are errors: a typo must not be ignored.
//
// Keys are the field names below, identical in TOML; the environment variable of a key is
// FLURRY_ + the key in upper case (FLURRY_LEASE_TTL_MS), its flag -- + the key with '-' for '_'
// (--lease-ttl-ms). FLURRY_CONFIG names the TOML file when --config is not given.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/status.h"

namespace flurry::server {

// std::thread::hardware_concurrency() - 1, at least 1.
[[nodiscard]] std::uint32_t default_io_threads() noexcept;

struct Config {
  // host:port to listen on ("[::1]:7609" for IPv6; port 0 picks a free port).
  std::string listen = "127.0.0.1:7609";
  // Where the registry database (sqlite) or the node's horizon file (static) lives. Created when
  // missing.
  std::string data_dir = "./flurry-data";
  // "sqlite": node IDs leased from <data_dir>/registry.db, shared by the processes of one host.
  // "static": a fixed node ID (node or node_from_hostname), its horizon in data_dir.
  std::string registry = "sqlite";
  // The node ID (static registry only).
  std::optional<std::uint64_t> node;
  // Static registry: take the node ID from the host name's trailing ordinal ("flurry-7" -> 7),
  // as a Kubernetes StatefulSet names its pods.
  bool node_from_hostname = false;
  // Layout text or preset name (see `flurry layout --list`).
  std::string layout = "flurry";
  // Lease time to live (sqlite registry); renewed every third of it.
  std::uint64_t lease_ttl_ms = 10000;
  // When the clock is behind the last issued time by more than max_lead: "wait" (up to
  // max_wait_ms), "fail", or "clock" (switch clock generation; layouts with a clock field).
  std::string rollback = "wait";
  // How far the time field of an ID may run ahead of the clock.
  std::uint64_t max_lead_ms = 1000;
  // Longest a request waits for a clock that stepped back.
  std::uint64_t max_wait_ms = 3000;
  // How far ahead of now the durable horizon is kept; must exceed max_lead_ms. A crash costs a
  // restart at most about this much waiting.
  std::uint64_t horizon_window_ms = 2000;
  // HTTP I/O threads. Default: one less than the machine's cores, at least 1, so that on a small
  // machine the clients and the kernel's network stack keep a core (on 2 cores, 2 I/O threads
  // beside a load generator raised p99 from 0.5 ms to 4 ms).
  std::uint32_t io_threads = default_io_threads();
  // Most IDs per request (lowered at start to what the layout can issue within max_lead_ms).
  std::uint64_t max_batch = 100000;
  // Open HTTP connections at most; further ones are accepted and closed at once.
  std::uint64_t max_connections = 10000;
  // A keep-alive connection without a request for this long is closed.
  std::uint64_t idle_timeout_ms = 30000;
  // Largest request header (request line and fields), bytes; larger ones get 431.
  std::uint64_t header_limit = 8192;
  // Largest request body, bytes; larger ones get 413.
  std::uint64_t body_limit = 8192;
  // trace, debug, info, warn, error, critical or off.
  std::string log_level = "info";
};

// One setting given on the command line: the key (a field name above), the flag as the user
// spelled it (for messages) and its value text ("true" for a flag without a value).
struct FlagValue {
  std::string key;
  std::string flag;
  std::string value;
};

struct ConfigInputs {
  // The TOML file, if any (from --config, or FLURRY_CONFIG when the flag is absent).
  std::optional<std::string> file;
  // Environment variables as (name, value); only FLURRY_* ones are looked at.
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<FlagValue> flags;
};

// The keys in documentation order.
[[nodiscard]] std::span<const std::string_view> config_keys() noexcept;

// "lease_ttl_ms" -> "FLURRY_LEASE_TTL_MS"; "lease_ttl_ms" -> "--lease-ttl-ms".
[[nodiscard]] std::string env_name(std::string_view key);
[[nodiscard]] std::string flag_name(std::string_view key);

// The FLURRY_* variables of the process environment (`environ`).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> flurry_environment();

// Merges defaults, the file, the environment and the flags, and validates the result: each value
// on its own, then the combinations (static registry needs a node, horizon_window_ms must exceed
// max_lead_ms, node below the layout's node count, ...). INVALID_ARGUMENT with a message naming
// the key and its source; a file that cannot be read or parsed is INVALID_ARGUMENT too.
[[nodiscard]] Result<Config> load_config(const ConfigInputs& inputs);

// Checks a Config built in code (sources are named "default").
[[nodiscard]] Status validate_config(const Config& config);

// The configuration as a TOML document that load_config reads back to the same Config.
[[nodiscard]] std::string to_toml(const Config& config);

// "host:port" split; the host keeps no brackets. INVALID_ARGUMENT when malformed.
struct ListenAddress {
  std::string host;
  std::uint16_t port = 0;
};
[[nodiscard]] Result<ListenAddress> parse_listen(std::string_view text);

}  // namespace flurry::server

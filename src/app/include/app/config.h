// The configuration of `flurry serve`: typed settings with their documented defaults, and the
// loader that merges the sources in the order flags > FLURRY_* environment variables > TOML file
// > defaults.
//
// Text becomes typed values once, here, at the edge: a parsed Layout, a RollbackPolicy, a
// RegistryKind, chrono durations, a ListenAddress. A bad value is reported with the key and where
// it came from: "lease_ttl_ms: \"abc\" is not a whole number (flag --lease-ttl-ms)",
// "max_lead_ms: ... (/etc/flurry.toml:7)", "registry: ... (environment variable FLURRY_REGISTRY)".
// Unknown keys in a file and unknown flags are errors (a typo must not be ignored); an unknown
// FLURRY_* environment variable is a warning naming the closest known one (a deployment's
// environment often carries unrelated variables with the prefix, such as a script's FLURRY_BIN).
//
// Every key is described once, in settings() below: its TOML key, its environment variable
// FLURRY_<KEY>, its flag --<key-with-dashes>, the help text with the real default, and how it is
// read and written back (--print-config). FLURRY_CONFIG names the TOML file when --config is not
// given.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"
#include "grpc_api/grpc_options.h"
#include "http/http_options.h"
#include "ops/tokens.h"
#include "order/order_settings.h"
#include "service/service.h"
#include "tls/tls_options.h"

namespace flurry::app {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };
// "trace", "debug", "info", "warn", "error", "critical", "off".
[[nodiscard]] std::string_view to_string(LogLevel level) noexcept;

// Segment mode (docs/segments.md): where the tags' counters live and how they are served.
struct SegmentConfig {
  // segment_stores as given (written back by --print-config): "sqlite" is <data_dir>/segments.db.
  std::string stores_text = "sqlite";
  // stores_text parsed once by load_config (parse_segment_stores), its "sqlite" entries placed in
  // data_dir once every source is read (place_segment_stores). Empty in a Config that
  // load_config did not produce.
  std::vector<SegmentStoreSpec> stores;
  // segment_prefetch_percent, segment_target_duration_ms, segment_max_step, segment_max_wait_ms;
  // max_batch is the service's (the max_batch setting).
  SegmentOptions options;
  // Where the admin token is (a token with the scopes admin and orders:decode, tokens.h).
  // The token itself is read at start and on SIGHUP (read_tokens), never kept in the Config.
  std::optional<std::filesystem::path> admin_token_file;
};

// The timestamp oracle (flurry/timestamp_oracle.h).
struct TsoConfig {
  bool enabled = false;  // tso
  // tso_advertise: the host clients and the other servers reach this one at (a name or an IP
  // address, checked as the host of HOST:PORT); unset: the listen host, or this machine's host
  // name when the server listens on a wildcard address.
  std::optional<std::string> advertise;
};

// Who may call what (flurry/server/tokens.h): the token files are read at start and on SIGHUP
// (read_tokens), never kept in the Config.
struct AuthConfig {
  std::optional<std::filesystem::path> token_file;
  // The scopes served without a token (open_scopes).
  ops::ScopeSet open_scopes = ops::kDefaultOpenScopes;
};

struct Config {
  service::ServiceOptions service;  // registry, layout, clock rules, batch size (service.h)
  http::HttpOptions http;           // listen address, threads, limits (http_options.h)
  grpc_api::GrpcOptions grpc;       // the gRPC server: listen address and limits (grpc_options.h)
  tls::TlsOptions tls;              // certificate, key and client CA files of both listeners
  SegmentConfig segments;           // segment mode's stores, buffers and admin token file
  // Order numbers: the format and the key file (the keys are read at start, load_order_keys).
  order::OrderSettings orders;
  AuthConfig auth;  // token_file, open_scopes
  TsoConfig tso;    // the timestamp oracle
  LogLevel log_level = LogLevel::kInfo;
};

// One setting as the command line, the environment and a TOML file know it.
struct SettingInfo {
  std::string_view key;  // TOML key, e.g. "lease_ttl_ms"
  std::string flag;      // "--lease-ttl-ms"
  std::string env;       // "FLURRY_LEASE_TTL_MS"
  std::string_view arg;  // what the value is, for the flag's help: "MS", "N", "LAYOUT"
  bool is_switch;        // a flag without a value (true when given)
  std::string help;      // one line, ending with the real default, e.g. "(default 10000)"
};

// Every setting, in documentation order. The help texts' defaults are those of Config{} on this
// machine (io_threads depends on the number of cores).
[[nodiscard]] std::span<const SettingInfo> settings();

// One setting given on the command line: the key, the flag as the user spelled it (for
// messages) and its value text ("true" for a switch).
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

struct LoadedConfig {
  Config config;
  // Messages about the inputs that did not stop the load (unknown FLURRY_* variables), for the
  // caller to log once logging is set up.
  std::vector<std::string> warnings;
};

// The FLURRY_* variables of the process environment (`environ`).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> flurry_environment();

// Merges defaults, the file, the environment and the flags, and validates the result: each value
// on its own, then the combinations (static registry needs a node, horizon_window_ms must exceed
// max_lead_ms by a time unit of the layout, node below the layout's node count, rollback "clock"
// needs a clock field). INVALID_ARGUMENT with a message naming the key and its source; a file
// that cannot be read or parsed is INVALID_ARGUMENT too.
[[nodiscard]] Result<LoadedConfig> load_config(const ConfigInputs& inputs);

// The configuration as a TOML document (written with toml++) that load_config reads back to the
// same Config; keys in documentation order.
[[nodiscard]] std::string to_toml(const Config& config);

}  // namespace flurry::app

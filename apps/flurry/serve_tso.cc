#include "serve_tso.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "flurry/host_port.h"
#include "flurry/open_registry.h"
#include "service/service.h"

namespace flurry::cli {
namespace {

using std::chrono::milliseconds;

bool is_wildcard(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

// The port of a bound listener's "HOST:PORT".
std::string with_host(std::string_view host, std::string_view local) {
  Result<HostPort> bound = parse_host_port(local, HostPortUse::kListen);
  if (!bound.ok()) return std::string();
  return HostPort{std::string(host), bound->port}.to_string();
}

}  // namespace

Result<TsoParts> open_tso(const app::Config& config, Clocks clocks, std::string_view hostname) {
  Result<Layout> layout = Layout::parse("tso");
  if (!layout.ok()) return layout.status();
  TsoOptions options;
  options.generator = service::generator_options_of(config.service);
  options.poll_interval =
      std::clamp(config.service.registry.lease_ttl / 4, milliseconds(50), milliseconds(500));
  if (const char* fault = std::getenv("FLURRY_TEST_TSO_FAULT"); fault != nullptr && *fault) {
    if (std::string_view(fault) != "skip-gate") {
      return InvalidArgument("FLURRY_TEST_TSO_FAULT: the only fault is skip-gate, not \"" +
                             std::string(fault) + "\"");
    }
    options.unsafe_skip_gate = true;
  }
  options.log = service::log_session_event;

  TsoParts parts;
  Result<std::unique_ptr<NodeRegistry>> registry = open_registry(
      config.service.registry, *layout, clocks, hostname, RegistryScope::kTimestampOracle);
  if (!registry.ok()) return registry.status().with_prefix("timestamp oracle");
  parts.registry = std::move(registry).value();
  Result<std::unique_ptr<HorizonFloor>> floor =
      open_horizon_floor(config.service.registry, *layout, RegistryScope::kTimestampOracle);
  if (!floor.ok()) return floor.status().with_prefix("timestamp oracle");
  parts.floor = std::move(floor).value();
  Result<std::unique_ptr<TimestampOracle>> oracle =
      TimestampOracle::create(*parts.registry, *parts.floor, *layout, std::move(options), clocks);
  if (!oracle.ok()) return oracle.status();
  parts.oracle = std::move(oracle).value();
  return parts;
}

TsoLeaderAddress tso_self(const app::Config& config, std::string_view http_local,
                          std::string_view grpc_local, std::string_view hostname) {
  std::string host;
  if (config.tso.advertise) {
    host = *config.tso.advertise;
  } else if (!is_wildcard(config.http.listen.host)) {
    host = config.http.listen.host;
  } else {
    host = std::string(hostname);
  }
  TsoLeaderAddress self;
  self.owner = std::string(hostname) + ":" + std::to_string(::getpid());
  self.http = with_host(host, http_local);
  if (!grpc_local.empty()) self.grpc = with_host(host, grpc_local);
  return self;
}

}  // namespace flurry::cli

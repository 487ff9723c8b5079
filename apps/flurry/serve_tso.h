// `flurry serve --tso`: the timestamp oracle's parts, as the composition root (cmd_serve.cc)
// builds them: the registry's oracle scope, this host's memory of its window, the oracle.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "app/config.h"
#include "flurry/clock.h"
#include "flurry/horizon_floor.h"
#include "flurry/registry.h"
#include "flurry/status.h"
#include "flurry/timestamp_oracle.h"

namespace flurry::cli {

// Declared in this order so that the oracle goes first, then what it uses.
struct TsoParts {
  std::unique_ptr<NodeRegistry> registry;
  std::unique_ptr<HorizonFloor> floor;
  std::unique_ptr<TimestampOracle> oracle;
};

// Opens the oracle's registry scope and floor and creates the oracle (not started) over the
// `tso` layout with the service's clock rules. The environment variable FLURRY_TEST_TSO_FAULT
// (test only) may name the negative control "skip-gate"; any other value is refused.
[[nodiscard]] Result<TsoParts> open_tso(const app::Config& config, Clocks clocks,
                                        std::string_view hostname);

// Where clients reach this server: tso_advertise (or the listen host, or `hostname` on a wildcard
// address) with the ports of the bound listeners ("HOST:PORT"; grpc empty when off).
[[nodiscard]] TsoLeaderAddress tso_self(const app::Config& config, std::string_view http_local,
                                        std::string_view grpc_local, std::string_view hostname);

}  // namespace flurry::cli

// Issuing IDs locally, as `flurry next` does: a node ID leased from the registry the shared
// registry settings name (serve's flags, FLURRY_* environment, --config: SQLite in the data
// directory by default; etcd or PostgreSQL as a fleet's servers use them), or a static --node;
// a generator above the node's durable horizon, the host guard held, the lease kept renewed and
// released afterwards. `flurry order new` without --server issues its IDs the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "app/config.h"
#include "common.h"
#include "flurry/open_registry.h"
#include "flurry/status.h"
#include "settings_args.h"

namespace flurry::cli {

struct NextArgs {
  std::string count = "1";
  std::string layout = "flurry";
  std::string node;       // empty: lease a free node ID from the registry
  std::string state_dir;  // --state-dir, an alias of --data-dir (state_dir_given says if given)
  bool state_dir_given = false;
  // The registry settings as given (settings_args.h: kRegistrySettings, FLURRY_*, --config),
  // gathered from settings_args once the command line is parsed.
  SettingsArgs settings_args;
  app::ConfigInputs settings;
  std::string format = "dec";
  std::string rollback = "wait";
  std::string max_lead;  // empty: the library's default
  std::string max_wait;  // empty: the library's default
};

// Writes a batch of issued IDs to `out`; an error stops the run (and is reported, exit 1).
using IdWriter = std::function<Status(std::span<const std::uint64_t> ids, OutputBuffer& out)>;

// Issues args.count IDs and hands them to `write` in batches. The exit code; throws UsageError
// for a bad command line.
[[nodiscard]] int run_next(const NextArgs& args, const IdWriter& write);

}  // namespace flurry::cli

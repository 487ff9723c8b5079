// Issuing IDs locally, as `flurry next` does: a node ID leased from the registry in --state-dir
// (or a static --node), a generator above the node's durable horizon, the lease kept renewed and
// released afterwards. `flurry order new` without --server issues its IDs the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "common.h"
#include "flurry/open_registry.h"
#include "flurry/status.h"

namespace flurry::cli {

struct NextArgs {
  std::string count = "1";
  std::string layout = "flurry";
  std::string node;  // empty: lease a free node ID from <state-dir>/registry.db
  std::string state_dir = default_data_dir().string();
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

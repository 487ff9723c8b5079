// flurry next: issue fresh IDs from a node session (node_session.h) on the registry the shared
// registry settings name, as flurry serve does.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common.h"
#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/generator.h"
#include "flurry/horizon.h"
#include "flurry/horizon_floor.h"
#include "flurry/layout.h"
#include "flurry/node_session.h"
#include "flurry/open_registry.h"
#include "flurry/registry.h"
#include "flurry/wide_id.h"
#include "next_local.h"
#include "settings_args.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

// IDs held in memory at once, whatever -n and max_batch() are.
constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;

// What the command line asks for, checked (usage errors throw UsageError: exit 2).
struct NextPlan {
  std::uint64_t count = 0;
  RegistryOptions registry;
  GeneratorOptions options;
};

NextPlan plan_of(const NextArgs& args) {
  NextPlan plan;
  plan.count = parse_uint(args.count, "-n", 1, UINT64_MAX);
  // --node: a static node (registry_of() makes the registry static); checked here for exit 2.
  if (!args.node.empty()) {
    plan.registry.kind = RegistryKind::kStatic;
    plan.registry.node = parse_uint(args.node, "--node", 0, UINT64_MAX);
  }
  if (args.state_dir_given && args.state_dir.empty()) {
    throw UsageError("--state-dir: must not be empty");
  }
  const bool data_dir_flag =
      std::any_of(args.settings.flags.begin(), args.settings.flags.end(),
                  [](const app::FlagValue& f) { return f.key == "data_dir"; });
  if (args.state_dir_given && data_dir_flag) {
    throw UsageError("--state-dir is another name of --data-dir: give one of them");
  }
  GeneratorOptions& options = plan.options;
  options.rollback = parse_rollback(args.rollback);
  if (!args.max_lead.empty()) options.max_lead = parse_millis(args.max_lead, "--max-lead");
  if (!args.max_wait.empty()) options.max_wait = parse_millis(args.max_wait, "--max-wait");
  // The window must exceed max_lead; a short-lived process gains nothing from a longer one.
  options.horizon_window =
      std::max(options.horizon_window, options.max_lead + std::chrono::seconds(1));
  options.background_horizon = false;
  return plan;
}

// The registry the settings name, as `flurry serve` with them would open it: the shared registry
// settings (flags, FLURRY_*, --config), --state-dir as the data directory, and --node as a
// static node (the static registry unless --registry says otherwise). Bad settings are a usage
// error (exit 2), as serve's.
RegistryOptions registry_of(const NextArgs& args, const Layout& layout) {
  app::ConfigInputs inputs = args.settings;
  // The layout this run issues under (checked against the registry's), not the config file's.
  inputs.flags.push_back({"layout", "--layout", layout.to_string()});
  if (args.state_dir_given) inputs.flags.push_back({"data_dir", "--state-dir", args.state_dir});
  if (!args.node.empty()) {
    inputs.flags.push_back({"node", "--node", args.node});
    const bool kind_given =
        std::any_of(inputs.flags.begin(), inputs.flags.end(),
                    [](const app::FlagValue& f) { return f.key == "registry"; });
    if (!kind_given) inputs.flags.push_back({"registry", "--node", "static"});
  }
  Result<app::LoadedConfig> loaded = app::load_config(inputs);
  if (!loaded.ok()) throw UsageError(loaded.status().message());
  for (const std::string& warning : loaded->warnings) print_error("warning: " + warning);
  return loaded->config.service.registry;
}

// Issues `count` IDs in chunks and writes them, one per line. The generator's error, if any;
// a failed write leaves out.error() set.
Status print_ids(Generator& generator, std::uint64_t count, const IdWriter& write,
                 OutputBuffer& out) {
  const std::uint64_t chunk =
      std::max<std::uint64_t>(std::min({count, generator.max_batch(), kChunk}), 1);
  std::vector<std::uint64_t> ids(static_cast<std::size_t>(chunk));
  for (std::uint64_t left = count; left > 0;) {
    const std::uint64_t n = std::min(left, chunk);
    std::span<std::uint64_t> batch(ids.data(), static_cast<std::size_t>(n));
    if (Status st = generator.next_batch(batch); !st.ok()) return st;
    if (Status st = write(batch, out); !st.ok()) return st;
    left -= n;
    if (!out.flush()) break;
  }
  (void)out.flush();
  return OkStatus();
}

}  // namespace

int run_next(const NextArgs& args, const IdWriter& write) {
  // The command line first (exit 2), then everything the library decides (exit 1).
  NextPlan plan = plan_of(args);
  Result<Layout> layout = Layout::parse(args.layout);
  if (!layout.ok()) return fail(layout.status());
  if (plan.registry.node && *plan.registry.node >= layout->node_count()) {
    return fail(InvalidArgument("--node " + std::to_string(*plan.registry.node) +
                                " is out of range: this layout has node IDs 0-" +
                                std::to_string(layout->node_count() - 1)));
  }
  plan.registry = registry_of(args, *layout);
  Result<std::unique_ptr<NodeRegistry>> registry =
      open_registry(plan.registry, *layout, Clocks::system(), host_name());
  if (!registry.ok()) return fail(registry.status());
  // As flurry serve: never below what this host saved for the node, whatever the registry says.
  // And above what any process of the host issued as the node (host_dir.h).
  Result<std::unique_ptr<HorizonFloor>> floor = open_horizon_floor(plan.registry, *layout);
  if (!floor.ok()) return fail(floor.status());
  // The node as the server assembles it (node_session.h): the claim with the host guard, the
  // floor, the generator, the lease keeper (long runs outlive the TTL) and the start rules.
  bool failed_quietly = false;  // an error the session only logged (a horizon save at the end)
  const SessionContext context{
      **registry,
      **floor,
      *layout,
      plan.options,
      Clocks::system(),
      "flurry-next:" + host_name() + ":" + std::to_string(::getpid()),
      [&layout](const HorizonRegression& r) {
        print_error("warning: registry went backwards: " + describe_regression(r, *layout) +
                    "; starting above the remembered horizon");
      },
      [&failed_quietly](SessionEventLevel level, const std::string& line) {
        if (level == SessionEventLevel::kError) failed_quietly = true;
        if (level >= SessionEventLevel::kWarning) print_error("warning: " + line);
      },
      /*host_guard=*/true,
      /*keeper=*/{}};
  Result<std::unique_ptr<NodeSession>> session = NodeSession::open(context, {});
  if (!session.ok()) return fail(session.status());
  OutputBuffer out(STDOUT_FILENO);
  const Status error = print_ids((*session)->generator(), plan.count, write, out);
  // Closes the generator (recording the horizon at the last issued ID), stops the keeper and
  // releases the lease, failed run or not.
  (*session)->shut_down(false, "stop");
  if (!error.ok()) return fail(error);
  if (out.error() != 0) {
    print_error(std::string("cannot write to standard output: ") + std::strerror(out.error()));
    return kExitFailure;
  }
  return failed_quietly ? kExitFailure : kExitOk;
}

Verb add_next(CLI::App& app) {
  auto args = std::make_shared<NextArgs>();
  CLI::App* cmd = app.add_subcommand("next", "Issue fresh IDs, one per line");
  cmd->add_option("-n,--count", args->count, "How many IDs to issue (at least 1)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--layout", args->layout, "Layout text or preset name (see 'flurry layout')")
      ->type_name("LAYOUT")
      ->capture_default_str();
  cmd->add_option("--node", args->node,
                  "A static node ID (below the layout's node count; the static registry), its "
                  "horizon in DIR/horizon-node-ID.state. Default: lease a free node ID from the "
                  "registry the settings name (--registry ..., as flurry serve)")
      ->type_name("ID");
  CLI::Option* state_dir =
      cmd->add_option("--state-dir", args->state_dir,
                      "Another name of --data-dir: the directory keeping the node's horizon, so "
                      "that later runs never repeat an ID (default: " +
                          default_data_dir().string() + ")")
          ->type_name("DIR");
  // The registry settings of flurry serve: --registry, --etcd-endpoints, --postgres-url, ...
  add_settings_options(*cmd, args->settings_args, kRegistrySettings);
  cmd->add_option("--format", args->format,
                  "Output encoding: " + id_encoding_names() +
                      " (uuidv7 and ulid: the ID inside RFC 9562's UUIDv7 or a ULID, the rest "
                      "random; layouts with a time unit of 1 ms or finer)")
      ->type_name("FORMAT")
      ->capture_default_str();
  cmd->add_option("--rollback", args->rollback,
                  "When the clock is behind by more than --max-lead: wait (up to --max-wait), "
                  "fail, or clock (switch clock generation; layouts with a clock field)")
      ->type_name("POLICY")
      ->capture_default_str();
  cmd->add_option("--max-lead", args->max_lead,
                  "How far IDs may run ahead of the clock, in milliseconds (default 1000)")
      ->type_name("MS");
  cmd->add_option("--max-wait", args->max_wait,
                  "Longest wait for a clock that is behind, in milliseconds (default 3000)")
      ->type_name("MS");
  return {cmd, [args, state_dir] {
            const IdEncoding format = parse_format(args->format);
            args->state_dir_given = state_dir->count() > 0;
            args->settings = gather_inputs(args->settings_args);
            // A layout the format cannot carry is refused before a node ID is leased or an ID
            // issued.
            Result<Layout> layout = Layout::parse(args->layout);
            if (!layout.ok()) return fail(layout.status());
            Result<IdTextCodec> codec = IdTextCodec::create(*layout, format);
            if (!codec.ok()) return fail(codec.status());
            return run_next(*args, [codec = *std::move(codec)](std::span<const std::uint64_t> ids,
                                                               OutputBuffer& out) {
              for (std::uint64_t id : ids) out.append_id_line(id, codec);
              return OkStatus();
            });
          }};
}

}  // namespace flurry::cli

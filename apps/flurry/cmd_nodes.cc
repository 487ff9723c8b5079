// flurry nodes: the node IDs of a registry, for operators. `list` shows who holds which node ID,
// until when, and the horizon each one keeps; `release ID` frees a node ID whose process is gone
// (refused while its lease is live, unless --force, which fences the holder out).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/config.h"
#include "common.h"
#include "flurry/layout.h"
#include "flurry/open_registry.h"
#include "flurry/registry.h"
#include "flurry/timefmt.h"
#include "settings_args.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

struct NodesListArgs {
  SettingsArgs settings;
  bool json = false;
};

struct ReleaseArgs {
  SettingsArgs settings;
  std::string node;
  bool force = false;
};

// The registry the settings name, opened as `serve` would open it.
Result<std::unique_ptr<NodeRegistry>> open_from(const SettingsArgs& args) {
  Result<app::LoadedConfig> loaded = app::load_config(gather_inputs(args));
  if (!loaded.ok()) return loaded.status();
  for (const std::string& warning : loaded->warnings) print_error("warning: " + warning);
  const app::Config& config = loaded->config;
  return open_registry(config.service.registry, config.service.layout, Clocks::system(),
                       host_name());
}

// Bad settings are a usage error (exit 2), like serve's; a registry that cannot be opened is not.
int open_failed(const Status& status) {
  if (status.reason() != Reason::kBadInput) return fail(status);
  print_error(status.message());
  return kExitUsage;
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SystemClock::coarse().now().time_since_epoch())
      .count();
}

std::string expiry_text(const NodeInfo& n, const NodeRowView& v) {
  if (!v.lease_expires_unix_ms) return n.live ? "never" : "-";
  return format_unix_ms(*v.lease_expires_unix_ms);
}

std::string horizon_text(const NodeInfo& n, const NodeRowView& v) {
  if (!n.horizon_error.empty()) return "unreadable: " + one_line(n.horizon_error);
  if (!v.horizon) return "-";
  return v.horizon->time ? format_time(*v.horizon->time) : "unused";
}

nlohmann::json to_json(const RegistryListing& listing, const Layout* layout) {
  nlohmann::json nodes = nlohmann::json::array();
  const std::int64_t now = now_unix_ms();
  for (const NodeInfo& n : listing.nodes) {
    const NodeRowView v = view_node(n, layout, now);
    nlohmann::json j = {{"node", n.node},
                        {"state", n.live ? "live" : "free"},
                        {"owner", n.owner},
                        {"token", n.token}};
    j["lease_expires"] =
        v.lease_expires_unix_ms ? nlohmann::json(expiry_text(n, v)) : nlohmann::json();
    if (n.horizon) {
      j["horizon"] = {{"generation", n.horizon->generation},
                      {"ticks", n.horizon->horizons},
                      {"time", v.horizon->time ? nlohmann::json(format_time(*v.horizon->time))
                                               : nlohmann::json()}};
    } else {
      j["horizon"] = nullptr;
    }
    if (!n.horizon_error.empty()) j["horizon_error"] = n.horizon_error;
    nodes.push_back(std::move(j));
  }
  return {{"layout", listing.layout}, {"nodes", std::move(nodes)}};
}

void print_table(const RegistryListing& listing, const Layout* layout,
                 const std::string& registry) {
  std::cout << "registry: " << registry << "\n"
            << "layout:   " << (listing.layout.empty() ? "(none recorded)" : listing.layout)
            << "\n";
  if (listing.nodes.empty()) {
    std::cout << "no node ID was ever claimed\n";
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"NODE", "STATE", "OWNER", "TOKEN", "LEASE_EXPIRES", "HORIZON"}};
  const std::int64_t now = now_unix_ms();
  for (const NodeInfo& n : listing.nodes) {
    const NodeRowView v = view_node(n, layout, now);
    rows.push_back({std::to_string(n.node), n.live ? "live" : "free",
                    n.owner.empty() ? "-" : one_line(n.owner), std::to_string(n.token),
                    expiry_text(n, v), horizon_text(n, v)});
  }
  print_rows(rows);
}

int run_nodes_list(const NodesListArgs& args) {
  Result<std::unique_ptr<NodeRegistry>> registry = open_from(args.settings);
  if (!registry.ok()) return open_failed(registry.status());
  Result<RegistryListing> listing = (*registry)->list();
  if (!listing.ok()) return fail(listing.status());
  // Horizons are in the time units of the registry's own layout.
  Result<Layout> layout = Layout::parse(listing->layout);
  const Layout* units = layout.ok() ? &*layout : nullptr;
  if (args.json) {
    std::cout << to_json(*listing, units).dump(2) << "\n";
  } else {
    print_table(*listing, units, (*registry)->describe());
  }
  return kExitOk;
}

int run_release(const ReleaseArgs& args) {
  const std::uint64_t node = parse_uint(args.node, "ID", 0, UINT64_MAX);
  Result<std::unique_ptr<NodeRegistry>> registry = open_from(args.settings);
  if (!registry.ok()) return open_failed(registry.status());
  if (Status st = (*registry)->release_node(node, args.force); !st.ok()) return fail(st);
  std::cout << "node " << node << " released" << (args.force ? " by force" : "") << " in "
            << (*registry)->describe() << "\n";
  return kExitOk;
}

}  // namespace

Verb add_nodes(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "nodes", "Show or free the node IDs of a registry (the same registry settings as serve)");
  cmd->require_subcommand(1);

  auto list = std::make_shared<NodesListArgs>();
  CLI::App* list_cmd = cmd->add_subcommand(
      "list",
      "Every node ID the registry knows: state, owner (host:pid), fencing token, lease "
      "expiry and horizon time");
  add_settings_options(*list_cmd, list->settings);
  list_cmd->add_flag("--json", list->json, "Print JSON instead of a table");

  auto release = std::make_shared<ReleaseArgs>();
  CLI::App* release_cmd = cmd->add_subcommand(
      "release",
      "Free a node ID whose process is gone; its horizon stays with it for the next owner");
  release_cmd->add_option("ID", release->node, "The node ID")->required();
  release_cmd->add_flag("--force", release->force,
                        "Release even while a live lease holds it: the holder is fenced out (its "
                        "renewals and horizon writes are refused) and stops issuing when its lease "
                        "runs out");
  add_settings_options(*release_cmd, release->settings);

  return {cmd, [cmd, list_cmd, list, release] {
            if (list_cmd->parsed()) return run_nodes_list(*list);
            return run_release(*release);
          }};
}

}  // namespace flurry::cli

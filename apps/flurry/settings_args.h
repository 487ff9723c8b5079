// The service settings on a verb's command line: --config FILE and one flag per setting
// (app::settings()), shared by `serve` and `nodes` so both read a deployment's settings the
// same way (flags > FLURRY_* environment > --config file > defaults).
#pragma once

#include <array>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include "app/config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace flurry::cli {

struct SettingsArgs {
  std::string config;
  std::map<std::string, std::string, std::less<>> values;  // key -> flag value
  std::map<std::string, bool, std::less<>> switches;       // key -> given
  std::map<std::string, CLI::Option*, std::less<>> options;
};

// The settings that choose and open the node registry: what `flurry next` and `flurry order new`
// take besides their own flags, so that they lease from the registry a server with the same
// settings uses.
inline constexpr std::array<std::string_view, 13> kRegistrySettings = {
    "data_dir",       "host_dir",       "registry",     "node_from_hostname", "cluster",
    "etcd_endpoints", "postgres_url",   "lease_ttl_ms", "etcd_user",          "etcd_password_file",
    "etcd_ca_file",   "etcd_cert_file", "etcd_key_file"};

// Adds --config and a flag per setting to `command`, bound to `args` (which must outlive it);
// with `only` not empty, just the flags of those keys.
void add_settings_options(CLI::App& command, SettingsArgs& args,
                          std::span<const std::string_view> only = {});

// The settings as the user gave them: --config, the FLURRY_* environment and the flags.
[[nodiscard]] app::ConfigInputs gather_inputs(const SettingsArgs& args);

}  // namespace flurry::cli

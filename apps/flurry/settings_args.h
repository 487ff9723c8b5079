// The service settings on a verb's command line: --config FILE and one flag per setting
// (server::settings()), shared by `serve` and `nodes` so both read a deployment's settings the
// same way (flags > FLURRY_* environment > --config file > defaults).
#pragma once

#include <map>
#include <string>

#include "flurry/server/config.h"

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

// Adds --config and a flag per setting to `command`, bound to `args` (which must outlive it).
void add_settings_options(CLI::App& command, SettingsArgs& args);

// The settings as the user gave them: --config, the FLURRY_* environment and the flags.
[[nodiscard]] server::ConfigInputs gather_inputs(const SettingsArgs& args);

}  // namespace flurry::cli

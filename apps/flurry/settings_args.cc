#include "settings_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>

namespace flurry::cli {

void add_settings_options(CLI::App& command, SettingsArgs& args,
                          std::span<const std::string_view> only) {
  args.options["config"] =
      command
          .add_option("--config", args.config,
                      "TOML file with settings (keys as the flags, with '_'; also FLURRY_CONFIG)")
          ->type_name("FILE");
  for (const app::SettingInfo& s : app::settings()) {
    const std::string key(s.key);
    if (!only.empty() && std::find(only.begin(), only.end(), s.key) == only.end()) continue;
    if (s.is_switch) {
      args.options[key] = command.add_flag(s.flag, args.switches[key], s.help);
    } else {
      args.options[key] =
          command.add_option(s.flag, args.values[key], s.help)->type_name(std::string(s.arg));
    }
  }
}

app::ConfigInputs gather_inputs(const SettingsArgs& args) {
  app::ConfigInputs inputs;
  if (!args.config.empty() || args.options.at("config")->count() > 0) inputs.file = args.config;
  inputs.env = app::flurry_environment();
  for (const app::SettingInfo& s : app::settings()) {
    const auto found = args.options.find(s.key);
    if (found == args.options.end() || found->second->count() == 0) continue;
    app::FlagValue f;
    f.key = std::string(s.key);
    f.flag = s.flag;
    f.value = s.is_switch ? (args.switches.at(std::string(s.key)) ? "true" : "false")
                          : args.values.at(std::string(s.key));
    inputs.flags.push_back(std::move(f));
  }
  return inputs;
}

}  // namespace flurry::cli

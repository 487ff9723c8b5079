// The verbs of the flurry command-line tool. Each add_* registers a subcommand and its options
// with the top-level CLI11 app and returns the action to run when that subcommand was chosen.
// An action returns the process exit code; it may throw UsageError (exit 2).
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace flurry::cli {

struct Verb {
  CLI::App* command = nullptr;
  std::function<int()> run;
};

Verb add_next(CLI::App& app);
Verb add_decode(CLI::App& app);
Verb add_layout(CLI::App& app);
Verb add_bench(CLI::App& app);
Verb add_serve(CLI::App& app);
Verb add_nodes(CLI::App& app);
Verb add_segment(CLI::App& app);
Verb add_order(CLI::App& app);

}  // namespace flurry::cli

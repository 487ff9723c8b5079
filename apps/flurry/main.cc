// flurry: the command-line tool. Wiring only: the verbs live in cmd_*.cc.
#include <CLI/CLI.hpp>
#include <csignal>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "common.h"
#include "core/quote.h"
#include "verbs.h"

#ifndef FLURRY_VERSION
#error "FLURRY_VERSION must be defined by the build"
#endif

namespace flurry::cli {
namespace {

int run(int argc, char** argv) {
  CLI::App app{"flurry: a distributed unique-ID service (64-bit, k-sorted, never repeating)",
               "flurry"};
  app.set_version_flag("--version", std::string("flurry ") + FLURRY_VERSION,
                       "Print the version and exit");
  app.require_subcommand(1);
  app.footer("Run 'flurry VERB --help' for the options of a verb.");

  const std::vector<Verb> verbs = {add_next(app),    add_decode(app), add_layout(app),
                                   add_bench(app),   add_serve(app),  add_nodes(app),
                                   add_segment(app), add_order(app)};

  // The top level takes flags only, so the first other argument names the verb. CLI11 would
  // report an unknown one as "A subcommand is required"; say what is wrong instead.
  if (argc < 2) {
    print_error(
        "no verb given (expected next, decode, layout, bench, serve, nodes, segment or order; see "
        "'flurry --help')");
    return kExitUsage;
  }
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!arg.empty() && arg.front() == '-') continue;
    bool known = false;
    for (const Verb& verb : verbs) known = known || verb.command->check_name(arg);
    if (!known) {
      print_error(
          "unknown verb " + internal::quote(arg) +
          " (expected next, decode, layout, bench, serve, nodes, segment or order; see 'flurry "
          "--help')");
      return kExitUsage;
    }
    break;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e);  // --help, --version: printed on stdout
    }
    const std::vector<CLI::App*> chosen = app.get_subcommands();
    const std::string help =
        chosen.empty() ? "flurry --help" : "flurry " + chosen.front()->get_name() + " --help";
    print_error(std::string(e.what()) + " (see '" + help + "')");
    return kExitUsage;
  }

  int code = kExitUsage;
  for (const Verb& verb : verbs) {
    if (!verb.command->parsed()) continue;
    try {
      code = verb.run();
    } catch (const UsageError& e) {
      print_error(std::string(e.what()) + " (see 'flurry " + verb.command->get_name() +
                  " --help')");
      return kExitUsage;
    }
    break;
  }
  std::cout.flush();
  if (!std::cout && code == kExitOk) {
    print_error("cannot write to standard output");
    return kExitFailure;
  }
  return code;
}

}  // namespace
}  // namespace flurry::cli

int main(int argc, char** argv) {
  // A closed pipe shows up as a write error, so that `next` can still close its generator.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return flurry::cli::run(argc, argv);
  } catch (const std::exception& e) {
    flurry::cli::print_error(std::string("internal error: ") + e.what());
  } catch (...) {
    flurry::cli::print_error("internal error: unknown exception");
  }
  return flurry::cli::kExitFailure;
}

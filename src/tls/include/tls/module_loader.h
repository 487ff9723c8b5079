// Internal: finding and loading flurry's modules (flurry_grpc.so, flurry_tls.so), the shared
// objects that carry a heavy dependency (gRPC, OpenSSL) so that a process which does not use it
// never maps it. One finder for every module and every binary (the server, the CLI, the tests).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/status.h"

namespace flurry::internal {

// The environment variable naming a directory searched first (not a setting of `flurry serve`).
// Honoured for every user; for root the configuration loader warns that it is set (the modules
// there must still be root's: load_module).
inline constexpr std::string_view kModuleDirVariable = "FLURRY_MODULE_DIR";

// Where `cmake --install` puts the modules: CMAKE_INSTALL_PREFIX/lib/flurry as configured
// (/usr/local/lib/flurry by default).
extern const std::string_view kInstalledModuleDir;
// Where the Debian package `flurry` puts them, whatever the prefix configured.
inline constexpr std::string_view kPackagedModuleDir = "/usr/lib/flurry";

// Where the module `file` ("flurry_tls.so") is looked for, in this order:
//   1. $FLURRY_MODULE_DIR/<file>, when FLURRY_MODULE_DIR is set and not empty (test binaries,
//      which live elsewhere in the build tree, and unusual installs);
//   2. beside the executable (a build tree: build/release/apps/flurry/);
//   3. lib/flurry/ beside its bin/ (an install: /usr/local/bin/flurry loads
//      /usr/local/lib/flurry/<file>, and a package unpacked anywhere loads its own modules);
//   4. kInstalledModuleDir/<file>, then kPackagedModuleDir/<file>, each unless already listed:
//      the configured install's modules and the Debian package's, for a program in another
//      directory that links flurry's installed libraries (libflurry-dev's program finds the
//      modules of the flurry package).
// Symbolic links to the executable are followed (2 and 3 are left out when /proc/self/exe is
// unreadable).
[[nodiscard]] std::vector<std::filesystem::path> module_paths(std::string_view file);

// A module found and opened: the path it was loaded from and the address of its entry symbol.
struct LoadedModule {
  std::filesystem::path path;
  const void* entry = nullptr;
};

// Opens the first of `paths` that exists (RTLD_NOW | RTLD_LOCAL, never unloaded) and looks up
// `entry_symbol`. The module runs with the process's rights, so it is loaded only when the
// directory it was found in, the file it resolves to (links followed) and that file's directory
// are each owned by root or by the effective user and writable by neither their group nor others.
// `what` names the module in errors ("the gRPC module"). FAILED_PRECONDITION:
//   - "<what> \"<path>\" is refused: <which file or directory and why>; modules are loaded only
//     from ..." (another owner, a mode that lets the group or others write, not a regular file);
//   - "<what> \"<path>\" cannot be loaded: <loader's error>" (a dependency or a symbol missing);
//   - "<what> \"<path>\" has no entry point <entry_symbol>";
//   - when none of `paths` exists: `missing` + " (looked for a, b, c)" + `advice` (what to do).
// The caller checks the version the entry reports (a module of another build is refused).
[[nodiscard]] Result<LoadedModule> load_module(const std::vector<std::filesystem::path>& paths,
                                               const char* entry_symbol, std::string_view what,
                                               std::string_view missing, std::string_view advice);

}  // namespace flurry::internal

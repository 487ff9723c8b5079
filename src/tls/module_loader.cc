#include "tls/module_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "core/quote.h"

namespace flurry::internal {

const std::string_view kInstalledModuleDir = FLURRY_INSTALLED_MODULE_DIR;

std::vector<std::filesystem::path> module_paths(std::string_view file) {
  std::vector<std::filesystem::path> paths;
  if (const char* dir = std::getenv(kModuleDirVariable.data()); dir != nullptr && *dir != '\0') {
    paths.push_back(std::filesystem::path(dir) / file);
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path dir = exe.parent_path();
    paths.push_back(dir / file);
    paths.push_back(dir.parent_path() / "lib" / "flurry" / file);
  }
  // Last: the configured install's, then the Debian package's, for a program that links the
  // installed libraries from another directory. None twice (/usr/bin/flurry's ../lib/flurry is
  // the package's).
  for (const std::string_view dir : {kInstalledModuleDir, kPackagedModuleDir}) {
    const std::filesystem::path installed = std::filesystem::path(dir) / file;
    if (std::find(paths.begin(), paths.end(), installed) == paths.end()) paths.push_back(installed);
  }
  return paths;
}

Result<LoadedModule> load_module(const std::vector<std::filesystem::path>& paths,
                                 const char* entry_symbol, std::string_view what,
                                 std::string_view missing, std::string_view advice) {
  std::string tried;
  for (const std::filesystem::path& path : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += (tried.empty() ? "" : ", ") + path.string();
      continue;
    }
    const auto refuse = [&](const std::string& why) {
      return Status(StatusCode::kFailedPrecondition,
                    std::string(what) + " " + quote(path.string()) + " " + why);
    };
    // RTLD_NOW: a symbol missing from this binary fails here, not in the middle of a request.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = ::dlerror();
      return refuse("cannot be loaded: " + quote(error != nullptr ? error : "unknown"));
    }
    const void* entry = ::dlsym(handle, entry_symbol);
    if (entry == nullptr) return refuse(std::string("has no entry point ") + entry_symbol);
    return LoadedModule{path, entry};  // never unloaded: its code runs until the process ends
  }
  return Status(StatusCode::kFailedPrecondition,
                std::string(missing) + " (looked for " +
                    (tried.empty() ? std::string("it, but /proc/self/exe is unreadable") : tried) +
                    ")" + std::string(advice));
}

}  // namespace flurry::internal

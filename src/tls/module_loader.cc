#include "tls/module_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "core/quote.h"

namespace flurry::internal {
namespace {

// Why `path` (a module, or a directory it is in) may not be trusted, or "" when it may: it must be
// owned by root or by this process's effective user, and neither its group nor others may write
// to it. stat() follows links: what counts is the file or directory the loader would read.
std::string untrusted(const std::filesystem::path& path, bool directory) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return quote(path.string(), 1024) + " cannot be examined: " + std::strerror(errno);
  }
  const std::string name = directory ? "its directory " : "the file ";
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return name + quote(path.string(), 1024) + " is not a " +
           (directory ? "directory" : "regular file");
  }
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) {
    return name + quote(path.string(), 1024) + " is owned by user ID " + std::to_string(st.st_uid) +
           ", neither root nor the user flurry runs as (" + std::to_string(me) + ")";
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return name + quote(path.string(), 1024) + " has mode " + mode + ": " +
           ((st.st_mode & S_IWOTH) != 0 ? "anyone" : "its group") + " may change it (chmod go-w " +
           quote(path.string(), 1024) + ")";
  }
  return "";
}

// "" when the module at `path` may be loaded: the directory it was found in, the file it
// resolves to and that file's own directory all pass untrusted().
std::string why_untrusted(const std::filesystem::path& path) {
  const std::filesystem::path found_in = path.has_parent_path() ? path.parent_path() : ".";
  if (std::string why = untrusted(found_in, true); !why.empty()) return why;
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr)
    return quote(path.string(), 1024) + " cannot be resolved: " + std::strerror(errno);
  const std::filesystem::path file(real);
  std::free(real);
  if (std::string why = untrusted(file, false); !why.empty()) return why;
  return untrusted(file.parent_path(), true);
}

}  // namespace

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
    // A module runs as flurry: only one nobody else could have put there or changed.
    if (const std::string why = why_untrusted(path); !why.empty()) {
      return refuse("is refused: " + why +
                    "; modules are loaded only from files and directories owned by root or by the "
                    "user flurry runs as, that their group and others may not write");
    }
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

#include "grpc_module.h"

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <system_error>

#include "core/quote.h"

namespace flurry::cli {

std::vector<std::filesystem::path> grpc_module_paths() {
  constexpr const char* kFile = "flurry_grpc.so";
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const std::filesystem::path dir = exe.parent_path();
  return {dir / kFile, dir.parent_path() / "lib" / "flurry" / kFile};
}

Result<grpc_api::GrpcModuleStart> load_grpc_module(
    const std::vector<std::filesystem::path>& paths) {
  std::string tried;
  for (const std::filesystem::path& path : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += (tried.empty() ? "" : ", ") + path.string();
      continue;
    }
    const auto refuse = [&path](const std::string& why) {
      return Status(StatusCode::kFailedPrecondition,
                    "the gRPC module " + internal::quote(path.string()) + " " + why);
    };
    // RTLD_NOW: a symbol missing from this binary fails here, not in the middle of an RPC.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = ::dlerror();
      return refuse("cannot be loaded: " + internal::quote(error != nullptr ? error : "unknown"));
    }
    const auto* module =
        static_cast<const grpc_api::GrpcModule*>(::dlsym(handle, grpc_api::kGrpcModuleEntry));
    if (module == nullptr || module->start == nullptr) {
      return refuse(std::string("has no entry point ") + grpc_api::kGrpcModuleEntry);
    }
    if (module->version == nullptr || std::strcmp(module->version, FLURRY_VERSION) != 0) {
      return refuse("was built from flurry " +
                    internal::quote(module->version != nullptr ? module->version : "?") +
                    ", this binary is " FLURRY_VERSION ": install the module of the same build");
    }
    return module->start;  // never unloaded: the server's code runs until the process ends
  }
  return Status(StatusCode::kFailedPrecondition,
                "grpc_listen is set but the gRPC module flurry_grpc.so is not installed (looked "
                "for " +
                    (tried.empty() ? std::string("it, but /proc/self/exe is unreadable") : tried) +
                    "); install it there, or set grpc_listen = \"\" (--grpc-listen '') to serve "
                    "HTTP only");
}

}  // namespace flurry::cli

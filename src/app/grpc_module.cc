#include "app/grpc_module.h"

#include <cstring>
#include <string>

#include "core/quote.h"
#include "tls/module_loader.h"

namespace flurry::cli {

std::vector<std::filesystem::path> grpc_module_paths() {
  return internal::module_paths("flurry_grpc.so");
}

Result<grpc_api::GrpcModuleStart> load_grpc_module(
    const std::vector<std::filesystem::path>& paths) {
  Result<internal::LoadedModule> loaded = internal::load_module(
      paths, grpc_api::kGrpcModuleEntry, "the gRPC module",
      "grpc_listen is set but the gRPC module flurry_grpc.so is not installed",
      "; install it there, or set grpc_listen = \"\" (--grpc-listen '') to serve HTTP only");
  if (!loaded.ok()) return loaded.status();
  const auto* module = static_cast<const grpc_api::GrpcModule*>(loaded->entry);
  const auto refuse = [&loaded](const std::string& why) {
    return Status(StatusCode::kFailedPrecondition,
                  "the gRPC module " + internal::quote(loaded->path.string()) + " " + why);
  };
  if (module->start == nullptr) {
    return refuse(std::string("has no entry point ") + grpc_api::kGrpcModuleEntry);
  }
  if (module->version == nullptr || std::strcmp(module->version, FLURRY_VERSION) != 0) {
    return refuse("was built from flurry " +
                  internal::quote(module->version != nullptr ? module->version : "?") +
                  ", this binary is " FLURRY_VERSION ": install the module of the same build");
  }
  return module->start;  // never unloaded: the server's code runs until the process ends
}

}  // namespace flurry::cli

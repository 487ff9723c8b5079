// Finding and loading the gRPC front end's module (flurry_grpc.so, src/grpc) for `flurry serve`:
// only a server with grpc_listen set loads it, so one without gRPC maps none of gRPC's libraries.
#pragma once

#include <filesystem>
#include <vector>

#include "flurry/status.h"
#include "grpc_api/grpc_server.h"

namespace flurry::cli {

// Where the module is looked for (internal::module_paths, src/tls/module_loader.h):
// $FLURRY_MODULE_DIR when set, beside the executable (a build tree: build/release/apps/flurry/),
// then lib/flurry/ beside its bin/ (an install: /usr/local/bin/flurry loads
// /usr/local/lib/flurry/flurry_grpc.so). Symbolic links to the executable are followed.
[[nodiscard]] std::vector<std::filesystem::path> grpc_module_paths();

// Loads the first of `paths` that exists (for the life of the process) and returns its entry
// point. FAILED_PRECONDITION naming every path tried when none exists; naming the module and
// the loader's error when it cannot be loaded (a dependency or a symbol of flurry missing), when
// it has no entry point, or when it was built from another flurry version.
[[nodiscard]] Result<grpc_api::GrpcModuleStart> load_grpc_module(
    const std::vector<std::filesystem::path>& paths);

}  // namespace flurry::cli

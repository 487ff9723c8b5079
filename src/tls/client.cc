#include "tls/client.h"

#include <cstring>
#include <utility>

#include "core/private_files.h"
#include "core/quote.h"
#include "module_api.h"
#include "tls/module_loader.h"

namespace flurry::tls {

using module_api::Error;
using module_api::ErrorKind;
using module_api::TlsModule;

Status to_status(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kInvalidArgument:
      return InvalidArgument(error.message);
    case ErrorKind::kFailedPrecondition:
      return Status(StatusCode::kFailedPrecondition, error.message);
    case ErrorKind::kIo:
    case ErrorKind::kNone:
      break;
  }
  return Status(Reason::kIo, error.message);
}

Result<const TlsModule*> tls_module() {
  static const Result<const TlsModule*> loaded = []() -> Result<const TlsModule*> {
    Result<internal::LoadedModule> found = internal::load_module(
        internal::module_paths("flurry_tls.so"), module_api::kTlsModuleEntry, "the TLS module",
        "TLS needs flurry_tls.so, which is not installed",
        "; install it beside the flurry binary or in lib/flurry/ (or set FLURRY_MODULE_DIR)");
    if (!found.ok()) return found.status();
    const auto* module = static_cast<const TlsModule*>(found->entry);
    if (module->version == nullptr || std::strcmp(module->version, FLURRY_VERSION) != 0 ||
        module->make_client == nullptr) {
      return Status(
          StatusCode::kFailedPrecondition,
          "the TLS module " + internal::quote(found->path.string()) + " was built from flurry " +
              internal::quote(module->version != nullptr ? module->version : "?") +
              ", this binary is " FLURRY_VERSION ": install the module of the same build");
    }
    return module;
  }();
  return loaded;
}

namespace {

class ModuleClientContext final : public ClientContext {
 public:
  explicit ModuleClientContext(std::unique_ptr<module_api::RawClient> raw) : raw_(std::move(raw)) {}

  Result<HttpResponse> exchange(const std::string& host, std::uint16_t port,
                                const HttpRequest& request, std::chrono::milliseconds timeout,
                                std::size_t body_limit, const std::string& where) override {
    HttpResponse response;
    Error error;
    if (!raw_->exchange(host, port, request, timeout, body_limit, where, response, error)) {
      return to_status(error);
    }
    return response;
  }

 private:
  std::unique_ptr<module_api::RawClient> raw_;
};

}  // namespace

Result<std::shared_ptr<ClientContext>> make_client_context(const ClientFiles& files) {
  if (files.cert_file.has_value() != files.key_file.has_value()) {
    return InvalidArgument(
        files.cert_file ? "TLS client certificate " + internal::quote(files.cert_file->string()) +
                              " given without its key file"
                        : "TLS client key " + internal::quote(files.key_file->string()) +
                              " given without its certificate file");
  }
  if (files.key_file) {
    if (Status st = internal::check_private_key_file(*files.key_file, "TLS client key"); !st.ok()) {
      return st;
    }
  }
  Result<const TlsModule*> module = tls_module();
  if (!module.ok()) return module.status();
  Error error;
  std::unique_ptr<module_api::RawClient> raw = (*module)->make_client(files, error);
  if (raw == nullptr) return to_status(error);
  return std::shared_ptr<ClientContext>(std::make_shared<ModuleClientContext>(std::move(raw)));
}

}  // namespace flurry::tls

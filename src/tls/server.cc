#include "tls/server.h"

#include <utility>

#include "core/private_files.h"
#include "module_api.h"

namespace flurry::tls {
namespace {

class ModuleServerContext final : public ServerContext {
 public:
  ModuleServerContext(std::filesystem::path key_file, std::unique_ptr<module_api::RawServer> raw)
      : key_file_(std::move(key_file)), raw_(std::move(raw)) {}

  std::unique_ptr<ServerStream> new_stream(ServerSocket& socket) override {
    return raw_->new_stream(socket);
  }

  Status reload() override {
    if (Status st = internal::check_private_key_file(key_file_, "TLS key"); !st.ok()) return st;
    module_api::Error error;
    if (!raw_->reload(error)) return to_status(error);
    return OkStatus();
  }

  std::string describe() const override { return raw_->describe(); }

 private:
  const std::filesystem::path key_file_;
  std::unique_ptr<module_api::RawServer> raw_;
};

}  // namespace

Result<std::shared_ptr<ServerContext>> make_server_context(const ServerFiles& files) {
  if (Status st = internal::check_private_key_file(files.key_file, "TLS key"); !st.ok()) {
    return st;
  }
  Result<const module_api::TlsModule*> module = tls_module();
  if (!module.ok()) return module.status();
  module_api::Error error;
  std::unique_ptr<module_api::RawServer> raw = (*module)->make_server(files, error);
  if (raw == nullptr) return to_status(error);
  return std::shared_ptr<ServerContext>(
      std::make_shared<ModuleServerContext>(files.key_file, std::move(raw)));
}

}  // namespace flurry::tls

// Internal: the interface between the always-linked part of TLS (libflurry_tls_loader: client.cc,
// module_loader.cc) and the module flurry_tls.so (src/tls/module), which links OpenSSL.
//
// The module links none of flurry's libraries (test binaries export nothing to it), so nothing
// here calls flurry's out-of-line code: errors cross as a kind and a message, and the loader
// turns them into Status. Only header-defined types cross (std::string, std::optional,
// Beast's messages, compiled with the same Boost defines on both sides).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "flurry/status.h"
#include "tls/client.h"
#include "tls/http_message.h"
#include "tls/server.h"

namespace flurry::tls::module_api {

// The symbol dlsym() looks up: a `const TlsModule`. Versioned: a change of TlsModule's layout or
// of a signature below makes a new name, so an old module is refused as "has no entry point".
inline constexpr const char* kTlsModuleEntry = "flurry_tls_module_v1";

enum class ErrorKind { kNone, kInvalidArgument, kFailedPrecondition, kIo };

struct Error {
  ErrorKind kind = ErrorKind::kNone;
  std::string message;
};

// The module's client: ClientContext without Status.
class RawClient {
 public:
  virtual ~RawClient() = default;
  // True with `response` set, or false with `error` (kIo) set, as ClientContext::exchange.
  [[nodiscard]] virtual bool exchange(const std::string& host, std::uint16_t port,
                                      const HttpRequest& request, std::chrono::milliseconds timeout,
                                      std::size_t body_limit, const std::string& where,
                                      HttpResponse& response, Error& error) = 0;
};

// The module's server: ServerContext without Status.
class RawServer {
 public:
  virtual ~RawServer() = default;
  [[nodiscard]] virtual std::unique_ptr<ServerStream> new_stream(ServerSocket& socket) = 0;
  // False with `error` set (the files in use kept), as ServerContext::reload.
  [[nodiscard]] virtual bool reload(Error& error) = 0;
  [[nodiscard]] virtual std::string describe() const = 0;
};

struct TlsModule {
  const char* version;  // FLURRY_VERSION of the build; another one is refused
  // Null with `error` set, as make_client_context.
  std::unique_ptr<RawClient> (*make_client)(const ClientFiles& files, Error& error);
  // Null with `error` set, as make_server_context (but for the key file's mode, checked by the
  // loader).
  std::unique_ptr<RawServer> (*make_server)(const ServerFiles& files, Error& error);
};

}  // namespace flurry::tls::module_api

namespace flurry::tls {

// The module, loaded at the first call (thread-safe: a function-local static) and kept, with its
// failure, for the life of the process (client.cc).
[[nodiscard]] Result<const module_api::TlsModule*> tls_module();

// The module's error as a Status of the same kind.
[[nodiscard]] Status to_status(const module_api::Error& error);

}  // namespace flurry::tls

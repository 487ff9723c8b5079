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

#include "registry/http_exchange.h"
#include "tls/client.h"

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
  [[nodiscard]] virtual bool exchange(
      const std::string& host, std::uint16_t port,
      const boost::beast::http::request<boost::beast::http::string_body>& request,
      std::chrono::milliseconds timeout, std::size_t body_limit, const std::string& where,
      internal::HttpExchangeResponse& response, Error& error) = 0;
};

struct TlsModule {
  const char* version;  // FLURRY_VERSION of the build; another one is refused
  // Null with `error` set, as make_client_context.
  std::unique_ptr<RawClient> (*make_client)(const ClientFiles& files, Error& error);
};

}  // namespace flurry::tls::module_api

// The C++ client's settings, checked once (docs/clients.md, "The shape"): ClientOptions made into
// typed endpoints and TLS files, or INVALID_ARGUMENT naming the setting.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/client.h"
#include "flurry/status.h"
#include "tls/client.h"
#include "tls/http_client.h"

namespace flurry::client_internal {

struct Endpoint {
  std::string url;  // "http://host:port" as given, without a trailing '/'
  tls::HttpPeer peer;
};

struct Settings {
  std::vector<Endpoint> endpoints;
  // The TLS files, when an endpoint is https:// (none: no TLS, the module is not loaded).
  std::optional<tls::ClientFiles> tls;
};

// An endpoint from an "http://host:port" or "https://host:port" URL (a trailing '/' allowed);
// INVALID_ARGUMENT starting with "endpoints" otherwise.
[[nodiscard]] Result<Endpoint> parse_endpoint(std::string_view url);

// INVALID_ARGUMENT whose message starts with the setting's name ("endpoints: ...",
// "max_age: ...").
[[nodiscard]] Result<Settings> check_settings(const ClientOptions& options);

}  // namespace flurry::client_internal

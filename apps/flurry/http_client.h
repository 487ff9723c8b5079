// A small synchronous HTTP/1.1 client for the verbs that talk to a running `flurry serve`
// (`flurry segment ... --server URL`). Plain http:// only (the server speaks nothing else); one
// connection per request; one deadline covers name resolution, connect, the request and the whole
// response, so a server that hangs costs at most the timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/host_port.h"
#include "flurry/status.h"

namespace flurry::cli {

// Where a server listens: "http://HOST:PORT" (a trailing "/" allowed), HOST:PORT as
// parse_host_port (flurry/host_port.h) reads it: a name, an IPv4 address or an IPv6 address in
// brackets, and a port of 1-65535.
struct HttpEndpoint {
  std::string host;  // without brackets
  std::uint16_t port = 0;

  // "http://host:port", "http://[::1]:7609".
  [[nodiscard]] std::string to_string() const;
};

// INVALID_ARGUMENT saying what is wrong: another scheme (https:// included), no host, no or a bad
// port, a path, a query or user information.
[[nodiscard]] Result<HttpEndpoint> parse_http_endpoint(std::string_view text);

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string content_type;
  std::string retry_after;       // the Retry-After header, if any
  std::string www_authenticate;  // the WWW-Authenticate header, if any
};

struct HttpRequest {
  std::string method = "GET";  // GET or POST
  std::string target;          // "/v1/segments?x=1": path and query, already percent-encoded
  std::string body;            // sent with Content-Type application/json when not empty
  std::vector<std::pair<std::string, std::string>> headers;
};

// One request, one answer of any HTTP status. UNAVAILABLE (IO) when the server cannot be reached,
// the exchange fails or takes longer than `timeout`; the message names the endpoint and the stage.
[[nodiscard]] Result<HttpResponse> http_call(const HttpEndpoint& endpoint,
                                             const HttpRequest& request,
                                             std::chrono::milliseconds timeout);

}  // namespace flurry::cli

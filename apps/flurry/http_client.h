// A small synchronous HTTP/1.1 client for the verbs that talk to a running `flurry serve`
// (`flurry segment ... --server URL`, `flurry order new --server URL`): http:// or https:// (the
// server's TLS: tls_cert_file), the latter verified against --ca-file (or the system's CAs) and
// with a client certificate (--cert-file, --key-file; each also spelled --tls-...) for a server
// that requires one. One connection per request; one deadline covers name resolution, connect, the
// TLS handshake, the request and the whole response, so a server that hangs costs at most the
// timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/host_port.h"
#include "flurry/status.h"
#include "tls/client.h"

namespace CLI {
class App;
}  // namespace CLI

namespace flurry::cli {

// Where a server listens: "http://HOST:PORT" or "https://HOST:PORT" (a trailing "/" allowed),
// HOST:PORT as parse_host_port (flurry/host_port.h) reads it: a name, an IPv4 address or an IPv6
// address in brackets, and a port of 1-65535.
struct HttpEndpoint {
  std::string host;  // without brackets
  std::uint16_t port = 0;
  // https://: every request goes through this context (set by parse_server_url).
  std::shared_ptr<tls::ClientContext> tls;
  bool https = false;

  // "http://host:port", "https://[::1]:7609".
  [[nodiscard]] std::string to_string() const;
};

// INVALID_ARGUMENT saying what is wrong: another scheme, no host, no or a bad port, a path, a
// query or user information. An https:// endpoint has no TLS context yet (parse_server_url).
[[nodiscard]] Result<HttpEndpoint> parse_http_endpoint(std::string_view text);

// The TLS files of the verbs' --ca-file, --cert-file and --key-file ("" = not given).
struct TlsArgs {
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

// Adds --ca-file, --cert-file and --key-file (also spelled --tls-ca-file, ...; only
// --tls-key-file where the verb has a --key-file of its own: call this after the verb's own
// options) to a verb with --server, bound to `args` (which must outlive it).
void add_tls_options(CLI::App& command, TlsArgs& args);

// parse_http_endpoint, then for https:// the TLS context made from `tls` (the module loaded,
// the files read: errors name the file). INVALID_ARGUMENT for TLS files with an http:// URL (they
// would be ignored: the request would go in plain text).
[[nodiscard]] Result<HttpEndpoint> parse_server_url(std::string_view text, const TlsArgs& tls);

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

#include "http_client.h"

#include <boost/beast/http.hpp>
#include <cstddef>
#include <string>

#include "core/numbers.h"
#include "core/quote.h"
#include "registry/http_exchange.h"

namespace flurry::cli {
namespace {

using internal::quote;

// Large enough for a list of many tags or a batch of IDs; a bound against a runaway peer.
constexpr std::uint64_t kMaxBody = std::uint64_t{64} << 20;

bool is_host_byte(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

}  // namespace

std::string HttpEndpoint::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<HttpEndpoint> parse_http_endpoint(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("server " + quote(text) + ": " + why +
                           " (expected http://HOST:PORT, e.g. http://127.0.0.1:7609)");
  };
  constexpr std::string_view kScheme = "http://";
  if (text.starts_with("https://")) return bad("https is not supported, the server speaks http");
  if (!text.starts_with(kScheme)) return bad("does not start with http://");
  std::string_view rest = text.substr(kScheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (const std::size_t at = rest.find_first_of("/?#"); at != std::string_view::npos) {
    return bad("has a path or query; give only the scheme, host and port");
  }
  if (rest.find('@') != std::string_view::npos) return bad("has user information");
  HttpEndpoint out;
  std::string_view port;
  if (rest.starts_with('[')) {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address lacks its ']'");
    const std::string_view host = rest.substr(1, close - 1);
    if (host.empty()) return bad("the host is empty");
    for (char c : host) {
      const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      if (!hex && c != ':' && c != '.') return bad("the IPv6 address has a bad character");
    }
    out.host = host;
    rest.remove_prefix(close + 1);
    if (!rest.starts_with(':')) return bad("the port is missing");
    port = rest.substr(1);
  } else {
    const std::size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return bad("the port is missing");
    const std::string_view host = rest.substr(0, colon);
    if (host.empty()) return bad("the host is empty");
    for (char c : host) {
      if (!is_host_byte(c)) return bad("the host has a bad character " + internal::quote_char(c));
    }
    out.host = host;
    port = rest.substr(colon + 1);
  }
  const internal::ParsedUint n = internal::parse_uint(port, 65535);
  if (n.error != internal::UintError::kNone || n.value == 0) {
    return bad("the port " + quote(port) + " is not a number from 1 to 65535");
  }
  out.port = static_cast<std::uint16_t>(n.value);
  return out;
}

Result<HttpResponse> http_call(const HttpEndpoint& endpoint, const HttpRequest& request,
                               std::chrono::milliseconds timeout) {
  namespace http = boost::beast::http;

  const std::string where = endpoint.to_string();
  const http::verb verb = request.method == "POST" ? http::verb::post : http::verb::get;
  http::request<http::string_body> req{verb, request.target, 11};
  const bool v6 = endpoint.host.find(':') != std::string::npos;
  req.set(http::field::host,
          (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port));
  req.set(http::field::user_agent, "flurry");
  for (const auto& [name, value] : request.headers) req.set(name, value);
  if (!request.body.empty() || verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = request.body;
  }
  req.keep_alive(false);
  req.prepare_payload();
  Result<internal::HttpExchangeResponse> exchanged =
      internal::http_exchange(endpoint.host, endpoint.port, req, timeout, kMaxBody, where);
  if (!exchanged.ok()) return exchanged.status();
  internal::HttpExchangeResponse& res = *exchanged;
  HttpResponse out;
  out.status = res.result_int();
  out.content_type = res[http::field::content_type];
  out.retry_after = res[http::field::retry_after];
  out.www_authenticate = res[http::field::www_authenticate];
  out.body = std::move(res.body());
  return out;
}

}  // namespace flurry::cli

#include "http_client.h"

#include <boost/beast/http.hpp>
#include <cstddef>
#include <string>

#include "core/quote.h"
#include "registry/http_exchange.h"

namespace flurry::cli {
namespace {

using internal::quote;

// Large enough for a list of many tags or a batch of IDs; a bound against a runaway peer.
constexpr std::uint64_t kMaxBody = std::uint64_t{64} << 20;

}  // namespace

std::string HttpEndpoint::to_string() const {
  return "http://" + HostPort{host, port}.to_string();
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
  // A URL writes an IPv6 zone as "%25"; the server runs on loopback, so none is needed.
  if (rest.find('%') != std::string_view::npos) return bad("has a '%' (no IPv6 zone here)");
  Result<HostPort> address = parse_host_port(rest, HostPortUse::kConnect);
  if (!address.ok()) return bad(address.status().message());
  return HttpEndpoint{std::move(address->host), address->port};
}

Result<HttpResponse> http_call(const HttpEndpoint& endpoint, const HttpRequest& request,
                               std::chrono::milliseconds timeout) {
  namespace http = boost::beast::http;

  const std::string where = endpoint.to_string();
  const http::verb verb = request.method == "POST" ? http::verb::post : http::verb::get;
  http::request<http::string_body> req{verb, request.target, 11};
  req.set(http::field::host, HostPort{endpoint.host, endpoint.port}.to_string());
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

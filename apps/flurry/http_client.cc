#include "http_client.h"

#include <CLI/CLI.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

#include "core/quote.h"
#include "tls/http_client.h"

namespace flurry::cli {
namespace {

using internal::quote;

// Large enough for a list of many tags or a batch of IDs; a bound against a runaway peer.
constexpr std::uint64_t kMaxBody = std::uint64_t{64} << 20;

}  // namespace

std::string HttpEndpoint::to_string() const {
  return (https ? "https://" : "http://") + HostPort{host, port}.to_string();
}

Result<HttpEndpoint> parse_http_endpoint(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return InvalidArgument("server " + internal::quote_redacted(text) + ": " + why +
                           " (expected http://HOST:PORT or https://HOST:PORT, e.g. "
                           "http://127.0.0.1:7609)");
  };
  const bool https = text.starts_with("https://");
  if (!https && !text.starts_with("http://")) return bad("does not start with http:// or https://");
  std::string_view rest = text.substr(https ? 8 : 7);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (const std::size_t at = rest.find_first_of("/?#"); at != std::string_view::npos) {
    return bad("has a path or query; give only the scheme, host and port");
  }
  if (rest.find('@') != std::string_view::npos) return bad("has user information");
  // A URL writes an IPv6 zone as "%25"; the server runs on loopback, so none is needed.
  if (rest.find('%') != std::string_view::npos) return bad("has a '%' (no IPv6 zone here)");
  Result<HostPort> address = parse_host_port(rest, HostPortUse::kConnect);
  if (!address.ok()) return bad(address.status().message());
  HttpEndpoint endpoint;
  endpoint.host = std::move(address->host);
  endpoint.port = address->port;
  endpoint.https = https;
  return endpoint;
}

void add_tls_options(CLI::App& command, TlsArgs& args) {
  command
      .add_option("--ca-file,--tls-ca-file", args.ca_file,
                  "With an https:// server: the CA certificates (PEM) to verify it with (default: "
                  "the system's)")
      ->type_name("FILE");
  command
      .add_option("--cert-file,--tls-cert-file", args.cert_file,
                  "With an https:// server that requires client certificates: this client's "
                  "certificate (PEM; with the key file)")
      ->type_name("FILE");
  // `flurry order new` has --key-file already (the order keys): there, only --tls-key-file.
  const bool key_file_taken = command.get_option_no_throw("--key-file") != nullptr;
  command
      .add_option(key_file_taken ? "--tls-key-file" : "--key-file,--tls-key-file", args.key_file,
                  "The private key (PEM, unencrypted) of the client certificate")
      ->type_name("FILE");
}

Result<HttpEndpoint> parse_server_url(std::string_view text, const TlsArgs& tls) {
  Result<HttpEndpoint> endpoint = parse_http_endpoint(text);
  if (!endpoint.ok()) return endpoint;
  const auto given = [](const std::string& file) {
    return file.empty() ? std::nullopt : std::optional<std::filesystem::path>(file);
  };
  const tls::ClientFiles files{given(tls.ca_file), given(tls.cert_file), given(tls.key_file)};
  if (!endpoint->https) {
    if (files.ca_file || files.cert_file || files.key_file) {
      return InvalidArgument(
          "--tls-ca-file, --tls-cert-file and --tls-key-file are for an https:// "
          "server; " +
          endpoint->to_string() + " would be asked in plain text");
    }
    return endpoint;
  }
  Result<std::shared_ptr<tls::ClientContext>> context = tls::make_client_context(files);
  if (!context.ok()) return context.status();
  endpoint->tls = std::move(context).value();
  return endpoint;
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
  if (endpoint.https && endpoint.tls == nullptr) {
    return Status(StatusCode::kInternal, where + ": no TLS context (use parse_server_url)");
  }
  tls::HttpClient client(endpoint.tls);
  Result<tls::HttpResponse> exchanged = client.exchange(
      {endpoint.https, endpoint.host, endpoint.port}, req, timeout, kMaxBody, where);
  if (!exchanged.ok()) return exchanged.status();
  tls::HttpResponse& res = *exchanged;
  HttpResponse out;
  out.status = res.result_int();
  out.content_type = res[http::field::content_type];
  out.retry_after = res[http::field::retry_after];
  out.www_authenticate = res[http::field::www_authenticate];
  out.body = std::move(res.body());
  return out;
}

}  // namespace flurry::cli

#include "settings.h"

#include <filesystem>
#include <string_view>
#include <utility>

#include "core/quote.h"
#include "flurry/host_port.h"

namespace flurry::client_internal {

Result<Endpoint> parse_endpoint(std::string_view url) {
  const bool https = url.starts_with("https://");
  if (!https && !url.starts_with("http://")) {
    return InvalidArgument("endpoints: " + internal::quote_redacted(url) +
                           " is not an http:// or https:// URL");
  }
  std::string_view rest = url.substr(https ? 8 : 7);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  Result<HostPort> hp = parse_host_port(rest, HostPortUse::kConnect);
  if (!hp.ok()) return hp.status().with_prefix("endpoints");
  Endpoint e;
  e.url = std::string(https ? "https://" : "http://") + std::string(rest);
  e.peer = tls::HttpPeer{https, std::move(hp->host), hp->port};
  return e;
}

Result<Settings> check_settings(const ClientOptions& o) {
  Settings s;
  if (o.endpoints.empty()) return InvalidArgument("endpoints: at least one URL is needed");
  bool https = false;
  for (const std::string& url : o.endpoints) {
    Result<Endpoint> e = parse_endpoint(url);
    if (!e.ok()) return e.status();
    https = https || e->peer.https;
    s.endpoints.push_back(std::move(e).value());
  }
  if (o.max_age <= std::chrono::nanoseconds::zero()) return InvalidArgument("max_age: must be > 0");
  if (o.timeout <= std::chrono::nanoseconds::zero()) return InvalidArgument("timeout: must be > 0");
  if (o.min_batch < 1) return InvalidArgument("min_batch: must be at least 1");
  if (o.max_batch < o.min_batch) return InvalidArgument("min_batch: larger than max_batch");
  if (o.max_batch > (1u << 24)) return InvalidArgument("max_batch: at most 16777216");
  if (!(o.low_water > 0 && o.low_water < 1)) return InvalidArgument("low_water: must be in (0, 1)");
  if (!(o.segment_prefetch > 0 && o.segment_prefetch < 1)) {
    return InvalidArgument("segment_prefetch: must be in (0, 1)");
  }
  if (o.segment_range < 1) return InvalidArgument("segment_range: must be at least 1");
  for (char c : o.token) {
    if (c < 0x21 || c > 0x7e) return InvalidArgument("token: visible ASCII only");
  }
  const auto given = [](const std::string& file) {
    return file.empty() ? std::nullopt : std::optional<std::filesystem::path>(file);
  };
  const tls::ClientFiles files{given(o.ca_file), given(o.cert_file), given(o.key_file)};
  if (!https) {
    if (files.ca_file || files.cert_file || files.key_file) {
      const char* name = files.ca_file ? "ca_file" : files.cert_file ? "cert_file" : "key_file";
      return InvalidArgument(std::string(name) +
                             ": TLS files are for https:// endpoints; these are all http://");
    }
    return s;
  }
  if (files.cert_file.has_value() != files.key_file.has_value()) {
    return InvalidArgument(files.cert_file ? "key_file: needed with cert_file"
                                           : "cert_file: needed with key_file");
  }
  s.tls = files;
  return s;
}

}  // namespace flurry::client_internal

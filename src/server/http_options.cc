#include "flurry/server/http_options.h"

#include <thread>

#include "text.h"

namespace flurry::server {

std::string ListenAddress::to_string() const {
  const std::string p = std::to_string(port);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + p : host + ":" + p;
}

Result<ListenAddress> parse_listen(std::string_view text) {
  const auto malformed = [&] {
    return InvalidArgument(quote(text) +
                           " is not host:port (e.g. 127.0.0.1:7609, 0.0.0.0:7609, [::1]:7609)");
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return malformed();
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return malformed();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return InvalidArgument(quote(text) + ": write an IPv6 address in brackets, e.g. [::1]:7609");
  }
  if (host.empty() || port.empty() || port.size() > 5) return malformed();
  for (char c : host) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == '[' || c == ']') {
      return malformed();
    }
  }
  const internal::ParsedUint p = internal::parse_uint(port, 65535);
  if (p.error == internal::UintError::kTooLarge) {
    return InvalidArgument(quote(text) + ": the port must be at most 65535");
  }
  if (!p.ok()) return malformed();
  return ListenAddress{std::string(host), static_cast<std::uint16_t>(p.value)};
}

std::uint32_t default_io_threads() noexcept {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 1 ? cores - 1 : 1;
}

}  // namespace flurry::server

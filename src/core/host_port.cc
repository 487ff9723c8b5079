#include "flurry/host_port.h"

#include "core/numbers.h"
#include "core/quote.h"

namespace flurry {
namespace {

bool is_name_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

bool is_ipv6_byte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.';
}

}  // namespace

std::string HostPort::to_string() const {
  const std::string p = std::to_string(port);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + p : host + ":" + p;
}

Result<HostPort> parse_host_port(std::string_view text, HostPortUse use) {
  const bool listen = use == HostPortUse::kListen;
  const auto bad = [&](const std::string& why) {
    return InvalidArgument(internal::quote(text) +
                           (listen ? " is not host:port (" : " is not HOST:PORT (") + why +
                           (listen ? "; e.g. 127.0.0.1:7609, 0.0.0.0:7609, [::1]:7609)" : ")"));
  };
  if (text.find("://") != std::string_view::npos) {
    return bad("give the host and port without a scheme");
  }
  HostPort out;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 address without its closing ']'");
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("no port after the ']'");
    const std::string_view host = text.substr(1, close - 1);
    const std::size_t zone = host.find('%');
    const std::string_view address = host.substr(0, zone);
    if (address.find(':') == std::string_view::npos) {
      return bad("the address in brackets is not an IPv6 address");
    }
    for (char c : address) {
      if (!is_ipv6_byte(c))
        return bad("the IPv6 address has the character " + internal::quote_char(c));
    }
    if (zone != std::string_view::npos) {
      const std::string_view name = host.substr(zone + 1);
      if (name.empty()) return bad("an empty IPv6 zone after '%'");
      for (char c : name) {
        if (!is_name_byte(c))
          return bad("the IPv6 zone has the character " + internal::quote_char(c));
      }
    }
    out.host = std::string(host);
    port = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("no port");
    const std::string_view host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) {
      return bad("an IPv6 address goes in brackets");
    }
    if (host.empty()) return bad("no host");
    for (char c : host) {
      if (!is_name_byte(c)) return bad("the host has the character " + internal::quote_char(c));
    }
    out.host = std::string(host);
    port = text.substr(colon + 1);
  }
  const internal::ParsedUint n = internal::parse_uint(port, 65535);
  if (n.error == internal::UintError::kTooLarge) return bad("the port must be at most 65535");
  if (!n.ok()) return bad("the port " + internal::quote(port) + " is not a number");
  if (n.value == 0 && !listen) return bad("the port must be a number from 1 to 65535");
  out.port = static_cast<std::uint16_t>(n.value);
  return out;
}

}  // namespace flurry

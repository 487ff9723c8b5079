// A network address as HOST:PORT, typed: the one parser of the project's HOST:PORT texts (the
// listen addresses, the etcd endpoints, the command-line tool's server URL), so every setting
// accepts and refuses the same forms with the same messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry {

// A host name, an IPv4 address or an IPv6 address, and a port.
struct HostPort {
  std::string host;  // without brackets: "127.0.0.1", "etcd-0.svc", "::1"
  std::uint16_t port = 0;

  // "127.0.0.1:7609", "[::1]:7609": an IPv6 host in brackets, so parse_host_port reads it back.
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// What the address is for: it decides whether port 0 is accepted and how messages name the form.
enum class HostPortUse {
  kListen,   // a listener: port 0-65535, 0 asking for any free port; "host:port" in messages
  kConnect,  // a server to reach: port 1-65535; "HOST:PORT" in messages
};

// "HOST:PORT" or "[IPV6]:PORT". HOST is 1 or more of A-Z a-z 0-9 . - _ (no ':': an IPv6 address
// goes in brackets); a bracketed IPv6 address is hex digits, ':' and '.', with an optional zone
// ("%eth0"). PORT is decimal digits only (no sign, no spaces), at most 65535, and not 0 for
// kConnect. INVALID_ARGUMENT saying what is wrong, starting with the quoted text and
// "is not host:port" (kListen) or "is not HOST:PORT" (kConnect).
[[nodiscard]] Result<HostPort> parse_host_port(std::string_view text, HostPortUse use);

}  // namespace flurry

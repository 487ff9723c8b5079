// The settings of the HTTP front end (http_server.h), typed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/host_port.h"
#include "flurry/status.h"

namespace flurry::http {

// Where to listen: host_port.h's HostPort, whose port may be 0 here (any free port).
using ListenAddress = HostPort;

// parse_host_port(text, HostPortUse::kListen): "host:port", an IPv6 host in brackets, port
// 0-65535. INVALID_ARGUMENT "... is not host:port (...)" saying what is malformed.
[[nodiscard]] Result<ListenAddress> parse_listen(std::string_view text);

// std::thread::hardware_concurrency() - 1, at least 1: on a small machine the clients and the
// kernel's network stack keep a core (on 2 cores, 2 I/O threads beside a load generator raised
// p99 from 0.5 ms to 4 ms).
[[nodiscard]] std::uint32_t default_io_threads() noexcept;

// The largest max_batch the configuration accepts: a response of that many IDs is at most
// kMaxEncodedIdLength + 3 bytes an ID (about 23 MB of JSON), which fits the default
// response_budget.
inline constexpr std::uint64_t kMaxBatchLimit = 1'000'000;

struct HttpOptions {
  ListenAddress listen{"127.0.0.1", 7609};
  // HTTP I/O threads.
  std::uint32_t io_threads = default_io_threads();
  // Open HTTP connections at most; further ones are accepted and closed at once.
  std::uint64_t max_connections = 10000;
  // A keep-alive connection without a request for this long is closed.
  std::chrono::milliseconds idle_timeout{30000};
  // Largest request framing, bytes: the header (request line and fields) together with a
  // chunked body's chunk-size lines, chunk extensions, CRLFs and trailer; more gets 431 and the
  // connection is closed.
  std::uint64_t header_limit = 8192;
  // Largest request body, bytes; larger ones get 413.
  std::uint64_t body_limit = 8192;
  // Bytes that responses larger than a connection keeps between requests (8 KiB) may hold, all
  // connections together, from when they are written until the client has taken them. A
  // response that would pass it first drops the responses not taken for 1 s or more (their
  // connections closed); if it still does not fit it is not sent: 503 RESOURCE_EXHAUSTED
  // (RESPONSE_BUDGET) with Retry-After instead, its IDs dropped unsent.
  std::uint64_t response_budget = std::uint64_t{64} << 20;
  // Host names requests may carry in Host besides the ones always allowed (host_allowed), lower
  // case without a trailing dot; "*" allows any Host (the check is off). allowed_hosts.
  std::vector<std::string> allowed_hosts;
};

// The allowed_hosts setting: host names separated by commas (blanks around each ignored), each
// 1 to 253 of A-Z a-z 0-9 . - _ (kept in lower case, a trailing dot dropped), or "*" alone;
// "" is none. INVALID_ARGUMENT naming the entry that is not a host name.
[[nodiscard]] Result<std::vector<std::string>> parse_allowed_hosts(std::string_view text);
// Written back as parse_allowed_hosts reads it ("" for none).
[[nodiscard]] std::string allowed_hosts_text(const std::vector<std::string>& hosts);

// Whether a request's Host header value (`host`, "name", "name:port", "1.2.3.4:port" or
// "[v6]:port") names this server, so that a web page whose DNS name was rebound to this
// server's address (DNS rebinding) cannot read or drive it from a browser. Allowed: any IP
// address literal (a rebinding page can only carry its own DNS name in Host), "localhost", the
// listen address's host when it is a name, and `options.allowed_hosts`; names compare without
// letter case and a trailing dot; the port is not looked at. Everything is allowed when
// allowed_hosts holds "*". An empty value is allowed (it names no other server, and browsers
// never send one); a malformed one is not.
[[nodiscard]] bool host_allowed(std::string_view host, const HttpOptions& options);

}  // namespace flurry::http

// The settings of the HTTP front end (http_server.h), typed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/host_port.h"
#include "flurry/status.h"

namespace flurry::server {

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
};

}  // namespace flurry::server

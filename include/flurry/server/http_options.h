// The settings of the HTTP front end (http_server.h), typed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry::server {

// Where to listen. The host keeps no brackets ("::1"); the port may be 0 (any free port).
struct ListenAddress {
  std::string host = "127.0.0.1";
  std::uint16_t port = 7609;

  // "127.0.0.1:7609", "[::1]:7609".
  [[nodiscard]] std::string to_string() const;
  friend bool operator==(const ListenAddress&, const ListenAddress&) = default;
};

// "host:port", an IPv6 host in brackets. INVALID_ARGUMENT saying what is malformed.
[[nodiscard]] Result<ListenAddress> parse_listen(std::string_view text);

// std::thread::hardware_concurrency() - 1, at least 1: on a small machine the clients and the
// kernel's network stack keep a core (on 2 cores, 2 I/O threads beside a load generator raised
// p99 from 0.5 ms to 4 ms).
[[nodiscard]] std::uint32_t default_io_threads() noexcept;

struct HttpOptions {
  ListenAddress listen;
  // HTTP I/O threads.
  std::uint32_t io_threads = default_io_threads();
  // Open HTTP connections at most; further ones are accepted and closed at once.
  std::uint64_t max_connections = 10000;
  // A keep-alive connection without a request for this long is closed.
  std::chrono::milliseconds idle_timeout{30000};
  // Largest request header (request line and fields), bytes; larger ones get 431.
  std::uint64_t header_limit = 8192;
  // Largest request body, bytes; larger ones get 413.
  std::uint64_t body_limit = 8192;
};

}  // namespace flurry::server

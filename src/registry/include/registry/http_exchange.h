// Internal: one HTTP/1.1 request and its answer on a new connection, with one deadline for all of
// it (name resolution, connect, write, read). Shared by the etcd client (etcd_client.cc) and the
// command-line tool's client (apps/flurry/http_client.cc). Both sides compile Beast with
// BOOST_BEAST_USE_STD_STRING_VIEW and BOOST_ASIO_NO_DEPRECATED.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "flurry/status.h"

namespace flurry::internal {

using HttpExchangeResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Sends `request` (sent as given: set Host and prepare the payload first) to host:port and reads
// the answer (body at most `body_limit` bytes). IO errors name `where` and the stage:
// "<where>: no answer within N ms (while connecting)", "<where>: sending the request: <error>".
// Any HTTP status is a success here: the caller reads it.
[[nodiscard]] Result<HttpExchangeResponse> http_exchange(
    const std::string& host, std::uint16_t port,
    const boost::beast::http::request<boost::beast::http::string_body>& request,
    std::chrono::milliseconds timeout, std::size_t body_limit, const std::string& where);

}  // namespace flurry::internal

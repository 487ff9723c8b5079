#include "registry/http_exchange.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string_view>

namespace flurry::internal {

Result<HttpExchangeResponse> http_exchange(
    const std::string& host, std::uint16_t port,
    const boost::beast::http::request<boost::beast::http::string_body>& request,
    std::chrono::milliseconds timeout, std::size_t body_limit, const std::string& where) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace http = beast::http;
  using tcp = asio::ip::tcp;

  // Declared first, destroyed last: handlers left pending at a timeout are destroyed with it.
  asio::io_context ioc(1);
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(body_limit);

  bool done = false;
  beast::error_code failure;
  std::string_view stage = "resolving the host";
  const auto fail = [&](beast::error_code ec) {
    failure = ec;
    done = true;
  };
  // The stream's timer covers connect, write and read; run_for() the name resolution too.
  stream.expires_after(timeout);
  resolver.async_resolve(
      host, std::to_string(port), tcp::resolver::numeric_service,
      [&](beast::error_code ec, const tcp::resolver::results_type& results) {
        if (ec) return fail(ec);
        stage = "connecting";
        stream.async_connect(results, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return fail(ec);
          stage = "sending the request";
          http::async_write(stream, request, [&](beast::error_code ec, std::size_t) {
            if (ec) return fail(ec);
            stage = "waiting for the answer";
            http::async_read(stream, buffer, parser, [&](beast::error_code ec, std::size_t) {
              if (ec) return fail(ec);
              done = true;
            });
          });
        });
      });
  ioc.run_for(timeout);

  if (!done || failure == beast::error::timeout) {
    return Status(Reason::kIo, where + ": no answer within " + std::to_string(timeout.count()) +
                                   " ms (while " + std::string(stage) + ")");
  }
  if (failure) {
    return Status(Reason::kIo, where + ": " + std::string(stage) + ": " + failure.message());
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return parser.release();
}

}  // namespace flurry::internal

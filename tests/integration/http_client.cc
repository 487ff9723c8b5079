// flurry_http_client: a small synchronous HTTP/1.1 client (Boost.Beast) for the integration
// tests, so every route is exercised by a C++ client as well as by curl and Python.
//
// Usage: flurry_http_client [-X METHOD] HOST PORT PATH...
//
// Sends one request per PATH, in order, on a single keep-alive connection (reconnecting if the
// server closed it), and prints one JSON object per response on its own line:
//   {"path":"...","status":200,"content_type":"...","retry_after":"...","keep_alive":true,
//    "body":"..."}
// Exit status: 0 when every request got a response (whatever its status), 1 on a network or
// protocol error (the message on stderr), 2 on a usage error.
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

int usage() {
  std::cerr << "usage: flurry_http_client [-X METHOD] HOST PORT PATH...\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string method = "GET";
  if (args.size() >= 2 && args[0] == "-X") {
    method = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() < 3) return usage();
  const std::string host = args[0];
  const std::string port = args[1];
  const std::vector<std::string> paths(args.begin() + 2, args.end());
  const http::verb verb = http::string_to_verb(method);
  if (verb == http::verb::unknown) return usage();

  try {
    asio::io_context ioc;
    tcp::resolver resolver(ioc);
    const auto endpoints = resolver.resolve(host, port);
    std::optional<beast::tcp_stream> stream;
    beast::flat_buffer buffer;
    auto connect = [&] {
      stream.emplace(ioc);
      stream->expires_after(std::chrono::seconds(30));
      stream->connect(endpoints);
      buffer.clear();
    };
    connect();
    for (const auto& path : paths) {
      http::request<http::empty_body> req{verb, path, 11};
      req.set(http::field::host, host + ":" + port);
      req.set(http::field::user_agent, "flurry-integration-test");
      req.keep_alive(true);
      stream->expires_after(std::chrono::seconds(30));
      http::write(*stream, req);

      http::response_parser<http::string_body> parser;
      parser.body_limit(256 * 1024 * 1024);
      http::read(*stream, buffer, parser);
      auto& res = parser.get();

      nlohmann::json line;
      line["path"] = path;
      line["status"] = res.result_int();
      line["content_type"] = std::string(res[http::field::content_type]);
      line["retry_after"] = std::string(res[http::field::retry_after]);
      line["keep_alive"] = res.keep_alive();
      line["body"] = res.body();
      std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
      std::cout.flush();

      if (!res.keep_alive()) {
        beast::error_code ec;
        stream->socket().shutdown(tcp::socket::shutdown_both, ec);
        connect();
      }
    }
    beast::error_code ec;
    stream->socket().shutdown(tcp::socket::shutdown_both, ec);
  } catch (const std::exception& e) {
    std::cerr << "flurry_http_client: " << e.what() << '\n';
    return 1;
  }
  return 0;
}

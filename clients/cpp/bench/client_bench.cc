// flurry_client_bench [--duration S]: IDs per second from the C++ client's buffer and with one
// request per ID, against FLURRY_BENCH_SERVER (one base URL). One JSON object per line:
// buffer/1, buffer/8, per_request/1, per_request/8.
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flurry/client.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

// One keep-alive connection to the server.
struct Conn {
  boost::asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  std::string hostport;
  explicit Conn(const std::string& base) : hostport(base.substr(7)) {
    const auto colon = hostport.rfind(':');
    tcp::resolver resolver(ioc);
    stream.connect(resolver.resolve(hostport.substr(0, colon), hostport.substr(colon + 1)));
    stream.socket().set_option(tcp::no_delay(true));
  }
  std::string get(const std::string& target) {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, hostport);
    http::write(stream, req);
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result_int() != 200)
      throw std::runtime_error("HTTP " + std::to_string(res.result_int()));
    return res.body();
  }
};

double id_requests(const std::string& base) {
  Conn c(base);
  std::stringstream in(c.get("/metrics"));
  double sum = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("flurry_http_requests_total{") &&
        line.find("route=\"/v1/ids\"") != std::string::npos) {
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return sum;
}

template <typename PerCaller>
void run(const std::string& base, const char* bench, int callers, double duration,
         PerCaller per_caller) {
  const double before = id_requests(base);
  std::atomic<std::uint64_t> total{0};
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::duration<double>(duration);
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&] { total += per_caller(until); });
  }
  for (auto& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double requests = id_requests(base) - before;
  const auto ids = total.load();
  std::printf(
      "{\"client\":\"cpp\",\"bench\":\"%s\",\"callers\":%d,\"ids\":%llu,\"seconds\":%.3f,"
      "\"ids_per_s\":%.0f,\"requests\":%.0f,\"requests_per_million\":%.1f}\n",
      bench, callers, static_cast<unsigned long long>(ids), seconds, ids / seconds, requests,
      ids ? requests * 1e6 / static_cast<double>(ids) : 0.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  double duration = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--duration" && i + 1 < argc) {
      duration = std::atof(argv[++i]);
    } else {
      std::cerr
          << "usage: flurry_client_bench [--duration S]  (FLURRY_BENCH_SERVER=http://HOST:PORT)\n";
      return 2;
    }
  }
  const char* server = std::getenv("FLURRY_BENCH_SERVER");
  if (!server || duration <= 0) {
    std::cerr << "flurry_client_bench: set FLURRY_BENCH_SERVER to the server's base URL\n";
    return 2;
  }
  const std::string base = server;
  try {
    for (int callers : {1, 8}) {
      flurry::ClientOptions options;
      options.endpoints = {base};
      auto client = flurry::Client::open(options);
      if (!client.ok()) {
        std::cerr << client.status().to_string() << "\n";
        return 1;
      }
      flurry::Client& c = **client;
      run(base, "buffer", callers, duration, [&c](auto until) {
        std::uint64_t n = 0;
        while (std::chrono::steady_clock::now() < until) {
          for (int i = 0; i < 1000; ++i) {
            if (auto id = c.next(); !id.ok()) throw std::runtime_error(id.error().message);
          }
          n += 1000;
        }
        return n;
      });
    }
    for (int callers : {1, 8}) {
      run(base, "per_request", callers, duration, [&base](auto until) {
        Conn conn(base);
        std::uint64_t n = 0;
        while (std::chrono::steady_clock::now() < until) {
          conn.get("/v1/ids?count=1&format=text");
          ++n;
        }
        return n;
      });
    }
  } catch (const std::exception& e) {
    std::cerr << "flurry_client_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

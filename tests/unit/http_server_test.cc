// The HTTP transport handed its router, pools and clocks by the test as `flurry serve` hands them:
// a real Service, the operations layer over it, HttpServer on 127.0.0.1 and a free port, and
// plain blocking sockets as the client. The Date header comes from the injected wall clock.
#include "flurry/server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "api_fixture.h"
#include "fake_clock.h"
#include "flurry/server/http_options.h"
#include "flurry/server/service.h"
#include "test_store.h"

namespace flurry::server {
namespace {

using testing::TempDir;

// Sends `request` to 127.0.0.1:`port` and reads the answer until the server closes.
std::string exchange(std::uint16_t port, std::string_view request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) {
      answer.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return answer;
}

std::uint16_t port_of(const std::string& address) {
  return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

TEST(HttpServerTest, DateHeaderComesFromTheInjectedWallClock) {
  TempDir dir;
  Result<std::unique_ptr<Service>> service = testing::start_service(dir.path() / "data");
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  // 2037-01-02 03:04:05 UTC, a Friday: far from the real clock.
  testing::FakeClock wall(TimePoint(std::chrono::seconds(2114478245)));
  testing::OpsStack stack(**service, nullptr, nullptr);
  HttpRouter router(stack.operations);
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 1;
  HttpServer http(router, stack.pools, (*service)->request_metrics(), options,
                  {wall, SteadyClock::instance()});
  ASSERT_TRUE(http.bind().ok());
  http.start();
  const std::string answer =
      exchange(port_of(http.local_address()),
               "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  http.stop(std::chrono::milliseconds(0));
  (*service)->stop();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("\r\nDate: Fri, 02 Jan 2037 03:04:05 GMT\r\n"), std::string::npos)
      << answer;
  EXPECT_NE(answer.find("{\"status\":\"ok\"}"), std::string::npos) << answer;
}

// The console's files go out with their own Cache-Control and the extra headers of ApiResponse
// (Content-Security-Policy, Referrer-Policy); an API answer keeps no-store and gets none of them.
TEST(HttpServerTest, ExtraHeadersAndCacheControlAreWritten) {
  TempDir dir;
  Result<std::unique_ptr<Service>> service = testing::start_service(dir.path() / "data");
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  testing::OpsStack stack(**service, nullptr, nullptr);
  HttpRouter router(stack.operations);
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 1;
  HttpServer http(router, stack.pools, (*service)->request_metrics(), options, Clocks::system());
  ASSERT_TRUE(http.bind().ok());
  http.start();
  const std::uint16_t port = port_of(http.local_address());
  const std::string console =
      exchange(port, "GET /console HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  const std::string api =
      exchange(port, "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  http.stop(std::chrono::milliseconds(0));
  (*service)->stop();
  EXPECT_EQ(console.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << console;
  const std::string_view head = std::string_view(console).substr(0, console.find("\r\n\r\n") + 2);
  for (std::string_view line :
       {"\r\nContent-Type: text/html; charset=utf-8\r\n", "\r\nCache-Control: no-cache\r\n",
        "\r\nX-Content-Type-Options: nosniff\r\n", "\r\nReferrer-Policy: no-referrer\r\n",
        "\r\nContent-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'\r\n"}) {
    EXPECT_NE(head.find(line), std::string_view::npos) << line << "\n" << head;
  }
  EXPECT_NE(console.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_NE(api.find("\r\nCache-Control: no-store\r\n"), std::string::npos) << api;
  EXPECT_EQ(api.find("Content-Security-Policy"), std::string::npos) << api;
  EXPECT_EQ(api.find("Referrer-Policy"), std::string::npos) << api;
}

// A request the operations layer defers (a segment tag not loaded yet: the store pool) is run
// again on the pool the composition root handed over, and answered on its connection.
TEST(HttpServerTest, DeferredRequestsRunOnTheHandedPools) {
  TempDir dir;
  Result<std::unique_ptr<Service>> service = testing::start_service(dir.path() / "data");
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  Result<std::unique_ptr<SegmentStore>> store =
      testing::open_sqlite_store(dir.path() / "segments.db");
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  SegmentTagSpec spec;
  spec.tag = "orders";
  ASSERT_TRUE((*store)->create_tag(spec).ok());
  Result<std::unique_ptr<SegmentService>> segments =
      testing::serve_store(std::move(store).value(), SegmentOptions{});
  ASSERT_TRUE(segments.ok()) << segments.status().to_string();
  testing::OpsStack stack(**service, segments->get(), nullptr);
  HttpRouter router(stack.operations);
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 1;
  HttpServer http(router, stack.pools, (*service)->request_metrics(), options);
  ASSERT_TRUE(http.bind().ok());
  http.start();
  const std::uint16_t port = port_of(http.local_address());
  const std::string ids = exchange(
      port, "GET /v1/segments/orders/ids?count=3 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  const std::string list =
      exchange(port, "GET /v1/segments HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  http.stop(std::chrono::milliseconds(0));
  segments->reset();
  (*service)->stop();
  EXPECT_EQ(ids.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ids;
  EXPECT_NE(ids.find("{\"ids\":[\"1\",\"2\",\"3\"]}"), std::string::npos) << ids;
  EXPECT_EQ(list.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << list;
  EXPECT_NE(list.find("\"tag\":\"orders\""), std::string::npos) << list;
}

}  // namespace
}  // namespace flurry::server

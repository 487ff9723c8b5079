// The HTTP transport handed its operations, pools and clocks by the test as `flurry serve` hands
// them: a real Service, the operations layer over it, HttpServer on 127.0.0.1 and a free port, and
// plain blocking sockets as the client. The Date header comes from the injected wall clock.
#include "http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api_fixture.h"
#include "fake_clock.h"
#include "http/http_metrics.h"
#include "http/http_options.h"
#include "service/service.h"
#include "test_store.h"

namespace flurry::http {
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
  Result<std::unique_ptr<service::Service>> service = testing::start_service(dir.path() / "data");
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  // 2037-01-02 03:04:05 UTC, a Friday: far from the real clock.
  testing::FakeClock wall(TimePoint(std::chrono::seconds(2114478245)));
  testing::OpsStack stack(**service, nullptr, nullptr);
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 1;
  RequestMetrics request_metrics;
  HttpServer http(stack.operations, stack.pools, request_metrics, options,
                  {wall, SteadyClock::instance()});
  ASSERT_TRUE(http.bind().ok());
  http.start();
  const std::string answer =
      exchange(port_of(http.local_address()),
               "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
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
  Result<std::unique_ptr<service::Service>> service = testing::start_service(dir.path() / "data");
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  testing::OpsStack stack(**service, nullptr, nullptr);
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 1;
  RequestMetrics request_metrics;
  HttpServer http(stack.operations, stack.pools, request_metrics, options, Clocks::system());
  ASSERT_TRUE(http.bind().ok());
  http.start();
  const std::uint16_t port = port_of(http.local_address());
  const std::string console =
      exchange(port, "GET /console HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const std::string api =
      exchange(port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
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
  Result<std::unique_ptr<service::Service>> service = testing::start_service(dir.path() / "data");
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
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 1;
  RequestMetrics request_metrics;
  HttpServer http(stack.operations, stack.pools, request_metrics, options);
  ASSERT_TRUE(http.bind().ok());
  http.start();
  const std::uint16_t port = port_of(http.local_address());
  const std::string ids = exchange(port,
                                   "GET /v1/segments/orders/ids?count=3 HTTP/1.1\r\nHost: "
                                   "127.0.0.1\r\nConnection: close\r\n\r\n");
  const std::string list =
      exchange(port, "GET /v1/segments HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  http.stop(std::chrono::milliseconds(0));
  segments->reset();
  (*service)->stop();
  EXPECT_EQ(ids.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << ids;
  EXPECT_NE(ids.find("{\"ids\":[\"1\",\"2\",\"3\"]}"), std::string::npos) << ids;
  EXPECT_EQ(list.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << list;
  EXPECT_NE(list.find("\"tag\":\"orders\""), std::string::npos) << list;
}

// The Host check against DNS rebinding: a name this server does not know is refused with 400
// saying how to allow it (nothing is served to it, and the connection is closed), whatever the
// route; IP literals, localhost and the allowed_hosts names are served, in any letter case and
// with a trailing dot, and so is an empty Host and HTTP/1.0 without one.
TEST(HttpServerTest, HostMustNameThisServer) {
  TempDir dir;
  Result<std::unique_ptr<service::Service>> service = testing::start_service(dir.path() / "data");
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  testing::OpsStack stack(**service, nullptr, nullptr);
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 1;
  options.allowed_hosts = {"ids.example.com"};
  RequestMetrics request_metrics;
  HttpServer http(stack.operations, stack.pools, request_metrics, options, Clocks::system());
  ASSERT_TRUE(http.bind().ok());
  http.start();
  const std::uint16_t port = port_of(http.local_address());
  auto ask = [port](std::string_view host_line) {
    return http::exchange(
        port, "GET /v1/ids HTTP/1.1\r\n" + std::string(host_line) + "Connection: close\r\n\r\n");
  };
  std::vector<std::pair<std::string, std::string>> answers;
  for (const char* host :
       {"Host: 127.0.0.1:1\r\n", "Host: localhost\r\n", "Host: LocalHost.:7609\r\n",
        "Host: [::1]:7609\r\n", "Host: 10.1.2.3\r\n", "Host: ids.example.com:80\r\n",
        "Host: IDS.Example.COM.\r\n", "Host: \r\n", "Host: evil.example:7609\r\n",
        "Host: evil.example\r\n", "Host: ids.example.com.evil.example\r\n",
        "Host: 127.0.0.1.evil.example\r\n", "Host: [evil.example]:80\r\n", "Host: a\r\n"}) {
    answers.emplace_back(host, ask(host));
  }
  const std::string old = exchange(port, "GET /v1/ids HTTP/1.0\r\n\r\n");
  const std::string old_foreign =
      exchange(port, "GET /v1/ids HTTP/1.0\r\nHost: rebound.example\r\n\r\n");
  http.stop(std::chrono::milliseconds(0));
  (*service)->stop();
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto& [host, answer] = answers[i];
    if (i < 8) {
      EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << host << answer;
    } else {
      EXPECT_EQ(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << host << answer;
      EXPECT_NE(answer.find("is not a name of this server"), std::string::npos) << answer;
      EXPECT_NE(answer.find("allowed_hosts"), std::string::npos) << answer;
      EXPECT_EQ(answer.find("\"ids\""), std::string::npos) << answer;
    }
  }
  EXPECT_EQ(old.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << old;
  EXPECT_EQ(old_foreign.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << old_foreign;
}

// stop() on clocks that stand still (a test's fake clocks): the drain and the wait for the last
// connections are bounded in real time, so stop() returns, here with a request half read (its
// header in and answered with 100 Continue, its body never sent), which the drain does not close
// as idle. Before, the drain waited for the injected monotonic clock to pass its deadline, which
// a fake clock never does: stop() never returned.
TEST(HttpServerTest, StopReturnsOnAFakeClock) {
  TempDir dir;
  Result<std::unique_ptr<service::Service>> service = testing::start_service(dir.path() / "data");
  ASSERT_TRUE(service.ok()) << service.status().to_string();
  testing::FakeClock wall(TimePoint(std::chrono::seconds(2114478245)));
  testing::FakeMonotonicClock monotonic;
  testing::OpsStack stack(**service, nullptr, nullptr);
  HttpOptions options;
  options.listen.port = 0;
  options.io_threads = 2;
  RequestMetrics request_metrics;
  HttpServer http(stack.operations, stack.pools, request_metrics, options, {wall, monotonic});
  ASSERT_TRUE(http.bind().ok());
  http.start();

  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_of(http.local_address()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  const std::string_view header =
      "POST /v1/segments HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
      "Content-Length: 10\r\n\r\n";
  ASSERT_EQ(::send(fd, header.data(), header.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(header.size()));
  std::string answer;
  char buf[256];
  while (answer.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<std::size_t>(n));
  }
  ASSERT_EQ(answer, "HTTP/1.1 100 Continue\r\n\r\n");  // the request is being read
  EXPECT_EQ(http.connections(), 1u);

  // The contract: the drain (100 ms), then the connection closed and the threads joined; the
  // bound leaves a loaded machine plenty of room beyond that.
  std::future<void> stopped =
      std::async(std::launch::async, [&http] { http.stop(std::chrono::milliseconds(100)); });
  const bool returned = stopped.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!returned) {
    monotonic.advance(std::chrono::hours(1));  // let the stuck stop() end, so the test does
    stopped.wait();
  }
  EXPECT_TRUE(returned) << "stop() did not return within 20 s on a fake clock";
  EXPECT_EQ(http.connections(), 0u);
  // The half-read request got no answer: its connection was closed.
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  EXPECT_LE(n, 0);
  ::close(fd);
  (*service)->stop();
}

TEST(HttpOptionsTest, HostAllowedAndTheSetting) {
  HttpOptions options;
  options.listen.host = "flurry-0.flurry.svc";
  EXPECT_TRUE(host_allowed("flurry-0.flurry.svc:7609", options));
  EXPECT_TRUE(host_allowed("192.0.2.1", options));
  EXPECT_TRUE(host_allowed("[2001:db8::1%eth0]:80", options));
  EXPECT_FALSE(host_allowed("flurry-1.flurry.svc", options));
  EXPECT_TRUE(host_allowed("", options));
  EXPECT_FALSE(host_allowed("[::1", options));
  options.allowed_hosts = {"*"};
  EXPECT_TRUE(host_allowed("anything.example", options));

  Result<std::vector<std::string>> hosts = parse_allowed_hosts(" A.Example. , b_c ,x");
  ASSERT_TRUE(hosts.ok()) << hosts.status().to_string();
  EXPECT_EQ(*hosts, (std::vector<std::string>{"a.example", "b_c", "x"}));
  EXPECT_EQ(allowed_hosts_text(*hosts), "a.example,b_c,x");
  ASSERT_TRUE(parse_allowed_hosts("").ok());
  EXPECT_TRUE(parse_allowed_hosts("")->empty());
  for (const char* bad : {"a,,b", "a b", "http://a", "a:80", "*,a", "."}) {
    const Result<std::vector<std::string>> r = parse_allowed_hosts(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace flurry::http

// The etcd registry's client without etcd: endpoints and cluster names, no endpoint answering,
// and a member that answers garbage (an HTTP/1.1 server where etcd's gRPC is expected).
#include "registry/etcd_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/quote.h"
#include "flurry/open_registry.h"
#include "free_port.h"

namespace flurry::internal {
namespace {

using namespace std::chrono_literals;

// The settings' form (open_registry.h): a comma-separated list.
TEST(EtcdEndpointTest, ParsesACommaSeparatedList) {
  Result<std::vector<EtcdEndpoint>> list = parse_etcd_endpoints("a:1, [::1]:2 ,b.c:3");
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  EXPECT_EQ(*list, (std::vector<EtcdEndpoint>{{"a", 1}, {"::1", 2}, {"b.c", 3}}));
  for (std::string_view bad : {"", ",", "a:1,", ",a:1", "a:1,,b:2", "a:1 b:2", "a:1,b"}) {
    Result<std::vector<EtcdEndpoint>> r = parse_etcd_endpoints(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

// A password written into an endpoint is refused and never shown (issue 32): etcd's user and
// password are settings of their own.
TEST(EtcdEndpointTest, CredentialsAreRefusedWithoutBeingShown) {
  for (std::string_view bad :
       {"http://user:Secret1@h:2379", "https://user:Secret1@h:2379", "user:Secret1@h:2379",
        "h:1,http://u:Secret1@h:2379", "http://u:Secret1@h:2379,", "http://u:Secret1@[::1]:2379",
        "http://h:2379/?password=Secret1", "ftp://u:Secret1@h:21", "http://u:Secret1@h:x",
        "http://u:Secret1@/"}) {
    Result<std::vector<EtcdEndpoint>> r = parse_etcd_endpoints(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message().find("Secret1"), std::string::npos) << r.status().message();
  }
  Result<EtcdEndpoint> one = parse_etcd_endpoint("http://root:Secret1@h:2379");
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("etcd_password_file"), std::string::npos)
      << one.status().message();
  EXPECT_NE(one.status().message().find("***@h:2379"), std::string::npos) << one.status().message();
}

TEST(EtcdClusterNameTest, OneToSixtyFourSafeCharacters) {
  const std::string longest(64, 'x');
  for (std::string_view good : {"default", "a", "prod-eu.1_x", longest.c_str()}) {
    EXPECT_TRUE(check_etcd_cluster_name(good).ok()) << good;
  }
  const std::string too_long(65, 'x');
  for (std::string_view bad : {"", "a/b", "a b", "caf\xc3\xa9", "..", ".", too_long.c_str()}) {
    EXPECT_EQ(check_etcd_cluster_name(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
}

// A client over `endpoints` (the module loaded from FLURRY_MODULE_DIR).
std::unique_ptr<EtcdClient> client_of(std::vector<EtcdEndpoint> endpoints,
                                      std::chrono::milliseconds timeout) {
  Result<std::unique_ptr<EtcdClient>> made = EtcdClient::open(std::move(endpoints), timeout);
  EXPECT_TRUE(made.ok()) << made.status().to_string();
  return made.ok() ? std::move(made).value() : nullptr;
}

// Without a server: a closed port answers at once, and the error names every endpoint tried.
TEST(EtcdClientTest, NoEndpointAnsweringIsUnavailableNamingEach) {
  const auto client =
      client_of({EtcdEndpoint{{"127.0.0.1", 1}}, EtcdEndpoint{{"127.0.0.1", 2}}}, 2000ms);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->describe(), "127.0.0.1:1,127.0.0.1:2");
  const auto start = std::chrono::steady_clock::now();
  Result<EtcdRange> r = client->range("/x");
  ASSERT_FALSE(r.ok());
  // A refused connection is not waited for: well within the two attempts' deadlines.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4000ms);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_EQ(r.status().reason(), Reason::kIo) << r.status().to_string();
  EXPECT_TRUE(r.status().retryable());
  for (const std::string needle :
       {"etcd 127.0.0.1:1 Range: UNAVAILABLE", "etcd 127.0.0.1:2 Range: UNAVAILABLE",
        "no etcd endpoint answered Range"}) {
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(client->counters().requests, 2u);  // one Range attempt per endpoint
  // The streams too: a keep-alive finds no endpoint to open its stream on, a history read none
  // to watch on.
  Result<std::optional<std::int64_t>> k = client->keep_alive(7);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kUnavailable) << k.status().to_string();
  EXPECT_NE(k.status().message().find("LeaseKeepAlive"), std::string::npos) << k.status().message();
  Result<EtcdHistory> h = client->history("/x", 5);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable) << h.status().to_string();
  EXPECT_NE(h.status().message().find("127.0.0.1:2"), std::string::npos) << h.status().message();
  EXPECT_EQ(client->counters().authentications, 0u);
  EXPECT_EQ(client->counters().keep_alive_messages, 0u);  // no stream could be opened
}

TEST(EtcdClientTest, BadArgumentsAreRefusedAtOpen) {
  EXPECT_EQ(EtcdClient::open({}, 1000ms).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EtcdClient::open({EtcdEndpoint{{"127.0.0.1", 1}}}, 0ms).status().code(),
            StatusCode::kInvalidArgument);
  // TLS files with plain endpoints: never sent as plain text.
  EtcdTlsFiles tls;
  tls.ca_file = "/nonexistent/ca.pem";
  EXPECT_EQ(
      EtcdClient::open({EtcdEndpoint{{"127.0.0.1", 1}}}, 1000ms, std::nullopt, tls).status().code(),
      StatusCode::kInvalidArgument);
  // A CA file that is not there fails the open, naming it.
  Result<std::unique_ptr<EtcdClient>> r =
      EtcdClient::open({EtcdEndpoint{{"127.0.0.1", 1}, true}}, 1000ms, std::nullopt, tls);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/ca.pem"), std::string::npos)
      << r.status().message();
}

// A server on 127.0.0.1 that answers every connection with one canned HTTP/1.1 answer and closes
// it (fault injection: what a proxy, a wrong port or a web server may send where etcd's gRPC is
// expected).
class CannedServer {
 public:
  explicit CannedServer(std::string answer) : answer_(std::move(answer)) {
    fd_ = testing::listen_loopback(port_);
    if (fd_ < 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~CannedServer() {
    if (fd_ < 0) return;
    ::shutdown(fd_, SHUT_RDWR);  // wakes accept()
    thread_.join();
    ::close(fd_);
  }
  CannedServer(const CannedServer&) = delete;
  CannedServer& operator=(const CannedServer&) = delete;

  [[nodiscard]] EtcdEndpoint endpoint() const { return EtcdEndpoint{{"127.0.0.1", port_}}; }

 private:
  void serve() {
    for (;;) {
      const int conn = ::accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      // Whatever the client sent first (gRPC's HTTP/2 preface), then the answer, then close.
      char buf[4096];
      (void)::read(conn, buf, sizeof buf);
      for (std::size_t sent = 0; sent < answer_.size();) {
        const ssize_t n = ::write(conn, answer_.data() + sent, answer_.size() - sent);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
      }
      ::close(conn);
    }
  }

  const std::string answer_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

std::string http_answer(std::string_view status, std::string_view body) {
  return "HTTP/1.1 " + std::string(status) +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + std::string(body);
}

// Garbage from a member (an HTTP/1.1 server where etcd's gRPC is expected) is an UNAVAILABLE
// error naming the member and the call, retryable (another member may do better), within the
// timeout; never a value read from it, never a crash.
TEST(EtcdClientTest, GarbageAnswersAreUnavailableNamingTheMemberAndTheCall) {
  for (const std::string& answer :
       {http_answer("200 OK", "<html><body>It works!</body></html>"),
        http_answer("418 I'm a teapot", "short and stout"), std::string("\x00\x01garbage\n")}) {
    CannedServer garbage(answer);
    const auto client = client_of({garbage.endpoint()}, 2000ms);
    ASSERT_NE(client, nullptr);
    const std::string where = garbage.endpoint().to_string();
    const auto start = std::chrono::steady_clock::now();
    Result<EtcdRange> r = client->range("/x");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
    EXPECT_TRUE(r.status().retryable());
    EXPECT_NE(r.status().message().find("etcd " + where + " Range"), std::string::npos)
        << r.status().message();
    Result<EtcdTxnResult> t = client->txn(EtcdTxn{});
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kUnavailable) << t.status().to_string();
    EXPECT_NE(t.status().message().find("etcd " + where + " Txn"), std::string::npos)
        << t.status().message();
    Result<std::optional<std::int64_t>> k = client->keep_alive(7);
    ASSERT_FALSE(k.ok());
    EXPECT_EQ(k.status().code(), StatusCode::kUnavailable) << k.status().to_string();
    EXPECT_NE(k.status().message().find(where), std::string::npos) << k.status().message();
    // Each call is bounded by its timeout (2 s), the three by 3 timeouts and a margin.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 7000ms);
  }
}

}  // namespace
}  // namespace flurry::internal

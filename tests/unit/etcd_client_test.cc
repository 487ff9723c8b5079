// The etcd registry's client without etcd: endpoints and cluster names, no endpoint answering,
// and a member that answers garbage (the codec itself: etcd_codec_test.cc).
#include "registry/etcd_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/quote.h"
#include "flurry/open_registry.h"
#include "free_port.h"

namespace flurry::internal {
namespace {

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

// Without a server: a closed port answers at once, and the error names every endpoint tried.
TEST(EtcdClientTest, NoEndpointAnsweringIsUnavailableNamingEach) {
  const EtcdClient client({EtcdEndpoint{{"127.0.0.1", 1}}, EtcdEndpoint{{"127.0.0.1", 2}}},
                          std::chrono::milliseconds(500));
  EXPECT_EQ(client.describe(), "127.0.0.1:1,127.0.0.1:2");
  Result<EtcdRange> r = client.range("/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().to_string();
  EXPECT_EQ(r.status().reason(), Reason::kIo) << r.status().to_string();
  EXPECT_TRUE(r.status().retryable());
  EXPECT_NE(r.status().message().find("127.0.0.1:1: connecting"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("127.0.0.1:2: connecting"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("/v3/kv/range"), std::string::npos) << r.status().message();
}

// A member that answers every request on 127.0.0.1 with one canned HTTP answer (fault injection:
// what a proxy, a wrong port or a broken member may send), one request per connection as the
// client's plain HTTP makes them.
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
      // The request's header and its body (Content-Length), then the answer, then close.
      std::string request;
      char buf[4096];
      for (;;) {
        const std::size_t head = request.find("\r\n\r\n");
        if (head != std::string::npos) {
          const std::size_t at = request.find("Content-Length: ");
          const std::size_t body =
              at == std::string::npos ? 0 : std::stoul(request.substr(at + 16));
          if (request.size() >= head + 4 + body) break;
        }
        const ssize_t n = ::read(conn, buf, sizeof buf);
        if (n <= 0) break;
        request.append(buf, static_cast<std::size_t>(n));
      }
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

// Garbage from a member is an error naming the member and the path, never a value read from it:
// a 200 that is not JSON is an I/O failure (another member may do better), JSON that is not what
// the gateway sends is INTERNAL with the codec's reason, an unknown HTTP error says so.
TEST(EtcdClientTest, GarbageAnswersAreErrorsNamingTheMemberAndThePath) {
  CannedServer html(http_answer("200 OK", "<html><body>It works!</body></html>"));
  const EtcdClient to_html({html.endpoint()}, std::chrono::milliseconds(5000));
  Result<EtcdRange> r = to_html.range("/x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), Reason::kIo) << r.status().to_string();
  const std::string where = html.endpoint().to_string();
  for (const std::string& needle :
       {where, std::string("/v3/kv/range"), std::string("not JSON"), std::string("It works")}) {
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << needle << " in " << r.status().message();
  }

  CannedServer odd(http_answer("200 OK", R"({"header":{"revision":"two"}})"));
  const EtcdClient to_odd({odd.endpoint()}, std::chrono::milliseconds(5000));
  Result<EtcdTxnResult> t = to_odd.txn(EtcdTxn{});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInternal) << t.status().to_string();
  EXPECT_FALSE(t.status().retryable());
  for (const std::string& needle : {odd.endpoint().to_string(), std::string("/v3/kv/txn"),
                                    std::string("revision is not an int64")}) {
    EXPECT_NE(t.status().message().find(needle), std::string::npos)
        << needle << " in " << t.status().message();
  }
  Result<EtcdLeaseGrant> g = to_odd.grant(2);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInternal) << g.status().to_string();
  EXPECT_NE(g.status().message().find("/v3/lease/grant"), std::string::npos)
      << g.status().message();

  CannedServer teapot(http_answer("418 I'm a teapot", "short and stout"));
  const EtcdClient to_teapot({teapot.endpoint()}, std::chrono::milliseconds(5000));
  Result<std::optional<std::int64_t>> k = to_teapot.keep_alive(7);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().reason(), Reason::kIo) << k.status().to_string();
  for (const std::string& needle : {std::string("/v3/lease/keepalive"), std::string("HTTP 418"),
                                    std::string("short and stout")}) {
    EXPECT_NE(k.status().message().find(needle), std::string::npos)
        << needle << " in " << k.status().message();
  }
}

}  // namespace
}  // namespace flurry::internal

// The one HOST:PORT parser: every accepted form with its value, every refused form with the
// message it gets, for both uses (a listener, a server to reach).
#include "flurry/host_port.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace flurry {
namespace {

struct Good {
  std::string_view text;
  std::string_view host;
  std::uint16_t port;
  std::string_view canonical;  // to_string()
};

TEST(HostPortTest, AcceptsNamesIpv4AndBracketedIpv6ForBothUses) {
  for (const Good& g :
       {Good{"127.0.0.1:7609", "127.0.0.1", 7609, "127.0.0.1:7609"},
        Good{"example.com:80", "example.com", 80, "example.com:80"},
        Good{"etcd-0.etcd.svc:1", "etcd-0.etcd.svc", 1, "etcd-0.etcd.svc:1"},
        Good{"under_score:2379", "under_score", 2379, "under_score:2379"},
        Good{"localhost:00080", "localhost", 80, "localhost:80"},
        Good{"[::1]:8080", "::1", 8080, "[::1]:8080"},
        Good{"[fd00::1]:65535", "fd00::1", 65535, "[fd00::1]:65535"},
        Good{"[::ffff:10.0.0.1]:2379", "::ffff:10.0.0.1", 2379, "[::ffff:10.0.0.1]:2379"},
        Good{"[fe80::1%eth0]:2379", "fe80::1%eth0", 2379, "[fe80::1%eth0]:2379"}}) {
    for (HostPortUse use : {HostPortUse::kListen, HostPortUse::kConnect}) {
      SCOPED_TRACE(std::string(g.text));
      Result<HostPort> r = parse_host_port(g.text, use);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->host, g.host);
      EXPECT_EQ(r->port, g.port);
      EXPECT_EQ(r->to_string(), g.canonical);
      // to_string() reads back as the same value.
      EXPECT_EQ(parse_host_port(r->to_string(), use).value(), *r);
    }
  }
}

TEST(HostPortTest, PortZeroOnlyForAListener) {
  Result<HostPort> any = parse_host_port("[::]:0", HostPortUse::kListen);
  ASSERT_TRUE(any.ok()) << any.status().to_string();
  EXPECT_EQ(*any, (HostPort{"::", 0}));
  Result<HostPort> zero = parse_host_port("host:0", HostPortUse::kConnect);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(),
            "\"host:0\" is not HOST:PORT (the port must be a number from 1 to 65535)");
}

struct Bad {
  std::string_view text;
  std::string_view why;  // the reason in the parentheses
};

// Each refused form with its reason; the same reasons for both uses, named "host:port" (with
// examples) for a listener and "HOST:PORT" for a server to reach.
TEST(HostPortTest, RefusesWhatIsNotHostAndPortSayingWhy) {
  for (const Bad& b : {
           Bad{"", "no port"},
           Bad{"localhost", "no port"},
           Bad{"7610", "no port"},
           Bad{":80", "no host"},
           Bad{"host:", "the port \"\" is not a number"},
           Bad{"host:8a", "the port \"8a\" is not a number"},
           Bad{"host:-1", "the port \"-1\" is not a number"},
           Bad{"host:+80", "the port \"+80\" is not a number"},
           Bad{"host: 80", "the port \" 80\" is not a number"},
           Bad{"host:2379/", "the port \"2379/\" is not a number"},
           Bad{"host:65536", "the port must be at most 65535"},
           Bad{"1.2.3.4:99999", "the port must be at most 65535"},
           Bad{"host:123456", "the port must be at most 65535"},
           Bad{"a b:80", "the host has the character ' '"},
           Bad{"a/b:80", "the host has the character '/'"},
           Bad{"user@host:80", "the host has the character '@'"},
           Bad{"http://127.0.0.1:2379", "give the host and port without a scheme"},
           Bad{"::1:2379", "an IPv6 address goes in brackets"},
           Bad{"::1", "an IPv6 address goes in brackets"},
           Bad{"[::1", "an IPv6 address without its closing ']'"},
           Bad{"[::1:2379", "an IPv6 address without its closing ']'"},
           Bad{"[::1]", "no port after the ']'"},
           Bad{"[::1]2379", "no port after the ']'"},
           Bad{"[::1]x:80", "no port after the ']'"},
           Bad{"[::1]:", "the port \"\" is not a number"},
           Bad{"[]:80", "the address in brackets is not an IPv6 address"},
           Bad{"[10.0.0.1]:80", "the address in brackets is not an IPv6 address"},
           Bad{"[::g]:80", "the IPv6 address has the character 'g'"},
           Bad{"[fe80::1%]:80", "an empty IPv6 zone after '%'"},
           Bad{"[fe80::1%a/b]:80", "the IPv6 zone has the character '/'"},
       }) {
    SCOPED_TRACE(std::string(b.text));
    Result<HostPort> connect = parse_host_port(b.text, HostPortUse::kConnect);
    ASSERT_FALSE(connect.ok());
    EXPECT_EQ(connect.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(connect.status().message(),
              "\"" + std::string(b.text) + "\" is not HOST:PORT (" + std::string(b.why) + ")")
        << b.text;
    Result<HostPort> listen = parse_host_port(b.text, HostPortUse::kListen);
    ASSERT_FALSE(listen.ok());
    EXPECT_EQ(listen.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(listen.status().message(), "\"" + std::string(b.text) + "\" is not host:port (" +
                                             std::string(b.why) +
                                             "; e.g. 127.0.0.1:7609, 0.0.0.0:7609, [::1]:7609)");
  }
}

// Outside bytes in the text stay one printable line in the message.
TEST(HostPortTest, QuotesTheTextInMessages) {
  Result<HostPort> r = parse_host_port("a\nb:80", HostPortUse::kConnect);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "\"a\\x0ab:80\" is not HOST:PORT (the host has the character '\\x0a')");
}

}  // namespace
}  // namespace flurry

// flurry's C++ client: the conformance suite (clients/conformance/cases.json; Conformance.*) and
// the behaviour against real servers under clients/conformance/fleet.py (Fleet.*).
#include "flurry/client.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "../src/client_internal.h"
#include "flurry/codec.h"
#include "flurry/layout.h"
#include "flurry/timefmt.h"

namespace flurry {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace ci = client_internal;

ClientOptions options(std::vector<std::string> endpoints,
                      const std::function<void(ClientOptions&)>& change = {}) {
  ClientOptions o;
  o.endpoints = std::move(endpoints);
  if (change) change(o);
  return o;
}

json cases() {
  const char* path = std::getenv("FLURRY_CONFORMANCE_CASES");
  std::ifstream in(path ? path : FLURRY_CASES_JSON);
  return json::parse(in);
}

TEST(Conformance, DecodeVectors) {
  const json all = cases();
  int checked = 0;
  for (const json& l : all["layouts"]) {
    Result<Layout> layout = Layout::parse(l["layout"]["text"].get<std::string>());
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    const bool has_clock = l["layout"]["clock_generations"].get<int>() > 1;
    for (const json& v : l["decode"]) {
      SCOPED_TRACE(l["name"].get<std::string>() + " " + v["id"].get<std::string>());
      Result<DecodedId> d = decode_id(*layout, v["id"].get<std::string>(), Encoding::kDecimal);
      ASSERT_TRUE(d.ok()) << d.status().to_string();
      const json& e = v["expect"];
      EXPECT_EQ(format_time(d->time), e["time"].get<std::string>());
      EXPECT_EQ(d->unix_ms, e["unix_ms"].get<std::int64_t>());
      EXPECT_EQ(d->parts.ticks, e["ticks"].get<std::uint64_t>());
      EXPECT_EQ(d->parts.node, e["node"].get<std::uint64_t>());
      EXPECT_EQ(d->parts.seq, e["seq"].get<std::uint64_t>());
      EXPECT_EQ(d->has_clock, e.contains("clock"));
      EXPECT_EQ(d->has_clock, has_clock);
      if (e.contains("clock")) {
        EXPECT_EQ(d->parts.clock, e["clock"].get<std::uint64_t>());
      }
      ASSERT_EQ(d->fields.size(), e["fields"].size());
      for (std::size_t i = 0; i < d->fields.size(); ++i) {
        EXPECT_EQ(d->fields[i].name, e["fields"][i]["name"].get<std::string>());
        EXPECT_EQ(d->fields[i].value, e["fields"][i]["value"].get<std::uint64_t>());
      }
      ++checked;
    }
    for (const json& bad : l["decode_errors"]) {
      Result<DecodedId> d = decode_id(*layout, bad.get<std::string>(), Encoding::kDecimal);
      ASSERT_FALSE(d.ok()) << bad;
      EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(Conformance, Errors) {
  const json all = cases();
  for (const json& c : all["errors"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::optional<std::string> header;
    if (c["retry_after_header"].is_string()) header = c["retry_after_header"].get<std::string>();
    const std::string body = c["body"].is_string() ? c["body"].get<std::string>() : "refused";
    const ci::Answer a = ci::classify(c["status"].get<int>(), header, body, "http://h:1");
    const json& e = c["expect"];
    EXPECT_EQ(a.error.code, e["code"].get<std::string>());
    EXPECT_EQ(to_string(a.error.status.code()), e["code"].get<std::string>());
    EXPECT_EQ(a.error.reason, e["reason"].get<std::string>());
    if (!e["reason"].get<std::string>().empty()) {
      EXPECT_EQ(to_string(a.error.status.reason()), e["reason"].get<std::string>());
    }
    if (e.contains("message")) {
      EXPECT_EQ(a.error.message, e["message"].get<std::string>());
    }
    if (e.contains("message_prefix")) {
      EXPECT_TRUE(a.error.message.starts_with(e["message_prefix"].get<std::string>()))
          << a.error.message;
    }
    if (e["retry_after"].is_null()) {
      EXPECT_FALSE(a.error.retry_after.has_value());
    } else {
      EXPECT_EQ(a.error.retry_after, e["retry_after"].get<int>());
    }
    EXPECT_EQ(ci::to_string(a.action), e["action"].get<std::string>());
    EXPECT_EQ(a.error.http_status, c["status"].get<int>());
  }
}

TEST(Conformance, RetryWaits) {
  const json all = cases();
  for (const json& c : all["retry_waits"]) {
    const int retry_after = c["retry_after"].is_null() ? 0 : c["retry_after"].get<int>();
    EXPECT_NEAR(ci::retry_wait_seconds(c["round"].get<int>(), retry_after, c["u"].get<double>()),
                c["wait"].get<double>(), 1e-9)
        << c.dump();
  }
}

TEST(Conformance, TsoAnswersAndLocations) {
  const json all = cases();
  for (const json& c : all["tso"]["grants"]) {
    ClientResult<std::uint64_t> got = ci::parse_tso_grant(
        c["body"].get<std::string>(), c["count"].get<std::uint64_t>(), "http://h:1");
    if (c["expect"].contains("first")) {
      ASSERT_TRUE(got.ok()) << c.dump() << got.status().to_string();
      EXPECT_EQ(std::to_string(*got), c["expect"]["first"].get<std::string>()) << c.dump();
    } else {
      ASSERT_FALSE(got.ok()) << c.dump();
      EXPECT_EQ(got.error().code, c["expect"]["code"].get<std::string>()) << c.dump();
    }
  }
  for (const json& c : all["tso"]["leaders"]) {
    const std::optional<ci::Endpoint> leader = ci::tso_leader_of(c["location"].get<std::string>());
    if (c["leader"].is_null()) {
      EXPECT_FALSE(leader) << c.dump();
    } else {
      ASSERT_TRUE(leader) << c.dump();
      EXPECT_EQ(leader->url, c["leader"].get<std::string>()) << c.dump();
    }
  }
}

TEST(Conformance, BatchSizes) {
  const json all = cases();
  for (const json& c : all["batch_sizes"]) {
    ci::BatchSizer sizer(c["min_batch"].get<std::uint32_t>(), c["max_batch"].get<std::uint32_t>(),
                         c["server_max_batch"].get<std::uint32_t>());
    std::vector<std::uint32_t> sizes;
    for (const json& e : c["events"]) {
      const std::string event = e.get<std::string>();
      sizes.push_back(event == "first" ? sizer.first()
                      : event == "low" ? sizer.low()
                                       : sizer.expired());
    }
    EXPECT_EQ(json(sizes), c["expect"]) << c.dump();
  }
}

// The refill's parser reads 16 digits as two 8-byte words: every length and the edges around it.
TEST(Unit, TextIdsParse) {
  std::vector<std::uint64_t> ids;
  std::string text;
  std::vector<std::uint64_t> want;
  std::uint64_t v = 0;
  for (int digits = 1; digits <= 19; ++digits) {
    v = v * 10 + static_cast<std::uint64_t>(digits % 10);  // 1, 12, ..., 1234567890123456789
    for (const std::uint64_t id : {v, v - 1, v + 1}) {
      text += std::to_string(id) + (id % 2 ? "\r\n" : "\n");
      want.push_back(id);
    }
  }
  text += "18446744073709551615\n\n0";  // the largest, an empty line, no final LF
  want.push_back(18446744073709551615u);
  want.push_back(0);
  ASSERT_TRUE(ci::parse_text_ids(text, ids));
  EXPECT_EQ(ids, want);
  ASSERT_TRUE(ci::parse_text_ids("", ids));
  EXPECT_TRUE(ids.empty());
  for (const char* bad : {"18446744073709551616\n", "99999999999999999999\n", "1234567812345678x\n",
                          "12345678a2345678\n", "1 2\n", "-1\n", "{\"error\":{}}",
                          "123456781234567/\n", "12345678123456:8\n"}) {
    EXPECT_FALSE(ci::parse_text_ids(bad, ids)) << bad;
  }
}

TEST(Unit, SettingsValidation) {
  const auto refused = [](ClientOptions o, std::string_view setting) {
    ClientResult<std::unique_ptr<Client>> c = Client::open(std::move(o));
    ASSERT_FALSE(c.ok()) << setting;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(c.status().message().starts_with(setting)) << c.status().message();
  };
  const ClientOptions good = options(std::vector<std::string>{"http://127.0.0.1:7609"});
  EXPECT_TRUE(Client::open(good).ok());
  refused(ClientOptions{}, "endpoints");
  refused(options(std::vector<std::string>{"ftp://127.0.0.1:1"}), "endpoints");
  refused(options(std::vector<std::string>{"http://127.0.0.1"}), "endpoints");
  ClientOptions o = good;
  o.min_batch = 10;
  o.max_batch = 5;
  refused(o, "min_batch");
  o = good;
  o.low_water = 1;
  refused(o, "low_water");
  o = good;
  o.segment_prefetch = 0;
  refused(o, "segment_prefetch");
  o = good;
  o.max_age = 0s;
  refused(o, "max_age");
  o = good;
  o.timeout = -1s;
  refused(o, "timeout");
}

// A port nothing listens on: connections to it are refused at once.
int refused_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor(
      ioc, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

// The retry loop with a fake clock, sleep and jitter: connection errors are retried over both
// endpoints with the contract's waits (u = 0.5) until the next wait would pass the deadline, and
// the call then raises the last error at once, without sleeping for real.
TEST(Unit, RetryRoundsWaitByTheFormulaAndStopBeforeTheDeadline) {
  const std::string a = "http://127.0.0.1:" + std::to_string(refused_port());
  const std::string b = "http://127.0.0.1:" + std::to_string(refused_port());
  auto client = Client::open(options({a, b})).value();
  auto now = std::chrono::steady_clock::now();
  std::vector<double> waits;
  ClientTestAccess::set_hooks(*client,
                              {
                                  .now = [&now] { return now; },
                                  .sleep =
                                      [&](std::chrono::steady_clock::duration d) {
                                        waits.push_back(std::chrono::duration<double>(d).count());
                                        now += d;
                                      },
                                  .random = [] { return 0.5; },
                              });
  const auto start = std::chrono::steady_clock::now();
  ClientResult<std::string> layout = client->layout_text();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);  // no real sleeping
  ASSERT_FALSE(layout.ok());
  EXPECT_EQ(layout.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(layout.error().code, "UNAVAILABLE");
  EXPECT_EQ(layout.error().http_status, 0);
  EXPECT_EQ(layout.error().endpoint, b);  // the last one tried
  // 0.11 + 0.22 + 0.44 + 0.88 + 1.76 = 3.41 s; the next, 3.52 s, would end after 5 s.
  const std::vector<double> expect = {0.11, 0.22, 0.44, 0.88, 1.76};
  ASSERT_EQ(waits.size(), expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(waits[i], expect[i], 1e-6);
}

// close(): every call fails at once with CANCELLED "the client is closed" (no reason, no HTTP
// status), also with the layout read and the handle taken before; a caller waiting for a refill
// when close() runs ends with the same error long before its deadline.
TEST(Unit, ClosedClientFailsEveryCallWithCancelled) {
  // A server that accepts connections (the kernel's backlog) and never answers.
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor silent(
      ioc, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  const std::string url = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port());
  auto client = Client::open(options({url}, [](ClientOptions& o) { o.timeout = 3s; })).value();
  Segment& orders = client->segment("orders");
  ClientResult<std::uint64_t> waiting = 0ULL;
  std::thread caller([&] { waiting = client->next(); });
  std::this_thread::sleep_for(300ms);  // the caller waits on the refill (the server is silent)
  const auto closing = std::chrono::steady_clock::now();
  std::thread closer([&] { client->close(); });
  caller.join();
  const auto waited = std::chrono::steady_clock::now() - closing;
  closer.join();
  ASSERT_FALSE(waiting.ok());
  EXPECT_EQ(waiting.status().code(), StatusCode::kCancelled) << waiting.status().to_string();
  EXPECT_LT(waited, 2500ms);  // woken by close(), not by its 3 s deadline
  const auto cancelled = [](const auto& r, std::string_view call) {
    ASSERT_FALSE(r.ok()) << call;
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << call;
    EXPECT_EQ(r.status().reason(), Reason::kNone) << call;
    EXPECT_EQ(r.error().code, "CANCELLED") << call;
    EXPECT_EQ(r.error().message, "the client is closed") << call;
    EXPECT_EQ(r.error().reason, "") << call;
    EXPECT_EQ(r.error().http_status, 0) << call;
  };
  const auto start = std::chrono::steady_clock::now();
  cancelled(client->next(), "next()");
  cancelled(client->next(5), "next(5)");
  cancelled(orders.next(), "orders.next()");
  cancelled(client->segment("other").next(), "segment(other).next()");
  cancelled(client->decode(std::uint64_t{1}), "decode(1)");
  cancelled(client->decode(std::string_view("1")), "decode(\"1\")");
  cancelled(client->decode_order("12345-67890-3"), "decode_order");
  cancelled(client->layout_text(), "layout_text()");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);  // no I/O, no wait
  client->close();                                          // idempotent
}

// The TLS settings are checked with the endpoints: only with https://, and a certificate with
// its key. (Files that do not exist are refused by the TLS test, which loads the module.)
TEST(Unit, TlsSettingsValidation) {
  const auto refused = [](ClientOptions o, std::string_view setting) {
    ClientResult<std::unique_ptr<Client>> c = Client::open(std::move(o));
    ASSERT_FALSE(c.ok()) << setting;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(c.error().message.starts_with(std::string(setting) + ":")) << c.error().message;
  };
  refused(options({"http://127.0.0.1:7609"}, [](ClientOptions& o) { o.ca_file = "ca.pem"; }),
          "ca_file");
  refused(options({"http://127.0.0.1:7609"}, [](ClientOptions& o) { o.key_file = "k.pem"; }),
          "key_file");
  refused(options({"https://127.0.0.1:7609"}, [](ClientOptions& o) { o.cert_file = "c.pem"; }),
          "key_file");
  refused(options({"https://127.0.0.1:7609"}, [](ClientOptions& o) { o.key_file = "k.pem"; }),
          "cert_file");
  refused(options({"https://127.0.0.1"}), "endpoints");
}

// The server's order-number answers made into DecodedOrder, and answers that do not fit refused
// with UNKNOWN quoting them (never a half-filled value).
TEST(Unit, DecodedOrderFromTheServersAnswer) {
  Result<DecodedOrder> snowflake = ci::parse_decoded_order(
      R"({"order_number":"1828-0955","key_version":"1","source":"snowflake",)"
      R"("id":"251753601578303488","node":3})");
  ASSERT_TRUE(snowflake.ok()) << snowflake.status().to_string();
  EXPECT_EQ(snowflake->order_number, "1828-0955");
  EXPECT_EQ(snowflake->key_version, "1");
  EXPECT_EQ(snowflake->source, DecodedOrder::Source::kSnowflake);
  EXPECT_EQ(snowflake->id, 251753601578303488u);
  EXPECT_FALSE(snowflake->tag.has_value());
  Result<DecodedOrder> segment = ci::parse_decoded_order(
      R"({"order_number":"77-1","key_version":"2","source":"segment","tag":"orders","id":"1001"})");
  ASSERT_TRUE(segment.ok()) << segment.status().to_string();
  EXPECT_EQ(segment->source, DecodedOrder::Source::kSegment);
  EXPECT_EQ(segment->id, 1001u);
  EXPECT_EQ(segment->tag, "orders");
  EXPECT_FALSE(segment->decoded.has_value());
  for (const char* bad :
       {"not json", "[]", R"({"source":"snowflake"})", R"({"source":"snowflake","id":1001})",
        R"({"source":"snowflake","id":"18446744073709551616"})",
        R"({"source":"snowflake","id":"12x"})", R"({"source":"other","id":"1"})",
        R"({"source":"segment","id":"1"})"}) {
    Result<DecodedOrder> r = ci::parse_decoded_order(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kUnknown) << bad;
    EXPECT_NE(r.status().message().find("GET /v1/order-numbers"), std::string::npos) << bad;
  }
  EXPECT_EQ(ci::order_decode_target("12 3/4", std::string("a&b")),
            "/v1/order-numbers/12%203%2F4?tag=a%26b");
}

// --- over TLS (clients/cpp/tests/tls_test.py starts the servers) ---------------------------

// Whether the process maps a library whose file name starts with `prefix`.
bool maps(const std::string& prefix) {
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);) {
    const std::size_t slash = line.rfind('/');
    if (slash != std::string::npos && line.compare(slash + 1, prefix.size(), prefix) == 0) {
      return true;
    }
  }
  return false;
}

// Run alone first: a client with http:// endpoints maps no OpenSSL and no TLS module.
TEST(Tls, PlainClientLoadsNoTls) {
  const char* plain = std::getenv("FLURRY_TLS_PLAIN_SERVER");
  if (plain == nullptr) GTEST_SKIP() << "run by clients/cpp/tests/tls_test.py";
  auto client = Client::open(options({plain})).value();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(client->next().ok());
  EXPECT_FALSE(maps("libssl")) << "a plain client mapped libssl";
  EXPECT_FALSE(maps("flurry_tls")) << "a plain client loaded the TLS module";
}

// IDs, a batch, a decode and the layout over https, verified against the test CA; a client
// that does not trust the server's CA gets UNAVAILABLE saying why, never an ID; a missing CA
// file is refused by open() naming the file.
TEST(Tls, IdsOverHttpsVerifiedAgainstTheCa) {
  const char* url = std::getenv("FLURRY_TLS_SERVER");
  if (url == nullptr) GTEST_SKIP() << "run by clients/cpp/tests/tls_test.py";
  const std::string certs = std::getenv("FLURRY_TLS_CERTS");
  auto client = Client::open(options({url}, [&](ClientOptions& o) {
                  o.ca_file = certs + "/ca.pem";
                })).value();
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 100'000; ++i) {
    ClientResult<std::uint64_t> id = client->next();
    ASSERT_TRUE(id.ok()) << id.error().message;
    ids.push_back(*id);
  }
  EXPECT_TRUE(std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<>()) == ids.end());
  ClientResult<std::vector<std::uint64_t>> batch = client->next(100);
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  EXPECT_EQ(batch->size(), 100u);
  EXPECT_GT(batch->front(), ids.back());
  ClientResult<DecodedId> decoded = client->decode(ids.back());
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(decoded->id, ids.back());
  EXPECT_TRUE(maps("libssl"));

  auto distrusting = Client::open(options({url}, [&](ClientOptions& o) {
                       o.ca_file = certs + "/other-ca.pem";
                       o.timeout = 2s;
                     })).value();
  ClientResult<std::uint64_t> refused = distrusting->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.error().message;
  EXPECT_EQ(refused.error().http_status, 0);
  EXPECT_NE(refused.error().message.find("certificate verify failed"), std::string::npos)
      << refused.error().message;

  ClientResult<std::unique_ptr<Client>> missing = Client::open(
      options({url}, [&](ClientOptions& o) { o.ca_file = certs + "/no-such-ca.pem"; }));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.error().message.find("no-such-ca.pem"), std::string::npos)
      << missing.error().message;
}

// mTLS: a server that requires client certificates serves a client with one from its CA and
// refuses one without.
TEST(Tls, ClientCertificateForAServerThatRequiresOne) {
  const char* url = std::getenv("FLURRY_TLS_MTLS_SERVER");
  if (url == nullptr) GTEST_SKIP() << "run by clients/cpp/tests/tls_test.py";
  const std::string certs = std::getenv("FLURRY_TLS_CERTS");
  auto with = Client::open(options({url}, [&](ClientOptions& o) {
                o.ca_file = certs + "/ca.pem";
                o.cert_file = certs + "/client-flurry.pem";
                o.key_file = certs + "/client-flurry.key";
              })).value();
  ClientResult<std::uint64_t> id = with->next();
  ASSERT_TRUE(id.ok()) << id.error().message;
  auto without = Client::open(options({url}, [&](ClientOptions& o) {
                   o.ca_file = certs + "/ca.pem";
                   o.timeout = 2s;
                 })).value();
  ClientResult<std::uint64_t> refused = without->next();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.error().message;
  EXPECT_EQ(refused.error().http_status, 0);
}

// decode_order against a real server with an order-number key (tls_test.py issues the numbers):
// the snowflake variant with the local decode, the segment variant with its tag, the per-call
// token, and a mistyped number refused by the server.
TEST(Orders, DecodeOrderGivesTheTypedValue) {
  const char* url = std::getenv("FLURRY_TLS_PLAIN_SERVER");
  const char* cases = std::getenv("FLURRY_ORDER_CASES");
  if (url == nullptr || cases == nullptr) GTEST_SKIP() << "run by clients/cpp/tests/tls_test.py";
  const json c = json::parse(cases);
  const std::string token = std::getenv("FLURRY_ORDER_TOKEN");
  auto client = Client::open(options({url}, [&](ClientOptions& o) { o.token = token; })).value();

  const std::string code = c["snowflake"][0].get<std::string>();
  ClientResult<DecodedOrder> snowflake = client->decode_order(code);
  ASSERT_TRUE(snowflake.ok()) << snowflake.error().message;
  EXPECT_EQ(snowflake->source, DecodedOrder::Source::kSnowflake);
  EXPECT_EQ(std::to_string(snowflake->id), c["snowflake"][1].get<std::string>());
  EXPECT_EQ(snowflake->key_version, "1");
  EXPECT_FALSE(snowflake->order_number.empty());
  EXPECT_FALSE(snowflake->tag.has_value());
  ASSERT_TRUE(snowflake->decoded.has_value());
  ClientResult<DecodedId> local = client->decode(snowflake->id);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(snowflake->decoded->parts.node, local->parts.node);
  EXPECT_EQ(snowflake->decoded->unix_ms, local->unix_ms);

  // A client without a token, with the token for this call only.
  auto anonymous = Client::open(options({url})).value();
  ClientResult<DecodedOrder> segment = anonymous->decode_order(
      c["segment"][0].get<std::string>(), {.tag = std::string("orders"), .token = token});
  ASSERT_TRUE(segment.ok()) << segment.error().message;
  EXPECT_EQ(segment->source, DecodedOrder::Source::kSegment);
  EXPECT_EQ(std::to_string(segment->id), c["segment"][1].get<std::string>());
  EXPECT_EQ(segment->tag, "orders");
  EXPECT_FALSE(segment->decoded.has_value());
  ClientResult<DecodedOrder> refused = anonymous->decode_order(code);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().http_status, 401);

  std::string mistyped = code;
  mistyped.back() = mistyped.back() == '0' ? '1' : '0';
  ClientResult<DecodedOrder> bad = client->decode_order(mistyped);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.error().message;
  EXPECT_EQ(bad.error().http_status, 400);
}

// --- against the fleet ---------------------------------------------------------------------

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) out.push_back(part);
  return out;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  if (!v) throw std::runtime_error(std::string(name) + " is not set: run under fleet.py");
  return v;
}

// One plain request (a new connection each): the control API and /metrics.
std::string plain(const std::string& base, boost::beast::http::verb verb,
                  const std::string& target) {
  namespace beast = boost::beast;
  namespace http = beast::http;
  const std::string hostport = base.substr(std::string("http://").size());
  const auto colon = hostport.rfind(':');
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  stream.connect(resolver.resolve(hostport.substr(0, colon), hostport.substr(colon + 1)));
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, hostport);
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  return res.body();
}

json control(const std::string& target, bool post = true) {
  return json::parse(plain(env("FLURRY_TEST_CONTROL"),
                           post ? boost::beast::http::verb::post : boost::beast::http::verb::get,
                           target));
}

json stats(int i) {
  return control("/servers/" + std::to_string(i) + "/stats", false);
}

// flurry_http_requests_total{route="/v1/ids"...} on server i, codes matching `code` ("" = all).
double requests_total(int i, const std::string& code) {
  const std::string text =
      plain(split(env("FLURRY_TEST_SERVERS"))[i], boost::beast::http::verb::get, "/metrics");
  double sum = 0;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("flurry_http_requests_total{")) continue;
    if (line.find("route=\"/v1/ids\"") == std::string::npos) continue;
    if (!code.empty() && line.find("code=\"" + code + "\"") == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

class Fleet : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoints_ = split(env("FLURRY_TEST_ENDPOINTS"));
    for (int i = 0; i < 2; ++i) restore(i);
  }
  void TearDown() override {
    for (int i = 0; i < 2; ++i) restore(i);
  }
  static void restore(int i) {
    const std::string s = "/servers/" + std::to_string(i);
    control(s + "/start");
    control(s + "/fault?status=503&count=0");
    control(s + "/delay?ms=0&count=0");
    control(s + "/reset");
  }
  std::unique_ptr<Client> open(ClientOptions o) {
    ClientResult<std::unique_ptr<Client>> c = Client::open(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }
  std::vector<std::string> endpoints_;
};

TEST_F(Fleet, MillionIdsFrom32CallersDistinctAndFewRequests) {
  const double before = requests_total(0, "200");
  auto client = open(options(std::vector<std::string>{endpoints_[0]}));
  constexpr int kCallers = 32;
  constexpr int kEach = 1'000'000 / kCallers;
  std::vector<std::vector<std::uint64_t>> got(kCallers);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::mutex failure_mu;
  std::string failure;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      got[t].reserve(kEach);
      for (int i = 0; i < kEach; ++i) {
        ClientResult<std::uint64_t> id = client->next();
        if (!id.ok()) {
          ++failures;
          std::lock_guard lock(failure_mu);
          failure = id.error().message;
          return;
        }
        got[t].push_back(*id);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0) << failure;
  std::vector<std::uint64_t> all;
  for (const auto& ids : got) {
    EXPECT_TRUE(std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<>()) == ids.end());
    all.insert(all.end(), ids.begin(), ids.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all.size(), std::size_t{kEach} * kCallers);
  EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "an ID twice";
  EXPECT_LE(stats(0)["ids"]["max_in_flight"].get<int>(), 1);
  const double grew = requests_total(0, "200") - before;
  EXPECT_LE(grew, 100);
  EXPECT_GT(grew, 0);
}

// What max_age really promises about an ID's time: at most max_age older than the wall clock when
// the client hands it out, measured from when the batch was requested, where the time is the one
// the server stamped it with. The server stamps IDs by CLOCK_REALTIME_COARSE, which lags the wall
// clock by one of its ticks (clock_getres: 4 ms here, 10 ms on HZ=100 kernels) while ticks come on
// time, and by a second one when a tick comes late (a loaded 2-core VM: the test failed by 1-2 ms
// on a one-tick bound with other tests beside it); both sides truncate to whole milliseconds (1 ms
// more).
std::int64_t max_age_slack_ms() {
  timespec res{};
  if (::clock_getres(CLOCK_REALTIME_COARSE, &res) != 0) return 21;
  const std::int64_t tick_ns = std::int64_t{res.tv_sec} * 1000000000 + res.tv_nsec;
  return 2 * ((tick_ns + 999999) / 1000000) + 1;
}

TEST_F(Fleet, MaxAgeNeverHandsOutOldIds) {
  auto client = open(options(std::vector<std::string>{endpoints_[0]},
                             [](ClientOptions& o) { o.max_age = 200ms; }));
  const auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const std::int64_t slack = max_age_slack_ms();
  for (int round = 0; round < 3; ++round) {
    const int requests_before = stats(0)["ids"]["requests"].get<int>();
    for (int i = 0; i < 10; ++i) {
      const auto now = wall_ms();
      ClientResult<std::uint64_t> id = client->next();
      ASSERT_TRUE(id.ok()) << id.status().to_string();
      ClientResult<DecodedId> d = client->decode(*id);
      ASSERT_TRUE(d.ok());
      EXPECT_GE(d->unix_ms, now - 200 - slack);
      if (i == 0) std::this_thread::sleep_for(400ms);  // the idle the test is about
    }
    EXPECT_GT(stats(0)["ids"]["requests"].get<int>(), requests_before);
  }
  // A slow steady taker (one ID per 5 ms for 0.6 s) crosses batches' expiry while they still
  // hold IDs: none handed out near the boundary is too old either.
  for (int i = 0; i < 120; ++i) {
    const auto now = wall_ms();
    ClientResult<std::uint64_t> id = client->next();
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    EXPECT_GE(client->decode(*id)->unix_ms, now - 200 - slack);
    std::this_thread::sleep_for(5ms);
  }
}

TEST_F(Fleet, RetryAfterIsHonouredAndTimeoutFailsFast) {
  control("/servers/0/fault?status=503&count=2&retry_after=1&reason=LEASE_EXPIRING");
  auto client = open(options(std::vector<std::string>{endpoints_[0]}));
  const auto start = std::chrono::steady_clock::now();
  ClientResult<std::uint64_t> id = client->next();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_GE(took, 2s);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(stats(0)["faulted"].get<int>(), 2);

  control("/servers/0/fault?status=503&count=2&retry_after=1&reason=LEASE_EXPIRING");
  auto quick = open(options(std::vector<std::string>{endpoints_[0]},
                            [](ClientOptions& o) { o.timeout = 500ms; }));
  const auto start2 = std::chrono::steady_clock::now();
  ClientResult<std::uint64_t> failed = quick->next();
  EXPECT_LT(std::chrono::steady_clock::now() - start2, 1s);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().reason(), Reason::kLeaseExpiring);
  EXPECT_EQ(failed.error().http_status, 503);
  EXPECT_EQ(failed.error().retry_after, 1);
  EXPECT_EQ(failed.error().endpoint, endpoints_[0]);
  EXPECT_EQ(failed.error().reason, "LEASE_EXPIRING");
}

TEST_F(Fleet, FourXxIsNeverRetried) {
  auto client = open(options(std::vector<std::string>{endpoints_[0]}));
  ClientResult<std::uint64_t> missing = client->segment("no-such-tag").next();
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.error().http_status, 404);
  EXPECT_EQ(stats(0)["segments"]["requests"].get<int>(), 1);

  control("/servers/0/fault?status=400&count=5&code=INVALID_ARGUMENT");
  ClientResult<std::vector<std::uint64_t>> bad = client->next(10);  // the layout was read above
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stats(0)["ids"]["requests"].get<int>(), 1);
  EXPECT_EQ(stats(0)["faulted"].get<int>(), 1);
}

// decode_order sends the token: without one the server refuses it (401); with the admin token it
// gets past the check to the fleet's answer (501: no order keys configured). Neither is retried.
TEST_F(Fleet, DecodeOrderSendsTheToken) {
  auto anonymous = open(options({endpoints_[0]}));
  ClientResult<DecodedOrder> refused = anonymous->decode_order("12345-67890-3");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(refused.status().reason(), Reason::kTokenMissing);
  EXPECT_EQ(refused.error().http_status, 401);
  const std::string token = env("FLURRY_TEST_ADMIN_TOKEN");
  auto client = open(options({endpoints_[0]}, [&token](ClientOptions& o) { o.token = token; }));
  ClientResult<DecodedOrder> off = client->decode_order("12345-67890-3");
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(off.error().http_status, 501);
  EXPECT_EQ(stats(0)["other"].get<int>(), 2);
}

// 503 without Retry-After fails over: the next endpoint serves the call and the failing one is
// not asked again in it; with no other endpoint the call raises that answer at once.
TEST_F(Fleet, FailoverAnswerIsNotRetriedOnTheSameEndpoint) {
  control("/servers/0/fault?status=503&count=5&code=FAILED_PRECONDITION&reason=LEASE_LOST");
  auto alone = open(options({endpoints_[0]}));
  const auto start = std::chrono::steady_clock::now();
  ClientResult<std::uint64_t> refused = alone->next();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().reason(), Reason::kLeaseLost);
  EXPECT_EQ(refused.error().http_status, 503);
  EXPECT_FALSE(refused.error().retry_after.has_value());
  EXPECT_EQ(stats(0)["faulted"].get<int>(), 1);

  auto both = open(options(endpoints_));
  ClientResult<std::uint64_t> id = both->next();  // the refill fails over to server 1
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(stats(0)["faulted"].get<int>(), 2);  // once per call, never again within it
  const json ready = json::parse(
      plain(split(env("FLURRY_TEST_SERVERS"))[1], boost::beast::http::verb::get, "/readyz"));
  EXPECT_EQ(both->decode(*id)->parts.node, ready["node"].get<std::uint64_t>());
}

TEST_F(Fleet, FailoverWhenTheFirstServerIsKilled) {
  auto client = open(options(endpoints_));
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    ClientResult<std::uint64_t> id = client->next();
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(seen.insert(*id).second);
  }
  const std::uint64_t node0 = client->decode(*seen.begin())->parts.node;
  control("/servers/0/kill");
  bool other_node = false;
  for (int i = 0; i < 50'000; ++i) {
    ClientResult<std::uint64_t> id = client->next();
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    ASSERT_TRUE(seen.insert(*id).second) << "an ID twice";
    other_node = other_node || client->decode(*id)->parts.node != node0;
  }
  EXPECT_TRUE(other_node);
}

TEST_F(Fleet, KilledWhileARefillIsInFlight) {
  auto client = open(options(endpoints_));
  ASSERT_TRUE(client->layout_text().ok());  // the layout first: the delay is for the refill
  control("/servers/0/delay?ms=3000&count=1");
  std::thread killer([] {
    // Kill once the refill is held at the proxy.
    for (int i = 0; i < 200 && stats(0)["ids"]["in_flight"].get<int>() == 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    std::this_thread::sleep_for(300ms);
    control("/servers/0/kill");
  });
  const auto start = std::chrono::steady_clock::now();
  ClientResult<std::uint64_t> id = client->next();
  const auto took = std::chrono::steady_clock::now() - start;
  killer.join();
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_LT(took, 2500ms);
  ClientResult<DecodedId> d = client->decode(*id);
  ASSERT_TRUE(d.ok());
  const json ready = json::parse(
      plain(split(env("FLURRY_TEST_SERVERS"))[1], boost::beast::http::verb::get, "/readyz"));
  EXPECT_EQ(d->parts.node, ready["node"].get<std::uint64_t>());
}

TEST_F(Fleet, SegmentNumbersOnceEachInOrder) {
  auto client = open(options(std::vector<std::string>{endpoints_[0]},
                             [](ClientOptions& o) { o.segment_range = 100; }));
  Segment& orders = client->segment("orders");
  EXPECT_EQ(&orders, &client->segment("orders"));
  constexpr int kCallers = 8;
  std::vector<std::vector<std::uint64_t>> got(kCallers);
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000 / kCallers; ++i) {
        ClientResult<std::uint64_t> v = orders.next();
        if (!v.ok()) return;
        got[t].push_back(*v);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::uint64_t> all;
  for (const auto& v : got) {
    EXPECT_EQ(v.size(), std::size_t{5000 / kCallers});
    EXPECT_TRUE(std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end());
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end());
  const json s = stats(0)["segments"];
  EXPECT_GE(s["requests"].get<int>(), 50);
  EXPECT_LE(s["max_in_flight"].get<int>(), 1);
}

TEST_F(Fleet, DecodeEqualsTheServersAndSettingsAreChecked) {
  EXPECT_FALSE(Client::open(options(std::vector<std::string>{"http://127.0.0.1:0"})).ok());
  auto client = open(options(std::vector<std::string>{endpoints_[0]}));
  ClientResult<std::vector<std::uint64_t>> ids = client->next(20);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(ids->size(), 20u);
  EXPECT_TRUE(std::adjacent_find(ids->begin(), ids->end(), std::greater_equal<>()) == ids->end());
  for (std::uint64_t id : *ids) {
    const json server =
        json::parse(plain(split(env("FLURRY_TEST_SERVERS"))[0], boost::beast::http::verb::get,
                          "/v1/ids/" + std::to_string(id)));
    ClientResult<DecodedId> d = client->decode(id);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(format_time(d->time), server["time"].get<std::string>()) << server.dump();
    EXPECT_EQ(d->parts.node, server["node"].get<std::uint64_t>()) << server.dump();
    EXPECT_EQ(d->parts.seq, server["seq"].get<std::uint64_t>()) << server.dump();
    EXPECT_EQ(d->parts.ticks, server["ticks"].get<std::uint64_t>()) << server.dump();
  }
  ClientResult<DecodedId> bad = client->decode("12x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

// --- fork (docs/clients.md, "Fork") ----------------------------------------------------------

// IDs and segment numbers one process took.
struct Taken {
  std::vector<std::uint64_t> ids;
  std::vector<std::uint64_t> numbers;
};

// Takes `ids` IDs and `numbers` numbers of tag "orders"; false (and `error`) on a failure.
bool take(Client& client, int ids, int numbers, Taken& out, std::string& error) {
  for (int i = 0; i < ids; ++i) {
    ClientResult<std::uint64_t> id = client.next();
    if (!id.ok()) {
      error = "next(): " + id.status().to_string();
      return false;
    }
    out.ids.push_back(*id);
  }
  Segment& orders = client.segment("orders");
  for (int i = 0; i < numbers; ++i) {
    ClientResult<std::uint64_t> v = orders.next();
    if (!v.ok()) {
      error = "orders.next(): " + v.status().to_string();
      return false;
    }
    out.numbers.push_back(*v);
  }
  return true;
}

// A forked child that takes numbers from `client` and writes them to a temporary file; only
// async-signal-safe-enough work and _exit in the child (no gtest assertion runs there).
class Child {
 public:
  Child(Client& client, int ids, int numbers) {
    char path[] = "/tmp/flurry-client-fork-XXXXXX";
    fd_ = mkstemp(path);
    if (fd_ < 0) throw std::runtime_error("mkstemp failed");
    unlink(path);
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      Taken t;
      std::string error;
      const bool ok = take(client, ids, numbers, t, error);
      std::string out;
      const auto put = [&out](const std::vector<std::uint64_t>& v) {
        const std::uint64_t n = v.size();
        out.append(reinterpret_cast<const char*>(&n), sizeof n);
        out.append(reinterpret_cast<const char*>(v.data()), n * sizeof(std::uint64_t));
      };
      put(t.ids);
      put(t.numbers);
      if (!ok) out += error;
      for (std::size_t done = 0; done < out.size();) {
        const ssize_t w = write(fd_, out.data() + done, out.size() - done);
        if (w <= 0) _exit(3);
        done += static_cast<std::size_t>(w);
      }
      _exit(ok ? 0 : 2);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(fd_);
  }

  // Waits for the child until `until` (a child still running then is killed and fails the
  // test: a deadlock on a lock it inherited) and reads what it took.
  Taken result(std::chrono::steady_clock::time_point until) {
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << "the forked child did not finish in time (a deadlock?)";
        return {};
      }
      std::this_thread::sleep_for(20ms);
    }
    reaped_ = true;
    std::string data;
    char buf[65536];
    for (ssize_t r; (r = pread(fd_, buf, sizeof buf, static_cast<off_t>(data.size()))) > 0;) {
      data.append(buf, static_cast<std::size_t>(r));
    }
    Taken t;
    std::size_t at = 0;
    const auto get = [&](std::vector<std::uint64_t>& v) {
      std::uint64_t n = 0;
      if (data.size() - at < sizeof n) return;
      std::memcpy(&n, data.data() + at, sizeof n);
      at += sizeof n;
      n = std::min<std::uint64_t>(n, (data.size() - at) / sizeof(std::uint64_t));
      v.resize(n);
      std::memcpy(v.data(), data.data() + at, n * sizeof(std::uint64_t));
      at += n * sizeof(std::uint64_t);
    };
    get(t.ids);
    get(t.numbers);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "the forked child failed (status " << status << "): " << data.substr(at);
    return t;
  }

 private:
  int fd_ = -1;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// How many numbers of `groups` appear more than once.
std::size_t duplicates(const std::vector<const std::vector<std::uint64_t>*>& groups) {
  std::vector<std::uint64_t> all;
  for (const auto* g : groups) all.insert(all.end(), g->begin(), g->end());
  std::sort(all.begin(), all.end());
  return static_cast<std::size_t>(all.end() - std::unique(all.begin(), all.end()));
}

// The live probe's case: the client holds IDs and a range of "orders", the process forks, parent
// and child each take 20,000 IDs and 3,000 numbers. max_age is long so that the copied buffer is
// still fresh in the child whatever the machine's load: the test is about the copy.
TEST_F(Fleet, ForkedChildNeverRepeatsTheParentsNumbers) {
  auto client = open(options(endpoints_, [](ClientOptions& o) { o.max_age = 60s; }));
  Taken mine;
  std::string error;
  ASSERT_TRUE(take(*client, 1, 1, mine, error)) << error;
  Child child(*client, 20'000, 3'000);
  ASSERT_TRUE(take(*client, 20'000, 3'000, mine, error)) << error;
  const Taken theirs = child.result(std::chrono::steady_clock::now() + 60s);
  EXPECT_EQ(theirs.ids.size(), 20'000u);
  EXPECT_EQ(theirs.numbers.size(), 3'000u);
  EXPECT_EQ(duplicates({&mine.ids, &theirs.ids}), 0u) << "IDs handed out by parent and child";
  EXPECT_EQ(duplicates({&mine.numbers, &theirs.numbers}), 0u) << "segment numbers twice";
}

// Forks 16 times, 100 ms apart, while 2 other threads take IDs and 2 take segment numbers as fast
// as they can (so a fork can find a client lock held, a batch being installed, a range being
// fetched), the first forks while a refill is held 1.5 s at the proxy. Every child must finish (no
// inherited lock left held, no wait for the parent's refill) and no number may appear twice
// across all the processes.
TEST_F(Fleet, ForkWhileOtherThreadsUseTheClient) {
  auto client = open(options({endpoints_[0]}, [](ClientOptions& o) {
    o.max_age = 60s;
    o.segment_range = 100;
    o.timeout = 10s;
  }));
  Taken first;
  std::string error;
  ASSERT_TRUE(take(*client, 1, 1, first, error)) << error;
  control("/servers/0/delay?ms=1500&count=1");
  std::atomic<bool> stop{false};
  std::vector<Taken> busy(4);
  std::vector<std::string> errors(busy.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < busy.size(); ++t) {
    threads.emplace_back([&, t] {
      const bool ids = t % 2 == 0;
      while (!stop.load() && take(*client, ids ? 50 : 0, ids ? 0 : 5, busy[t], errors[t])) {
      }
    });
  }
  for (int i = 0; i < 200 && stats(0)["ids"]["in_flight"].get<int>() == 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  std::vector<std::unique_ptr<Child>> children;
  for (int k = 0; k < 16; ++k) {
    children.push_back(std::make_unique<Child>(*client, 5'000, 500));
    std::this_thread::sleep_for(100ms);
  }
  std::vector<Taken> theirs;
  const auto until = std::chrono::steady_clock::now() + 60s;
  for (auto& child : children) theirs.push_back(child->result(until));
  stop = true;
  for (auto& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  std::vector<const std::vector<std::uint64_t>*> ids{&first.ids}, numbers{&first.numbers};
  std::size_t parent_ids = 0, parent_numbers = 0;
  for (const Taken& t : busy) {
    ids.push_back(&t.ids);
    numbers.push_back(&t.numbers);
    parent_ids += t.ids.size();
    parent_numbers += t.numbers.size();
  }
  for (const Taken& t : theirs) {
    EXPECT_EQ(t.ids.size(), 5'000u);
    EXPECT_EQ(t.numbers.size(), 500u);
    ids.push_back(&t.ids);
    numbers.push_back(&t.numbers);
  }
  EXPECT_GT(parent_ids, 0u);
  EXPECT_GT(parent_numbers, 0u);
  EXPECT_EQ(duplicates(ids), 0u) << "IDs handed out twice across the processes";
  EXPECT_EQ(duplicates(numbers), 0u) << "segment numbers handed out twice";
}

// ---- tso(): the fleet's servers run with --tso (two servers sharing one SQLite registry, so one
// leads the timestamp oracle and the other redirects to it; docs/clients.md, "Timestamps").

// The index of the server that leads the timestamp oracle (its GET /readyz/tso answers 200),
// waiting up to 30 s for one to lead.
int tso_leader() {
  namespace http = boost::beast::http;
  const std::vector<std::string> servers = split(env("FLURRY_TEST_SERVERS"));
  const auto end = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < end) {
    for (std::size_t i = 0; i < servers.size(); ++i) {
      try {
        const std::string hostport = servers[i].substr(std::string("http://").size());
        const auto colon = hostport.rfind(':');
        boost::asio::io_context ioc;
        boost::asio::ip::tcp::resolver resolver(ioc);
        boost::beast::tcp_stream stream(ioc);
        stream.connect(resolver.resolve(hostport.substr(0, colon), hostport.substr(colon + 1)));
        http::request<http::string_body> req{http::verb::get, "/readyz/tso", 11};
        req.set(http::field::host, hostport);
        http::write(stream, req);
        boost::beast::flat_buffer buffer;
        http::response<http::string_body> res;
        http::read(stream, buffer, res);
        if (res.result_int() == 200) return static_cast<int>(i);
      } catch (const std::exception&) {
        // not up
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "no server leads the timestamp oracle after 30 s";
  return 0;
}

// `callers` threads take `each` timestamps each from `client`; each caller's values in order.
std::vector<std::vector<std::uint64_t>> tso_concurrently(Client& client, int callers, int each) {
  std::vector<std::vector<std::uint64_t>> got(callers);
  std::vector<std::thread> threads;
  std::mutex failure_mu;
  std::string failure;
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < each; ++i) {
        ClientResult<std::uint64_t> v = client.tso();
        if (!v.ok()) {
          std::lock_guard lock(failure_mu);
          failure = v.status().to_string();
          return;
        }
        got[t].push_back(*v);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failure, "");
  return got;
}

bool strictly_increasing(const std::vector<std::uint64_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), std::greater_equal<>()) == v.end();
}

TEST_F(Fleet, TsoSequentialCallsIncreaseWithinAndAcrossClients) {
  tso_leader();  // a test before may have killed the leader: wait out the election
  std::vector<std::uint64_t> values;
  {
    auto client = open(options(endpoints_));
    for (int i = 0; i < 500; ++i) {
      ClientResult<std::uint64_t> v = client->tso();
      ASSERT_TRUE(v.ok()) << v.status().to_string();
      values.push_back(*v);
    }
  }
  // A call that begins after another ended gets a larger value, whichever client made it.
  auto a = open(options({endpoints_[0]}));
  auto b = open(options({endpoints_[1]}));
  for (int i = 0; i < 50; ++i) {
    for (Client* c : {a.get(), b.get()}) {
      ClientResult<std::uint64_t> v = c->tso();
      ASSERT_TRUE(v.ok()) << v.status().to_string();
      values.push_back(*v);
    }
  }
  EXPECT_TRUE(strictly_increasing(values));
}

TEST_F(Fleet, TsoConcurrentCallersShareRequests) {
  const int leader = tso_leader();
  // Only the leader's proxy: every request passes it and is counted, none is redirected.
  auto client = open(options({endpoints_[leader]}));
  constexpr int kCallers = 32;
  constexpr int kEach = 500;
  const auto got = tso_concurrently(*client, kCallers, kEach);
  std::vector<std::uint64_t> all;
  for (const auto& v : got) {
    EXPECT_TRUE(strictly_increasing(v)) << "a caller's timestamps must strictly increase";
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all.size(), std::size_t{kCallers} * kEach);
  EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end()) << "a timestamp twice";
  const json s = stats(leader)["tso"];
  EXPECT_EQ(s["max_in_flight"].get<int>(), 1);
  EXPECT_LE(s["requests"].get<int>() * 2, kCallers * kEach) << "callers did not share requests";
}

// While one request is held at the proxy, 8 more callers arrive: none takes from the held request
// (sent before they called); the next request carries all 8 (count 8).
TEST_F(Fleet, TsoCallersArrivingDuringARequestShareTheNext) {
  const int leader = tso_leader();
  auto client = open(options({endpoints_[leader]}));
  ASSERT_TRUE(client->tso().ok());
  const std::string s = "/servers/" + std::to_string(leader);
  control(s + "/reset");
  control(s + "/delay?ms=1000&count=1");
  std::optional<ClientResult<std::uint64_t>> held;
  std::thread holder([&] { held.emplace(client->tso()); });
  std::this_thread::sleep_for(200ms);  // the held request is at the proxy now
  const auto late = tso_concurrently(*client, 8, 1);
  holder.join();
  ASSERT_TRUE(held && held->ok()) << (held ? held->status().to_string() : "no answer");
  EXPECT_EQ(stats(leader)["tso"]["requests"].get<int>(), 2)
      << "the held request, then one for the 8 callers";
  std::vector<std::uint64_t> v;
  for (const auto& one : late) v.insert(v.end(), one.begin(), one.end());
  std::sort(v.begin(), v.end());
  ASSERT_EQ(v.size(), 8u);
  EXPECT_TRUE(std::adjacent_find(v.begin(), v.end()) == v.end());
  EXPECT_GT(v.front(), **held) << "no late caller takes from the held request";
  EXPECT_EQ(v.back() - v.front(), 7u) << "one grant of 8 consecutive values";
}

TEST_F(Fleet, TsoFollowsTheRedirectAndKeepsTheLeader) {
  const int follower = 1 - tso_leader();
  auto client = open(options({endpoints_[follower]}));
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 100; ++i) {
    ClientResult<std::uint64_t> v = client->tso();
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    values.push_back(*v);
  }
  EXPECT_TRUE(strictly_increasing(values));
  EXPECT_EQ(stats(follower)["tso"]["requests"].get<int>(), 1)
      << "only the first request reached the follower";
}

TEST_F(Fleet, TsoAfterTheLeaderDiesGoesBackToTheEndpoints) {
  const int leader = tso_leader();
  const int follower = 1 - leader;
  auto client = open(options({endpoints_[follower]}, [](ClientOptions& o) { o.timeout = 60s; }));
  ClientResult<std::uint64_t> before = client->tso();  // redirected: the leader is asked next
  ASSERT_TRUE(before.ok()) << before.status().to_string();
  control("/servers/" + std::to_string(leader) + "/kill");
  ClientResult<std::uint64_t> after = client->tso();  // the dead leader refuses: the follower
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  EXPECT_GT(*after, *before);
  EXPECT_EQ(tso_leader(), follower);
}

}  // namespace
}  // namespace flurry

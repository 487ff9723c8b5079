// The etcd registry's client without a server: base64, endpoints and cluster names, the JSON
// bodies it sends, and the parsers of the gateway's answers, fed the answers etcd 3.4's gateway
// gives (int64 as strings, default values left out, a keep-alive stream, error bodies).
#include "registry/etcd_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/quote.h"
#include "flurry/open_registry.h"

namespace flurry::internal {
namespace {

TEST(Base64Test, KnownVectors) {
  // RFC 4648, section 10.
  const std::pair<std::string_view, std::string_view> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
  };
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(base64_encode(plain), encoded) << plain;
    Result<std::string> decoded = base64_decode(encoded);
    ASSERT_TRUE(decoded.ok()) << encoded << ": " << decoded.status().to_string();
    EXPECT_EQ(*decoded, plain);
  }
  EXPECT_EQ(base64_encode("/flurry/t/nodes/0"), "L2ZsdXJyeS90L25vZGVzLzA=");
}

TEST(Base64Test, EveryByteValueRoundTrips) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t len = 0; len <= all.size(); len += 37) {
    const std::string bytes = all.substr(0, len) + all.substr(256 - len % 3);
    Result<std::string> back = base64_decode(base64_encode(bytes));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, bytes);
  }
  EXPECT_EQ(base64_encode("\xff\xfe\xfd"), "//79");
  EXPECT_EQ(base64_encode(std::string("\0\0", 2)), "AAA=");
}

TEST(Base64Test, MalformedTextIsRefused) {
  for (std::string_view bad : {"Zg", "Zg=", "Zm9", "Z===", "====", "Zm9v====", "Zm=v", "Zm9v\n",
                               "Zm 9v", "Zm9-", "Zm9_", "Zh==", "Zm9=", "Zg==Zg==", "=Zg="}) {
    Result<std::string> r = base64_decode(bad);
    EXPECT_FALSE(r.ok()) << quote(bad) << " decoded to " << (r.ok() ? *r : "");
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

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

TEST(EtcdKeysTest, PrefixEndIsTheNextKeyAfterThePrefix) {
  EXPECT_EQ(etcd_prefix_end("/flurry/t/nodes/"), "/flurry/t/nodes0");
  EXPECT_EQ(etcd_prefix_end("a"), "b");
  EXPECT_EQ(etcd_prefix_end("a\xff"), "b");
  EXPECT_EQ(etcd_prefix_end("\xff\xff"), std::string(1, '\0'));
}

TEST(HttpDateTest, ParsesImfFixdate) {
  EXPECT_EQ(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777000);
  EXPECT_EQ(parse_http_date("Mon, 23 Nov 2026 15:46:52 GMT"), 1795448812000);
  for (std::string_view bad : {"", "Sun, 06 Nov 1994 08:49:37 UTC",
                               "Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Xyz 1994 08:49:37 GMT",
                               "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT"}) {
    EXPECT_FALSE(parse_http_date(bad).has_value()) << bad;
  }
}

TEST(EtcdRequestTest, TxnBodyCarriesComparesAndBothBranches) {
  EtcdTxn txn;
  txn.compare = {EtcdCompare::create_revision("/k", 0), EtcdCompare::lease("/k", 42),
                 EtcdCompare::value_equals("/layout", "L"), EtcdCompare::mod_revision("/k", 7)};
  txn.success = {EtcdOp::put("/k", "v", 42), EtcdOp::range("/h")};
  txn.failure = {EtcdOp::range("/a/", "/a0"), EtcdOp::remove("/k")};
  EXPECT_EQ(etcd_txn_body(txn),
            R"({"compare":[)"
            R"({"create_revision":"0","key":"L2s=","result":"EQUAL","target":"CREATE"},)"
            R"({"key":"L2s=","lease":"42","result":"EQUAL","target":"LEASE"},)"
            R"({"key":"L2xheW91dA==","result":"EQUAL","target":"VALUE","value":"TA=="},)"
            R"({"key":"L2s=","mod_revision":"7","result":"EQUAL","target":"MOD"}],)"
            R"("failure":[{"request_range":{"key":"L2Ev","range_end":"L2Ew"}},)"
            R"({"request_delete_range":{"key":"L2s="}}],)"
            R"("success":[{"request_put":{"key":"L2s=","lease":"42","value":"dg=="}},)"
            R"({"request_range":{"key":"L2g="}}]})");
  EXPECT_EQ(etcd_range_body("/a/", "/a0", true),
            R"({"key":"L2Ev","keys_only":true,"range_end":"L2Ew"})");
  EXPECT_EQ(etcd_range_body("/k", "", false), R"({"key":"L2s="})");
  EXPECT_EQ(etcd_lease_body(4111120194773048326), R"({"ID":"4111120194773048326"})");
}

// The header every answer of etcd 3.4.23 starts with.
constexpr std::string_view kHeader =
    R"("header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709",)"
    R"("revision":"2","raft_term":"2"})";

TEST(EtcdAnswerTest, RangeWithInt64AsStringsAndDefaultsLeftOut) {
  Result<EtcdRange> r = parse_etcd_range(
      "{" + std::string(kHeader) +
      R"(,"kvs":[{"key":"L2Evbi8w","create_revision":"2","mod_revision":"3","version":"2",)"
      R"("value":"dg==","lease":"4111120194773048330"},{"key":"L2Evbi8x","create_revision":"5",)"
      R"("mod_revision":"5","version":"1"}],"count":"2"})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->revision, 2);
  EXPECT_EQ(r->count, 2);
  EXPECT_FALSE(r->more);
  ASSERT_EQ(r->kvs.size(), 2u);
  EXPECT_EQ(r->kvs[0].key, "/a/n/0");
  EXPECT_EQ(r->kvs[0].value, "v");
  EXPECT_EQ(r->kvs[0].create_revision, 2);
  EXPECT_EQ(r->kvs[0].mod_revision, 3);
  EXPECT_EQ(r->kvs[0].version, 2);
  EXPECT_EQ(r->kvs[0].lease, 4111120194773048330);
  EXPECT_EQ(r->kvs[1].value, "");  // an empty value is left out
  EXPECT_EQ(r->kvs[1].lease, 0);   // no lease: left out

  // An empty range: no kvs, no count.
  Result<EtcdRange> empty = parse_etcd_range("{" + std::string(kHeader) + "}");
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_TRUE(empty->kvs.empty());
  EXPECT_EQ(empty->count, 0);
  // Numbers as JSON numbers are read too.
  Result<EtcdRange> numbers = parse_etcd_range(R"({"header":{"revision":9},"count":1,"more":true,)"
                                               R"("kvs":[{"key":"eA==","create_revision":4}]})");
  ASSERT_TRUE(numbers.ok()) << numbers.status().to_string();
  EXPECT_EQ(numbers->revision, 9);
  EXPECT_TRUE(numbers->more);
  EXPECT_EQ(numbers->kvs[0].create_revision, 4);
}

TEST(EtcdAnswerTest, MalformedRangesAreRefusedSayingWhat) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "not JSON"},
      {"[]", "not a JSON object"},
      {"{\"header\":{\"revision\":\"x\"}}", "revision"},
      {"{\"header\":[]}", "header"},
      {"{\"kvs\":{}}", "kvs"},
      {"{\"kvs\":[{\"key\":\"!!!!\"}]}", "key"},
      {"{\"kvs\":[{\"value\":\"dg==\"}]}", "without a key"},
      {"{\"kvs\":[{\"key\":\"eA==\",\"lease\":\"1.5\"}]}", "lease"},
      {"{\"count\":\"99999999999999999999\"}", "count"},
      {"{\"more\":\"yes\"}", "more"},
  };
  for (const auto& [body, what] : cases) {
    Result<EtcdRange> r = parse_etcd_range(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(r.status().message().find(what), std::string::npos)
        << body << ": " << r.status().message();
  }
}

TEST(EtcdAnswerTest, TxnSucceededAndFailed) {
  Result<EtcdTxnResult> ok = parse_etcd_txn(
      "{" + std::string(kHeader) +
      R"(,"succeeded":true,"responses":[{"response_put":{"header":{"revision":"2"}}},)"
      R"({"response_range":{"header":{"revision":"2"},"kvs":[{"key":"eA==","value":"eQ==",)"
      R"("create_revision":"1","mod_revision":"1","version":"1"}],"count":"1"}},)"
      R"({"response_delete_range":{"header":{"revision":"2"},"deleted":"1"}}]})");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_TRUE(ok->succeeded);
  EXPECT_EQ(ok->revision, 2);
  ASSERT_EQ(ok->responses.size(), 3u);
  EXPECT_EQ(ok->responses[0].kind, EtcdOp::Kind::kPut);
  EXPECT_EQ(ok->responses[1].kind, EtcdOp::Kind::kRange);
  ASSERT_EQ(ok->responses[1].range.kvs.size(), 1u);
  EXPECT_EQ(ok->responses[1].range.kvs[0].value, "y");
  EXPECT_EQ(ok->responses[2].kind, EtcdOp::Kind::kDelete);
  EXPECT_EQ(ok->responses[2].deleted, 1);

  // A failed txn has no "succeeded"; an empty range inside it is an empty object but its header.
  Result<EtcdTxnResult> failed =
      parse_etcd_txn("{" + std::string(kHeader) +
                     R"(,"responses":[{"response_range":{"header":{"revision":"2"}}}]})");
  ASSERT_TRUE(failed.ok()) << failed.status().to_string();
  EXPECT_FALSE(failed->succeeded);
  ASSERT_EQ(failed->responses.size(), 1u);
  EXPECT_TRUE(failed->responses[0].range.kvs.empty());
  // A failed txn without failure operations has no responses either.
  Result<EtcdTxnResult> bare = parse_etcd_txn("{" + std::string(kHeader) + "}");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->succeeded);
  EXPECT_TRUE(bare->responses.empty());

  for (std::string_view bad :
       {R"({"succeeded":1})", R"({"responses":{}})", R"({"responses":[{"response_txn":{}}]})",
        R"({"responses":[{"response_put":{},"response_range":{}}]})",
        R"({"responses":[{"response_range":[]}]})"}) {
    EXPECT_FALSE(parse_etcd_txn(bad).ok()) << bad;
  }
}

TEST(EtcdAnswerTest, LeaseAnswers) {
  Result<EtcdLeaseGrant> grant =
      parse_etcd_grant("{" + std::string(kHeader) + R"(,"ID":"4111120194773048326","TTL":"2"})");
  ASSERT_TRUE(grant.ok()) << grant.status().to_string();
  EXPECT_EQ(grant->id, 4111120194773048326);
  EXPECT_EQ(grant->ttl_seconds, 2);
  EXPECT_FALSE(parse_etcd_grant("{" + std::string(kHeader) + R"(,"TTL":"2"})").ok());
  EXPECT_FALSE(parse_etcd_grant("{" + std::string(kHeader) + R"(,"ID":"5"})").ok());
  EXPECT_FALSE(parse_etcd_grant(R"({"ID":"5","TTL":"2","error":"lease exists"})").ok());

  // The keep-alive stream: one message per line, each {"result": ...}.
  Result<std::optional<std::int64_t>> alive =
      parse_etcd_keepalive(R"({"result":{)" + std::string(kHeader) +
                           R"(,"ID":"4111120194773048330","TTL":"2"}})"
                           "\n");
  ASSERT_TRUE(alive.ok()) << alive.status().to_string();
  ASSERT_TRUE(alive->has_value());
  EXPECT_EQ(**alive, 2);
  // An expired (or unknown) lease: 200 with the TTL left out.
  Result<std::optional<std::int64_t>> gone =
      parse_etcd_keepalive(R"({"result":{)" + std::string(kHeader) +
                           R"(,"ID":"4111120194773048330"}})"
                           "\n");
  ASSERT_TRUE(gone.ok()) << gone.status().to_string();
  EXPECT_FALSE(gone->has_value());
  EXPECT_FALSE(parse_etcd_keepalive(R"({"ID":"1","TTL":"2"})").ok());
  EXPECT_FALSE(parse_etcd_keepalive("").ok());

  Result<EtcdLeaseTtl> ttl = parse_etcd_time_to_live("{" + std::string(kHeader) +
                                                     R"(,"ID":"7","TTL":"1","grantedTTL":"2"})");
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_EQ(ttl->ttl_seconds, 1);
  EXPECT_EQ(ttl->granted_ttl_seconds, 2);
  Result<EtcdLeaseTtl> expired =
      parse_etcd_time_to_live("{" + std::string(kHeader) + R"(,"ID":"7","TTL":"-1"})");
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(expired->ttl_seconds, -1);
  Result<EtcdLeaseTtl> last_second =
      parse_etcd_time_to_live("{" + std::string(kHeader) + R"(,"ID":"7","grantedTTL":"2"})");
  ASSERT_TRUE(last_second.ok());
  EXPECT_EQ(last_second->ttl_seconds, 0);
}

TEST(EtcdAnswerTest, ErrorBodies) {
  std::optional<EtcdError> unary = parse_etcd_error(
      R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  ASSERT_TRUE(unary.has_value());
  EXPECT_EQ(unary->code, 5);
  EXPECT_EQ(unary->message, "etcdserver: requested lease not found");
  std::optional<EtcdError> stream = parse_etcd_error(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}})"
      "\n");
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ(stream->code, 14);
  EXPECT_EQ(stream->message, "etcdserver: no leader");
  EXPECT_FALSE(parse_etcd_error("Not Found\n").has_value());
  EXPECT_FALSE(parse_etcd_error("{" + std::string(kHeader) + "}").has_value());
  EXPECT_FALSE(parse_etcd_error(R"({"error":"x"})").has_value());
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

}  // namespace
}  // namespace flurry::internal

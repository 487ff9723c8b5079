// etcd's JSON-gateway codec on its own (src/registry/etcd_codec.h), without a client or a
// server: base64, prefix ends, the Date header, the JSON bodies sent, and the parsers of the
// gateway's answers, fed what etcd 3.4's gateway gives (int64 as strings, default values left
// out, a keep-alive stream, error bodies) and garbage that no etcd sends.
#include "registry/etcd_codec.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/quote.h"

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

TEST(EtcdRequestTest, GrantAndAuthenticateBodies) {
  EXPECT_EQ(etcd_grant_body(2), R"({"TTL":"2"})");
  // JSON-escaped, whatever the password holds.
  EXPECT_EQ(etcd_authenticate_body("root", "a\"b\\c"), R"({"name":"root","password":"a\"b\\c"})");
}

// Every parser of a 200 answer, by name, as a Status.
const std::vector<std::pair<std::string_view, std::function<Status(std::string_view)>>>& parsers() {
  static const std::vector<std::pair<std::string_view, std::function<Status(std::string_view)>>>
      kParsers = {
          {"range", [](std::string_view b) { return parse_etcd_range(b).status(); }},
          {"txn", [](std::string_view b) { return parse_etcd_txn(b).status(); }},
          {"grant", [](std::string_view b) { return parse_etcd_grant(b).status(); }},
          {"keepalive", [](std::string_view b) { return parse_etcd_keepalive(b).status(); }},
          {"timetolive", [](std::string_view b) { return parse_etcd_time_to_live(b).status(); }},
          {"token", [](std::string_view b) { return parse_etcd_token(b).status(); }},
      };
  return kParsers;
}

// What a proxy, a wrong port or a broken member may answer instead of etcd: every parser refuses
// it with INVALID_ARGUMENT, in a message that is one printable line of bounded length.
TEST(EtcdAnswerTest, GarbageIsRefusedByEveryParserInOneShortLine) {
  const std::string deep(100000, '[');  // nesting far deeper than any answer
  const std::string huge = "{\"kvs\":\"" + std::string(1 << 20, 'x');  // 1 MiB, unterminated
  const std::string_view garbage[] = {
      "",
      "\n",
      "<html><body>502 Bad Gateway</body></html>",
      "404 page not found\n",
      "{\"header\":{\"revision\":\"2\"",  // cut short
      "null",
      "\"text\"",
      "42",
      std::string_view("\0\x01\xff\xfe{}", 6),
      deep,
      huge,
  };
  for (const auto& [name, parse] : parsers()) {
    for (const std::string_view body : garbage) {
      SCOPED_TRACE(std::string(name) + " of " + quote(body));
      const Status st = parse(body);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
      EXPECT_EQ(st.reason(), Reason::kBadInput) << st.to_string();
      EXPECT_LT(st.message().size(), 300u) << st.message();
      for (const char c : st.message()) {
        ASSERT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " in " << st.message();
      }
    }
  }
}

// Numbers an int64 cannot hold, or that are not whole, are refused naming the field (never
// wrapped or truncated into a revision, a lease ID or a TTL).
TEST(EtcdAnswerTest, NumbersOutsideInt64AreRefusedNamingTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"header":{"revision":"9223372036854775808"}})", "revision"},
      {R"({"header":{"revision":9223372036854775808}})", "revision"},
      {R"({"header":{"revision":18446744073709551615}})", "revision"},
      {R"({"header":{"revision":-1.5}})", "revision"},
      {R"({"header":{"revision":"0x10"}})", "revision"},
      {R"({"header":{"revision":" 7"}})", "revision"},
      {R"({"header":{"revision":""}})", "revision"},
      {R"({"header":{"revision":true}})", "revision"},
      {R"({"count":"1e3"})", "count"},
  };
  for (const auto& [body, field] : cases) {
    Result<EtcdRange> r = parse_etcd_range(body);
    ASSERT_FALSE(r.ok()) << body << " parsed, revision " << r->revision;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(r.status().message().find(field + " is not an int64"), std::string::npos)
        << body << ": " << r.status().message();
  }
  // The largest int64 is one.
  Result<EtcdRange> max = parse_etcd_range(R"({"header":{"revision":9223372036854775807}})");
  ASSERT_TRUE(max.ok()) << max.status().to_string();
  EXPECT_EQ(max->revision, INT64_MAX);
  Result<EtcdRange> max_text = parse_etcd_range(R"({"header":{"revision":"9223372036854775807"}})");
  ASSERT_TRUE(max_text.ok()) << max_text.status().to_string();
  EXPECT_EQ(max_text->revision, INT64_MAX);
}

TEST(EtcdAnswerTest, LeaseAnswersOfTheWrongShapeAreRefused) {
  const std::pair<Status, std::string_view> cases[] = {
      {parse_etcd_grant(R"({"ID":"5","TTL":"0"})").status(), "no TTL"},
      {parse_etcd_grant(R"({"ID":"0","TTL":"2"})").status(), "no lease ID"},
      {parse_etcd_grant(R"({"ID":[],"TTL":"2"})").status(), "ID is not an int64"},
      {parse_etcd_keepalive(R"({"result":"yes"})").status(), "no result"},
      {parse_etcd_keepalive(R"({"result":{"TTL":"two"}})").status(), "TTL is not an int64"},
      {parse_etcd_keepalive("\n"
                            R"({"result":{"TTL":"2"}})")
           .status(),
       "not JSON"},
      {parse_etcd_time_to_live(R"({"TTL":"-2"})").status(), "TTL -2"},
      {parse_etcd_time_to_live(R"({"grantedTTL":{}})").status(), "grantedTTL is not an int64"},
      {parse_etcd_txn(R"({"responses":[{"response_delete_range":{"deleted":"x"}}]})").status(),
       "deleted is not an int64"},
      {parse_etcd_txn(R"({"responses":[7]})").status(), "not an object of one member"},
      {parse_etcd_range(R"({"kvs":[{"key":"eA==","value":7}]})").status(), "value is not a string"},
      {parse_etcd_range(R"({"kvs":[{"key":"eA==","value":"eA="}]})").status(), "value: not base64"},
      {parse_etcd_range(R"({"kvs":[3]})").status(), "a key-value is not an object"},
  };
  for (const auto& [st, what] : cases) {
    ASSERT_FALSE(st.ok()) << what;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find(what), std::string::npos) << what << ": " << st.message();
  }
}

// The authenticate answer holds a token: no message about it ever shows its text.
TEST(EtcdAnswerTest, TokenAnswersAreNeverQuoted) {
  Result<std::string> token =
      parse_etcd_token("{" + std::string(kHeader) + R"(,"token":"nyGjMwsKlDPBAAcz.42"})");
  ASSERT_TRUE(token.ok()) << token.status().to_string();
  EXPECT_EQ(*token, "nyGjMwsKlDPBAAcz.42");
  for (std::string_view bad :
       {"nyGjMwsKlDPBAAcz.42", R"(["nyGjMwsKlDPBAAcz.42"])", R"({"token":""})",
        R"({"token":["nyGjMwsKlDPBAAcz.42"]})", R"({"tokens":"nyGjMwsKlDPBAAcz.42"})",
        R"({"token":"nyGjMwsKlDPBAAcz.42")"}) {
    Result<std::string> r = parse_etcd_token(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().message().find("nyGj"), std::string::npos) << r.status().message();
  }
}

TEST(EtcdAnswerTest, AnswerIsJsonLooksAtTheFirstMessageOnly) {
  EXPECT_TRUE(etcd_answer_is_json("{}"));
  EXPECT_TRUE(etcd_answer_is_json(R"({"result":{"TTL":"2"}})"
                                  "\n"
                                  "garbage after the first message"));
  EXPECT_FALSE(etcd_answer_is_json(""));
  EXPECT_FALSE(etcd_answer_is_json("<html></html>"));
  EXPECT_FALSE(etcd_answer_is_json("{\"a\":"));
  // Garbage is never an error body either.
  EXPECT_FALSE(parse_etcd_error("<html></html>").has_value());
  EXPECT_FALSE(parse_etcd_error(R"({"error":{"grpc_code":"14"}})").has_value());
  EXPECT_FALSE(parse_etcd_error(R"({"error":7,"code":14})").has_value());
}

}  // namespace
}  // namespace flurry::internal

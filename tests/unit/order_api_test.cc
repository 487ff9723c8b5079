// The order-number routes without a transport: a real Service (default layout), a real
// SegmentService over a SQLite store in a temporary directory, an OrderFormats from a key set,
// and Api::handle() called directly.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api_fixture.h"
#include "fake_clock.h"
#include "flurry/order_number.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "held_generator.h"
#include "http/api.h"
#include "order/order_formats.h"
#include "service/service.h"
#include "test_store.h"

namespace flurry::http {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr std::string_view kToken = "order-admin-t0ken";
constexpr std::string_view kKey1 = "2b7e151628aed2a6abf7158809cf4f3c";
constexpr std::string_view kKey2 =
    "6a1f0c9e55b3d2e47a8b19f03c6d2e8175a4b9c0d1e2f30415263748596a7b8c";

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

using Reply = testing::ApiReply;

std::string bearer() {
  return "Bearer " + std::string(kToken);
}

class OrderApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<service::Service>> created =
        testing::start_service(dir_.path() / "data");
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    service_ = std::move(created).value();
    Result<std::unique_ptr<SegmentStore>> store =
        testing::open_sqlite_store(dir_.path() / "segments.db");
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    SegmentOptions segment_options;
    segment_options.max_batch = 1000;
    Result<std::unique_ptr<SegmentService>> segments =
        testing::serve_store(std::move(store).value(), segment_options);
    ASSERT_TRUE(segments.ok()) << segments.status().to_string();
    segments_ = std::move(segments).value();
    ASSERT_NO_FATAL_FAILURE(serve(order::OrderSettings{}, "1 = " + std::string(kKey1)));
  }

  void TearDown() override {
    api_.reset();
    ops_.reset();
    segments_.reset();
    if (service_) service_->stop();
  }

  // (Re)builds the Api with order numbers of `settings` under `keys` (empty: off).
  void serve(const order::OrderSettings& settings, const std::string& keys) {
    api_.reset();
    ops_.reset();
    formats_.reset();
    if (!keys.empty()) {
      Result<OrderKeySet> set = OrderKeySet::parse(keys, "test keys");
      ASSERT_TRUE(set.ok()) << set.status().to_string();
      Result<std::unique_ptr<order::OrderFormats>> f =
          order::OrderFormats::create(settings, std::move(set).value(), service_->layout());
      ASSERT_TRUE(f.ok()) << f.status().to_string();
      formats_ = std::move(f).value();
    }
    ops_ = std::make_unique<testing::OpsStack>(*service_, segments_.get(), formats_.get(), token_,
                                               api_clock_);
    api_ = std::make_unique<Api>(ops_->operations);
  }

  Reply call(std::string_view target, Method method = Method::kGet,
             std::string_view authorization = {}, Blocking blocking = Blocking::kAllowed,
             std::string_view body = {}) {
    return testing::call_api(*api_, scratch_, target, method, authorization, body, blocking);
  }

  std::vector<std::string> numbers(std::string_view target) {
    const Reply r = call(target);
    EXPECT_EQ(r.status(), 200) << r.body;
    std::vector<std::string> out;
    if (r.status() != 200) return out;
    const json d = r.doc();
    for (const json& n : d["order_numbers"]) out.push_back(n.get<std::string>());
    return out;
  }

  Reply decode(std::string_view code, std::string_view query = {}) {
    return call("/v1/order-numbers/" + std::string(code) + std::string(query), Method::kGet,
                bearer());
  }

  std::uint64_t decoded_id(std::string_view code, std::string_view query = {}) {
    const Reply r = decode(code, query);
    EXPECT_EQ(r.status(), 200) << r.body;
    return r.status() == 200 ? std::stoull(r.doc()["id"].get<std::string>()) : 0;
  }

  void create_tag(std::string_view tag) {
    const Reply r = call("/v1/segments", Method::kPost, bearer(), Blocking::kAllowed,
                         "{\"tag\":\"" + std::string(tag) + "\",\"start\":1,\"step\":1000}");
    ASSERT_EQ(r.status(), 201) << r.body;
  }

  // A 400 whose error object carries the library's kind and position.
  void expect_decode_error(std::string_view code, std::string_view kind, std::size_t position) {
    SCOPED_TRACE(code);
    const Reply r = decode(code);
    ASSERT_EQ(r.status(), 400) << r.body;
    const json e = r.doc()["error"];
    EXPECT_EQ(e["code"], "INVALID_ARGUMENT");
    EXPECT_EQ(e["kind"], kind);
    EXPECT_EQ(e["position"], position);
    EXPECT_FALSE(e["message"].get<std::string>().empty());
  }

  TempDir dir_;
  testing::FakeMonotonicClock api_clock_;  // the admin token's failure delay
  std::unique_ptr<service::Service> service_;
  std::unique_ptr<SegmentService> segments_;
  std::string token_{kToken};  // the admin token the operations are built with
  std::unique_ptr<testing::OpsStack> ops_;
  std::unique_ptr<order::OrderFormats> formats_;
  std::unique_ptr<Api> api_;
  ApiScratch scratch_;
};

TEST_F(OrderApiTest, IssuedNumbersDecodeToIncreasingIds) {
  const std::vector<std::string> codes = numbers("/v1/order-numbers?count=50");
  ASSERT_EQ(codes.size(), 50u);
  EXPECT_EQ(std::set<std::string>(codes.begin(), codes.end()).size(), 50u);
  std::uint64_t last = 0;
  for (const std::string& code : codes) {
    EXPECT_EQ(code.size(), 21u) << code;  // version, 19 digits, Damm
    const Reply r = decode(code);
    ASSERT_EQ(r.status(), 200) << r.body;
    const json d = r.doc();
    EXPECT_EQ(d["order_number"], code);
    EXPECT_EQ(d["key_version"], "1");
    EXPECT_EQ(d["source"], "snowflake");
    const std::uint64_t id = std::stoull(d["id"].get<std::string>());
    EXPECT_GT(id, last);
    last = id;
    // The fields as /v1/ids/{id} gives them.
    const Reply fields = call("/v1/ids/" + std::to_string(id));
    ASSERT_EQ(fields.status(), 200);
    const json f = fields.doc();
    for (const char* key : {"layout", "time", "unix_ms", "node", "seq", "fields", "encodings"}) {
      EXPECT_EQ(d[key], f[key]) << key;
    }
  }
  EXPECT_EQ(numbers("/v1/order-numbers").size(), 1u);  // count defaults to 1
  // Grouped or percent-encoded, the same number decodes to the same ID.
  const std::string spaced = codes[0].substr(0, 7) + "%20" + codes[0].substr(7);
  EXPECT_EQ(decoded_id(spaced), decoded_id(codes[0]));
}

TEST_F(OrderApiTest, WithoutKeysTheRoutesAnswer501AndIdsStillWork) {
  ASSERT_NO_FATAL_FAILURE(serve(order::OrderSettings{}, ""));
  for (const std::string target : {"/v1/order-numbers?count=2", "/v1/order-numbers/123"}) {
    const Reply r = call(target, Method::kGet, bearer());
    EXPECT_EQ(r.status(), 501) << r.body;
    EXPECT_EQ(r.doc()["error"]["code"], "UNIMPLEMENTED");
    EXPECT_HAS(r.body, "FLURRY_ORDER_KEYS");
    EXPECT_HAS(r.body, "order_key_file");
  }
  EXPECT_EQ(call("/v1/ids?count=2").status(), 200);
  EXPECT_EQ(call("/metrics").body.find("flurry_order_key_info"), std::string::npos);
}

// The admin token belongs to the operations layer, not to segment mode: on a server without
// segment mode, order numbers still decode with the keys and the token.
TEST_F(OrderApiTest, DecodingWorksWithoutSegmentMode) {
  api_.reset();
  ops_ =
      std::make_unique<testing::OpsStack>(*service_, nullptr, formats_.get(), token_, api_clock_);
  api_ = std::make_unique<Api>(ops_->operations);
  const std::string code = numbers("/v1/order-numbers")[0];
  const Reply r = decode(code);
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.doc()["source"], "snowflake");
  EXPECT_EQ(call("/v1/order-numbers/" + code).status(), 401);
  // A mistyped number carries no hint about segment tags here.
  std::string typo = code;
  typo[2] = typo[2] == '1' ? '2' : '1';
  const Reply bad = decode(typo);
  ASSERT_EQ(bad.status(), 400) << bad.body;
  EXPECT_EQ(bad.message().find("?tag="), std::string::npos) << bad.body;
  // Segment mode's own routes are not served, and a tag is 404.
  EXPECT_EQ(call("/v1/segments").status(), 404);
  EXPECT_EQ(call("/v1/order-numbers?tag=orders").status(), 404);
}

TEST_F(OrderApiTest, DecodingNeedsTheAdminToken) {
  const std::string code = numbers("/v1/order-numbers")[0];
  const Reply none = call("/v1/order-numbers/" + code);
  EXPECT_EQ(none.status(), 401) << none.body;
  EXPECT_TRUE(none.response.www_authenticate);
  EXPECT_HAS(none.body, "this call needs a token with scope orders:decode");
  const Reply basic = call("/v1/order-numbers/" + code, Method::kGet, "Basic abc");
  EXPECT_EQ(basic.status(), 401);
  // A wrong token is answered by the segment pool after the delay, not on the I/O thread.
  const Reply deferred =
      call("/v1/order-numbers/" + code, Method::kGet, "Bearer nope", Blocking::kNever);
  ASSERT_TRUE(deferred.response.deferred) << deferred.body;
  EXPECT_EQ(deferred.response.deferral.pool, ops::Pool::kStore);
  Reply wrong;
  std::thread pool([&] { wrong = testing::complete_api(*api_, deferred); });
  ASSERT_TRUE(api_clock_.await_waiters(1));
  api_clock_.advance(ops::Authorizer::kFailedTokenDelay);
  pool.join();
  EXPECT_EQ(wrong.status(), 401) << wrong.body;
  EXPECT_HAS(wrong.body, "TOKEN_UNKNOWN");
  EXPECT_EQ(wrong.response.route, Route::kOrderDecode);
  EXPECT_EQ(wrong.body.find(kToken), std::string::npos);
  EXPECT_EQ(decode(code).status(), 200);

  // A server without an admin token: 403 saying how to enable it.
  token_.clear();
  ASSERT_NO_FATAL_FAILURE(serve(order::OrderSettings{}, "1 = " + std::string(kKey1)));
  const Reply disabled = decode(code);
  EXPECT_EQ(disabled.status(), 403);
  EXPECT_HAS(disabled.body, "admin_token_file");
}

TEST_F(OrderApiTest, BadNumbersAre400WithKindAndPosition) {
  const std::string code = numbers("/v1/order-numbers")[0];
  ASSERT_EQ(code.size(), 21u);
  std::string wrong_check = code;
  wrong_check[20] = wrong_check[20] == '0' ? '1' : '0';
  expect_decode_error(wrong_check, "check", 21);
  expect_decode_error(code.substr(0, 20), "length", 0);
  std::string bad_char = code;
  bad_char[6] = 'x';
  expect_decode_error(bad_char, "character", 7);
  std::string bad_version = code;
  bad_version[0] = bad_version[0] == '9' ? '8' : '9';
  const Reply v = decode(bad_version);
  EXPECT_EQ(v.status(), 400) << v.body;
  EXPECT_HAS(call("/metrics").body, "flurry_order_decodes_total{result=\"error\"} 4");
  EXPECT_EQ(decode("").status(), 400);
}

TEST_F(OrderApiTest, TagNumbersComeFromTheSegmentTag) {
  ASSERT_NO_FATAL_FAILURE(create_tag("orders"));
  ASSERT_NO_FATAL_FAILURE(create_tag("invoices"));
  const std::vector<std::string> codes = numbers("/v1/order-numbers?count=3&tag=orders");
  ASSERT_EQ(codes.size(), 3u);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    const Reply r = decode(codes[i], "?tag=orders");
    ASSERT_EQ(r.status(), 200) << r.body;
    EXPECT_EQ(r.doc()["source"], "segment");
    EXPECT_EQ(r.doc()["tag"], "orders");
    EXPECT_EQ(r.doc()["id"], std::to_string(i + 1));
  }
  // Another tag gives other numbers for the same IDs (its own tweak).
  const std::vector<std::string> other = numbers("/v1/order-numbers?count=3&tag=invoices");
  ASSERT_EQ(other.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NE(other[i], codes[i]);
  // The segment IDs came out of the tag: the next plain segment ID is 4.
  const Reply next = call("/v1/segments/orders/ids");
  EXPECT_EQ(next.doc()["ids"][0], "4");

  EXPECT_EQ(call("/v1/order-numbers?tag=nosuchtag").status(), 404);
  EXPECT_EQ(call("/v1/order-numbers?tag=bad%20tag").status(), 400);
  EXPECT_HAS(call("/metrics").body, "flurry_order_numbers_issued_total{source=\"segment\"} 6");
}

// A segment number decodes only to an ID the tag has handed out (below its max_id in the store):
// a well-formed number of a higher ID (what a forger makes) is 400 no_such_id. The store is read
// on the segment pool: on an I/O thread the decode is deferred.
TEST_F(OrderApiTest, TagNumbersAboveTheStoredMaxIdAreRefused) {
  ASSERT_NO_FATAL_FAILURE(create_tag("orders"));
  ASSERT_EQ(numbers("/v1/order-numbers?count=3&tag=orders").size(), 3u);
  Result<std::shared_ptr<const OrderNumberFormat>> format = formats_->segment("orders");
  ASSERT_TRUE(format.ok());
  Result<std::string> issued = (*format)->encode(2);
  Result<std::string> forged = (*format)->encode(1'000'000);
  ASSERT_TRUE(issued.ok() && forged.ok());

  EXPECT_EQ(decode(*issued, "?tag=orders").doc()["id"], "2");
  const Reply refused = decode(*forged, "?tag=orders");
  ASSERT_EQ(refused.status(), 400) << refused.body;
  EXPECT_EQ(refused.doc()["error"]["kind"], "no_such_id");
  EXPECT_HAS(refused.body, "max_id");
  EXPECT_EQ(refused.response.route, Route::kOrderDecode);

  const Reply deferred = call("/v1/order-numbers/" + *issued + "?tag=orders", Method::kGet,
                              bearer(), Blocking::kNever);
  ASSERT_TRUE(deferred.response.deferred) << deferred.body;
  EXPECT_EQ(deferred.response.deferral.pool, ops::Pool::kStore);
  const Reply done = testing::complete_api(*api_, deferred);
  ASSERT_EQ(done.status(), 200) << done.body;
  EXPECT_EQ(done.doc()["id"], "2");
  EXPECT_EQ(done.doc()["source"], "segment");
  EXPECT_EQ(done.doc()["key_version"], "1");
  EXPECT_NE(decode(*issued, "?tag=invoices").status(), 200);  // no such tag
  // Counted once each, after the store was asked: 2 answered, the forgery and the unknown tag not.
  const std::string metrics = call("/metrics").body;
  EXPECT_HAS(metrics, "flurry_order_decodes_total{result=\"ok\"} 2");
  EXPECT_HAS(metrics, "flurry_order_decodes_total{result=\"error\"} 2");

  // Without ?tag= the number is read as a snowflake one; the error says a tag's needs ?tag=.
  const Reply untagged = decode(*issued);
  ASSERT_EQ(untagged.status(), 400) << untagged.body;
  EXPECT_HAS(untagged.body, "?tag=TAG");
}

// With order_segment_prefix every source has its own prefix: a tag's number never decodes
// without ?tag= (its prefix is not the snowflake one) and the key version is read after the
// tag's prefix.
TEST_F(OrderApiTest, SegmentPrefixesKeepSourcesApart) {
  order::OrderSettings settings;
  settings.prefix = "S";
  settings.tag_prefixes = {{"orders", "T"}, {"*", "UV"}};
  ASSERT_NO_FATAL_FAILURE(serve(settings, "1 = " + std::string(kKey1)));
  ASSERT_NO_FATAL_FAILURE(create_tag("orders"));
  ASSERT_NO_FATAL_FAILURE(create_tag("invoices"));
  const std::vector<std::string> snow = numbers("/v1/order-numbers?count=2");
  const std::vector<std::string> orders = numbers("/v1/order-numbers?count=2&tag=orders");
  const std::vector<std::string> invoices = numbers("/v1/order-numbers?count=2&tag=invoices");
  ASSERT_EQ(snow.size() + orders.size() + invoices.size(), 6u);
  EXPECT_EQ(snow[0].substr(0, 1), "S");
  EXPECT_EQ(orders[0].substr(0, 1), "T");
  EXPECT_EQ(invoices[0].substr(0, 2), "UV");
  const Reply r = decode(orders[0], "?tag=orders");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.doc()["key_version"], "1");
  EXPECT_EQ(r.doc()["id"], "1");
  const Reply untagged = decode(orders[0]);
  ASSERT_EQ(untagged.status(), 400);
  EXPECT_EQ(untagged.doc()["error"]["kind"], "prefix");
  EXPECT_HAS(untagged.body, "?tag=TAG");
  EXPECT_EQ(decode(invoices[1], "?tag=invoices").doc()["id"], "2");
}

// A snowflake number decodes only to an ID between the layout's epoch and now + max_lead on the
// formats' clock: one a moment later is refused as a forgery would be.
TEST(OrderFormatsTest, SnowflakeNumbersOfFutureIdsAreRefused) {
  Result<Layout> layout = Layout::parse("flurry");
  ASSERT_TRUE(layout.ok());
  Result<OrderKeySet> keys = OrderKeySet::parse("1 = " + std::string(kKey1), "test keys");
  ASSERT_TRUE(keys.ok());
  const TimePoint now = layout->epoch() + std::chrono::hours(24 * 400);
  testing::FakeClock wall(now);
  const std::chrono::milliseconds max_lead(1500);
  Result<std::unique_ptr<order::OrderFormats>> formats = order::OrderFormats::create(
      order::OrderSettings{}, std::move(keys).value(), *layout, wall, max_lead);
  ASSERT_TRUE(formats.ok()) << formats.status().to_string();
  const auto id_at = [&](TimePoint t) {
    IdParts parts;
    parts.ticks = static_cast<std::uint64_t>(layout->ticks_at(t));
    parts.node = 7;
    parts.seq = 4095;
    Result<std::uint64_t> id = layout->compose(parts);
    EXPECT_TRUE(id.ok());
    return id.ok() ? *id : 0;
  };
  const OrderNumberFormat& format = (*formats)->snowflake();
  for (const TimePoint t : {layout->epoch(), now, now + max_lead}) {
    Result<std::string> code = format.encode(id_at(t));
    ASSERT_TRUE(code.ok());
    Result<std::uint64_t> back = format.decode(*code);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, id_at(t));
  }
  Result<std::string> future = format.encode(id_at(now + max_lead + std::chrono::milliseconds(1)));
  ASSERT_TRUE(future.ok());
  OrderDecodeError why;
  Result<std::uint64_t> refused = format.decode(*future, &why);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(why.kind, OrderDecodeError::Kind::kNoSuchId);
  EXPECT_HAS(refused.status().message(), "later than");
  // Once the clock gets there, the same number decodes.
  wall.advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(format.decode(*future).ok());
  EXPECT_FALSE((*formats)->plausible_snowflake(id_at(now + std::chrono::hours(1))).ok());
}

TEST_F(OrderApiTest, DatePrefixIsRefusedForTags) {
  order::OrderSettings dated;
  dated.prefix = "date";
  dated.utc_offset_minutes = 480;
  dated.group = 7;
  ASSERT_NO_FATAL_FAILURE(serve(dated, "1 = " + std::string(kKey1)));
  ASSERT_NO_FATAL_FAILURE(create_tag("orders"));
  const Reply r = call("/v1/order-numbers?tag=orders");
  EXPECT_EQ(r.status(), 400) << r.body;
  EXPECT_HAS(r.body, "segment IDs carry no date");
  EXPECT_EQ(call("/v1/order-numbers?tag=orders", Method::kHead).status(), 400);
  const std::string code = numbers("/v1/order-numbers")[0];
  EXPECT_EQ(code.size(), 6u + 1 + 21 + 2);  // YYMMDD-ddddddd-ddddddd-ddddddd
  EXPECT_EQ(code[6], '-');
  EXPECT_EQ(decode(code).status(), 200);
}

TEST_F(OrderApiTest, HeadValidatesAndIssuesNothing) {
  const Reply r = call("/v1/order-numbers?count=3", Method::kHead);
  EXPECT_EQ(r.status(), 200);
  EXPECT_TRUE(r.response.omit_content_length);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(call("/v1/order-numbers?count=0", Method::kHead).status(), 400);
  ASSERT_NO_FATAL_FAILURE(create_tag("orders"));
  EXPECT_EQ(call("/v1/order-numbers?tag=orders", Method::kHead).status(), 200);
  const std::string metrics = call("/metrics").body;
  EXPECT_HAS(metrics, "\nflurry_ids_issued_total 0\n");
  EXPECT_HAS(metrics, "flurry_order_numbers_issued_total{source=\"snowflake\"} 0");
  EXPECT_HAS(metrics, "flurry_order_numbers_issued_total{source=\"segment\"} 0");
  EXPECT_EQ(call("/v1/segments/orders/ids").doc()["ids"][0], "1");
}

TEST_F(OrderApiTest, BadRequests) {
  for (const char* target :
       {"/v1/order-numbers?count=0", "/v1/order-numbers?count=x", "/v1/order-numbers?count=100001",
        "/v1/order-numbers?color=red", "/v1/order-numbers?count=1&count=2"}) {
    EXPECT_EQ(call(target).status(), 400) << target;
  }
  const Reply post = call("/v1/order-numbers", Method::kPost);
  EXPECT_EQ(post.status(), 405);
  EXPECT_TRUE(post.response.allow);
  EXPECT_EQ(call("/v1/order-numbers/a/b").status(), 404);
}

TEST_F(OrderApiTest, DeferredIssueIsCompletedAsOrderNumbers) {
  // A request waits on the generator's blocking thread: this one queues behind it.
  testing::HeldGenerator held(ops_->pools);
  const Reply r = call("/v1/order-numbers?count=2", Method::kGet, {}, Blocking::kNever);
  ASSERT_TRUE(r.response.deferred) << r.status() << " " << r.body;
  EXPECT_EQ(r.response.deferral.pool, ops::Pool::kGenerator);
  EXPECT_EQ(r.response.route, Route::kOrderNumbers);
  EXPECT_EQ(r.body, "");
  EXPECT_HAS(call("/metrics").body, "flurry_order_numbers_issued_total{source=\"snowflake\"} 0");
  // Run again as the generator's pool does: two numbers of increasing IDs.
  const Reply done = testing::complete_api(*api_, r);
  held.release();
  ASSERT_EQ(done.status(), 200) << done.body;
  const json d = done.doc();
  ASSERT_EQ(d["order_numbers"].size(), 2u);
  EXPECT_LT(decoded_id(d["order_numbers"][0].get<std::string>()),
            decoded_id(d["order_numbers"][1].get<std::string>()));
  EXPECT_HAS(call("/metrics").body, "flurry_order_numbers_issued_total{source=\"snowflake\"} 2");
}

TEST_F(OrderApiTest, RotationKeepsOldNumbersAndMetricsShowVersionsOnly) {
  const std::string old_code = numbers("/v1/order-numbers")[0];
  const std::uint64_t old_id = decoded_id(old_code);
  ASSERT_NO_FATAL_FAILURE(
      serve(order::OrderSettings{}, "1 = " + std::string(kKey1) + "\n2 = " + std::string(kKey2)));
  const std::string new_code = numbers("/v1/order-numbers")[0];
  EXPECT_EQ(new_code[0], '2');
  EXPECT_EQ(decode(new_code).doc()["key_version"], "2");
  EXPECT_EQ(decoded_id(old_code), old_id);
  EXPECT_EQ(decode(old_code).doc()["key_version"], "1");
  const std::string metrics = call("/metrics").body;
  EXPECT_HAS(metrics, "flurry_order_key_info{active=\"2\",versions=\"12\"} 1");
  EXPECT_HAS(metrics, "flurry_order_decodes_total{result=\"ok\"} 3");
  EXPECT_EQ(metrics.find(kKey1.substr(0, 8)), std::string::npos);
  EXPECT_EQ(metrics.find(kKey2.substr(0, 8)), std::string::npos);
}

}  // namespace
}  // namespace flurry::http

// Segment mode's HTTP routes without a transport: a real Service, a real SegmentService over a
// real SQLite store in a temporary directory (behind FaultySegmentStore, to take the store down
// on demand), the operations layer over them, and Api::handle() called directly.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api_fixture.h"
#include "fake_clock.h"
#include "faulty_segment_store.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "http/api.h"
#include "service/service.h"
#include "test_store.h"

namespace flurry::http {
namespace {

using nlohmann::json;
using testing::FakeMonotonicClock;
using testing::FaultySegmentStore;
using testing::TempDir;

constexpr std::string_view kToken = "t0ken-for-tests";

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

using Reply = testing::ApiReply;

class SegmentApiTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start(std::string(kToken))); }

  void start(std::string token) {
    Result<std::unique_ptr<service::Service>> created =
        testing::start_service(dir_.path() / "data");
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    service_ = std::move(created).value();

    Result<std::unique_ptr<SegmentStore>> store =
        testing::open_sqlite_store(dir_.path() / "segments.db");
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto faulty = std::make_unique<FaultySegmentStore>(std::move(store).value());
    store_ = faulty.get();
    SegmentOptions segment_options;
    segment_options.max_wait = std::chrono::milliseconds(100);
    segment_options.max_batch = 1000;
    Result<std::unique_ptr<SegmentService>> segments =
        testing::serve_store(std::move(faulty), segment_options);
    ASSERT_TRUE(segments.ok()) << segments.status().to_string();
    segments_ = std::move(segments).value();
    ops_ = std::make_unique<testing::OpsStack>(*service_, segments_.get(), nullptr,
                                               std::move(token), api_clock_);
    api_ = std::make_unique<Api>(ops_->operations);
  }

  void TearDown() override {
    api_.reset();
    ops_.reset();
    segments_.reset();
    if (service_) service_->stop();
  }

  Reply call(std::string_view target, Method method = Method::kGet,
             std::string_view authorization = {}, std::string_view body = {},
             Blocking blocking = Blocking::kAllowed) {
    return testing::call_api(*api_, scratch_, target, method, authorization, body, blocking);
  }

  Reply create(std::string_view body, std::string_view authorization = "Bearer t0ken-for-tests") {
    return call("/v1/segments", Method::kPost, authorization, body);
  }

  // create() with a wrong token: its answer must wait for ops::Authorizer::kFailedTokenDelay
  // on the API's clock (it does not come before the clock gets there).
  Reply refused_after_delay(std::string_view body, std::string_view authorization) {
    Reply reply;
    std::atomic<bool> answered{false};
    std::thread caller([&] {
      reply = create(body, authorization);
      answered = true;
    });
    EXPECT_TRUE(api_clock_.await_waiters(1));
    EXPECT_FALSE(answered.load());
    api_clock_.advance(ops::Authorizer::kFailedTokenDelay - std::chrono::milliseconds(1));
    EXPECT_TRUE(api_clock_.await_waiters(1));
    EXPECT_FALSE(answered.load());
    api_clock_.advance(std::chrono::milliseconds(1));
    caller.join();
    return reply;
  }

  // Finishes a deferred request as the store pool does: the same request again, allowed to
  // block, with its deferral.
  Reply complete(const Reply& deferred) {
    EXPECT_EQ(deferred.response.deferral.pool, ops::Pool::kStore);
    return testing::complete_api(*api_, deferred);
  }

  void create_orders(std::uint64_t start = 1, std::uint64_t step = 1000) {
    const Reply r = create("{\"tag\":\"orders\",\"start\":" + std::to_string(start) + ",\"step\":" +
                           std::to_string(step) + ",\"description\":\"order lines\"}");
    ASSERT_EQ(r.status(), 201) << r.body;
  }

  std::vector<std::uint64_t> ids(std::string_view target) {
    const Reply r = call(target);
    EXPECT_EQ(r.status(), 200) << r.body;
    std::vector<std::uint64_t> out;
    if (r.status() != 200) return out;
    const json doc = r.doc();
    for (const json& id : doc["ids"]) out.push_back(std::stoull(id.get<std::string>()));
    return out;
  }

  // Expects a 400 INVALID_ARGUMENT whose message holds `needle`.
  void expect_bad(const Reply& r, std::string_view needle,
                  std::string_view code = "INVALID_ARGUMENT") {
    EXPECT_EQ(r.status(), 400) << r.body;
    EXPECT_EQ(r.response.content_type, "application/json");
    if (r.status() != 400) return;
    EXPECT_EQ(r.code(), code) << r.body;
    EXPECT_HAS(r.message(), needle);
  }

  TempDir dir_;
  FakeMonotonicClock api_clock_;
  std::unique_ptr<service::Service> service_;
  FaultySegmentStore* store_ = nullptr;
  std::unique_ptr<SegmentService> segments_;
  std::unique_ptr<testing::OpsStack> ops_;
  std::unique_ptr<Api> api_;
  ApiScratch scratch_;
};

TEST_F(SegmentApiTest, CreateAnswers201WithTheStoredRow) {
  const Reply r = create("{\"tag\":\"orders\",\"start\":1001,\"step\":500,\"description\":\"x\"}");
  ASSERT_EQ(r.status(), 201) << r.body;
  EXPECT_EQ(r.response.route, Route::kSegmentList);
  const json row = r.doc();
  EXPECT_EQ(row["tag"], "orders");
  EXPECT_EQ(row["max_id"], "1001");  // IDs are JSON strings
  EXPECT_EQ(row["step"], 500);
  EXPECT_EQ(row["delta"], 1);
  EXPECT_EQ(row["remainder"], 0);
  EXPECT_EQ(row["description"], "x");
  EXPECT_TRUE(row["update_time"].is_string());
  EXPECT_EQ(row["update_time"].get<std::string>().back(), 'Z');
  // Only the defaults are optional: start 1, step 1000.
  const Reply minimal = create("{\"tag\":\"lines\"}");
  ASSERT_EQ(minimal.status(), 201) << minimal.body;
  EXPECT_EQ(minimal.doc()["max_id"], "1");
  EXPECT_EQ(minimal.doc()["step"], 1000);
  // Residues with one store are the caller's to choose.
  const Reply odd = create("{\"tag\":\"odd\",\"step\":10,\"delta\":2,\"remainder\":1}");
  ASSERT_EQ(odd.status(), 201) << odd.body;
  EXPECT_EQ(odd.doc()["delta"], 2);
  EXPECT_EQ(odd.doc()["remainder"], 1);
  const std::vector<std::uint64_t> got = ids("/v1/segments/odd/ids?count=4");
  ASSERT_EQ(got.size(), 4u);
  for (std::uint64_t id : got) EXPECT_EQ(id % 2, 1u) << id;
}

TEST_F(SegmentApiTest, CreateTwiceIs409) {
  create_orders();
  const Reply r = create("{\"tag\":\"orders\",\"start\":5}");
  EXPECT_EQ(r.status(), 409) << r.body;
  EXPECT_EQ(r.code(), "ALREADY_EXISTS");
  EXPECT_HAS(r.message(), "orders");
}

TEST_F(SegmentApiTest, CreateNeedsTheToken) {
  const std::string body = "{\"tag\":\"orders\"}";
  Reply r = create(body, "");
  EXPECT_EQ(r.status(), 401) << r.body;
  EXPECT_TRUE(r.response.www_authenticate);
  EXPECT_EQ(r.code(), "UNAUTHENTICATED");
  EXPECT_HAS(r.message(), "Bearer");

  r = create(body, "Basic dXNlcjpwYXNz");
  EXPECT_EQ(r.status(), 401) << r.body;
  r = create(body, "Bearer");
  EXPECT_EQ(r.status(), 401) << r.body;

  for (std::string_view wrong :
       {"Bearer t0ken-for-test", "Bearer t0ken-for-tests2", "Bearer T0KEN-FOR-TESTS", "Bearer x"}) {
    r = refused_after_delay(body, wrong);
    EXPECT_EQ(r.status(), 401) << wrong << ": " << r.body;
    EXPECT_EQ(r.code(), "UNAUTHENTICATED");
    EXPECT_HAS(r.body, "\"reason\":\"TOKEN_UNKNOWN\"");
    EXPECT_TRUE(r.response.www_authenticate);
    // The expected token never appears in an answer.
    EXPECT_EQ(r.body.find(kToken), std::string::npos) << r.body;
  }
  // Nothing was created by the refused requests.
  EXPECT_EQ(call("/v1/segments/orders").status(), 404);
  // The scheme is case-insensitive and whitespace around the token is fine.
  r = create(body, "bearer   t0ken-for-tests ");
  EXPECT_EQ(r.status(), 201) << r.body;
}

// On an I/O thread (Blocking::kNever) an unknown token is not answered there: the refusal goes to
// the segment pool, which answers it once the delay has passed. Other unknown tokens are compared
// and deferred likewise, and the right token is admitted meanwhile, until the client has used up
// the token brake's budget: then its requests are 503 with Retry-After at once, without the token
// being compared (the right one neither), until the budget comes back.
TEST_F(SegmentApiTest, WrongTokenIsAnsweredLateOnThePoolAndBrakedPastTheBudget) {
  const std::string body = "{\"tag\":\"orders\"}";
  const Reply deferred =
      call("/v1/segments", Method::kPost, "Bearer wrong-guess", body, Blocking::kNever);
  ASSERT_TRUE(deferred.response.deferred) << deferred.body;
  EXPECT_TRUE(deferred.body.empty());
  const Reply another =
      call("/v1/segments", Method::kPost, "Bearer another-guess", body, Blocking::kNever);
  EXPECT_TRUE(another.response.deferred) << another.body;
  EXPECT_EQ(call("/v1/segments/orders").status(), 404);
  const Reply during = create("{\"tag\":\"during\"}", "Bearer t0ken-for-tests");
  EXPECT_EQ(during.status(), 201) << during.body;

  Reply refused;
  std::thread pool([&] { refused = complete(deferred); });
  ASSERT_TRUE(api_clock_.await_waiters(1));
  api_clock_.advance(ops::Authorizer::kFailedTokenDelay);
  pool.join();
  EXPECT_EQ(refused.status(), 401) << refused.body;
  EXPECT_EQ(refused.code(), "UNAUTHENTICATED");
  EXPECT_EQ(refused.response.route, Route::kSegmentList);

  // The rest of the burst (the clock moved by one delay: one more guess came back), then braked.
  int compared = 2;
  while (compared < 100) {
    const Reply r = call("/v1/segments", Method::kPost, "Bearer guess-" + std::to_string(compared),
                         body, Blocking::kNever);
    if (!r.response.deferred) {
      EXPECT_EQ(r.status(), 503) << r.body;
      EXPECT_TRUE(r.response.retry_after);
      EXPECT_HAS(r.message(), "the token was not checked");
      break;
    }
    ++compared;
  }
  EXPECT_EQ(compared, ops::GuessBrake::kClientBurst + 1);
  const Reply braked_right = create("{\"tag\":\"braked\"}", "Bearer t0ken-for-tests");
  EXPECT_EQ(braked_right.status(), 503) << braked_right.body;
  EXPECT_EQ(call("/v1/segments/braked").status(), 404);

  // A header that is not a guess (no token, another scheme) is answered at once, braked or not.
  EXPECT_EQ(create(body, "").status(), 401);
  api_clock_.advance(std::chrono::milliseconds(1000 / ops::GuessBrake::kClientPerSecond));
  const Reply created = create(body, "Bearer t0ken-for-tests");
  EXPECT_EQ(created.status(), 201) << created.body;
}

TEST_F(SegmentApiTest, CreateIsDisabledWithoutAToken) {
  TearDown();
  ASSERT_NO_FATAL_FAILURE(start(""));
  for (std::string_view auth : {"", "Bearer anything", "Bearer "}) {
    const Reply r = create("{\"tag\":\"orders\"}", auth);
    EXPECT_EQ(r.status(), 403) << r.body;
    EXPECT_EQ(r.code(), "PERMISSION_DENIED");
    EXPECT_HAS(r.body, "\"reason\":\"SCOPE_MISSING\"");
    EXPECT_HAS(r.message(), "needs a token with scope admin and this server has none");
    EXPECT_HAS(r.message(), "admin_token_file");
  }
}

TEST_F(SegmentApiTest, BadBodiesAre400) {
  expect_bad(create(""), "empty");
  expect_bad(create("  \n"), "empty");
  expect_bad(create("{\"tag\":\"orders\""), "not valid JSON");
  expect_bad(create("tag=orders"), "not valid JSON");
  expect_bad(create("[\"orders\"]"), "must be a JSON object");
  expect_bad(create("{\"tag\":\"orders\",\"size\":3}"), "unknown field \"size\"");
  expect_bad(create("{\"tag\":\"orders\",\"step\":\"1000\"}"), "\"step\" must be a whole number");
  expect_bad(create("{\"tag\":\"orders\",\"step\":1.5}"), "\"step\" must be a whole number");
  expect_bad(create("{\"tag\":\"orders\",\"start\":-1}"), "\"start\" must not be negative");
  expect_bad(create("{\"tag\":\"orders\",\"start\":18446744073709551616}"), "whole number");
  expect_bad(create("{\"tag\":\"orders\",\"start\":1e999}"), "too large");  // found by fuzzing
  expect_bad(create("{\"tag\":7}"), "\"tag\" must be a string");
  expect_bad(create("{\"tag\":\"orders\",\"description\":null}"),
             "\"description\" must be a string");
  expect_bad(create("{\"step\":10}"), "\"tag\" is missing");
  expect_bad(create("{\"tag\":\"orders\",\"step\":1,\"step\":2}"), "given twice");
  expect_bad(create("{\"tag\":\"bad tag\"}"), "segment tag");
  expect_bad(create("{\"tag\":\"\"}"), "empty");
  expect_bad(create("{\"tag\":\"orders\",\"step\":0}"), "step");
  expect_bad(create("{\"tag\":\"orders\",\"delta\":2,\"remainder\":2}"), "remainder");
  expect_bad(create("{\"tag\":\"orders\",\"start\":9223372036854775807}"), "start");
  // None of them created anything.
  EXPECT_EQ(call("/v1/segments").doc()["tags"].size(), 0u);
}

TEST_F(SegmentApiTest, IdsAreIncreasingAndUniqueAcrossRanges) {
  create_orders(1, 10);
  std::vector<std::uint64_t> all = ids("/v1/segments/orders/ids");
  ASSERT_EQ(all, std::vector<std::uint64_t>{1});
  for (int i = 0; i < 30; ++i) {
    for (std::uint64_t id : ids("/v1/segments/orders/ids?count=7")) all.push_back(id);
  }
  ASSERT_EQ(all.size(), 211u);
  for (std::size_t i = 1; i < all.size(); ++i) ASSERT_LT(all[i - 1], all[i]) << i;
  EXPECT_EQ(std::set<std::uint64_t>(all.begin(), all.end()).size(), all.size());
}

TEST_F(SegmentApiTest, RangeAndLeafGet) {
  create_orders(1001, 100);
  Reply r = call("/v1/segments/orders/range?size=10");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kSegmentRange);
  EXPECT_EQ(r.doc(), json::parse("{\"start\":\"1001\",\"end\":\"1011\",\"delta\":1}"));
  r = call("/v1/segments/orders/range");  // size 1 by default
  EXPECT_EQ(r.doc(), json::parse("{\"start\":\"1011\",\"end\":\"1012\",\"delta\":1}"));

  r = call("/api/segment/get/orders");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kSegmentLeafGet);
  EXPECT_EQ(r.response.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(r.body, "1012");

  // Larger than a range: OUT_OF_RANGE, 400.
  expect_bad(call("/v1/segments/orders/range?size=101"), "", "OUT_OF_RANGE");
}

TEST_F(SegmentApiTest, ListAndOneTag) {
  create_orders(1, 1000);
  ASSERT_EQ(create("{\"tag\":\"alpha\",\"step\":50}").status(), 201);
  Reply r = call("/v1/segments");
  ASSERT_EQ(r.status(), 200) << r.body;
  const json tags = r.doc()["tags"];
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_EQ(tags[0]["tag"], "alpha");  // by name
  EXPECT_EQ(tags[1]["tag"], "orders");
  EXPECT_EQ(tags[1]["description"], "order lines");
  EXPECT_EQ(tags[1]["max_id"], "1");

  // Known to the store, not served here yet.
  r = call("/v1/segments/alpha");
  ASSERT_EQ(r.status(), 200) << r.body;
  json s = r.doc();
  EXPECT_EQ(s["tag"], "alpha");
  EXPECT_EQ(s["served"], false);
  EXPECT_TRUE(s["current"].is_null());
  EXPECT_TRUE(s["next"].is_null());
  EXPECT_EQ(s["ids_issued"], 0);
  EXPECT_EQ(s["base_step"], 50);
  EXPECT_EQ(s["stored"]["tag"], "alpha");

  ASSERT_EQ(ids("/v1/segments/orders/ids?count=5").size(), 5u);
  r = call("/v1/segments/orders");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.response.route, Route::kSegmentTag);
  s = r.doc();
  EXPECT_EQ(s["served"], true);
  EXPECT_EQ(s["ids_issued"], 5);
  EXPECT_EQ(s["base_step"], 1000);
  EXPECT_EQ(s["ranges_fetched"], 1);
  EXPECT_EQ(s["store_errors"], 0);
  EXPECT_EQ(s["last_error"], "");
  for (const char* key : {"step", "remaining", "fetching", "ids_skipped", "waits", "unavailable"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  const json current = s["current"];
  ASSERT_TRUE(current.is_object()) << r.body;
  EXPECT_EQ(current["start"], "1");
  EXPECT_EQ(current["end"], "1001");
  EXPECT_EQ(current["size"], 1000);
  EXPECT_EQ(current["remaining"], 995);
  EXPECT_HAS(current["store"].get<std::string>(), "segments.db");
  EXPECT_TRUE(current["fetch_ms"].is_number());
  EXPECT_EQ(current["fetched_at"].get<std::string>().back(), 'Z');
  EXPECT_EQ(s["stored"]["max_id"], "1001");
}

TEST_F(SegmentApiTest, UnknownTagsAre404) {
  for (std::string_view target : {"/v1/segments/nope/ids", "/v1/segments/nope/range?size=2",
                                  "/api/segment/get/nope", "/v1/segments/nope"}) {
    const Reply r = call(target);
    EXPECT_EQ(r.status(), 404) << target << ": " << r.body;
    EXPECT_EQ(r.code(), "NOT_FOUND");
    EXPECT_HAS(r.message(), "nope");
  }
  EXPECT_EQ(call("/v1/segments/orders/other").status(), 404);
}

TEST_F(SegmentApiTest, BadTagsAndParametersAre400) {
  create_orders();
  expect_bad(call("/v1/segments/bad%20tag/ids"), "not a valid tag name");
  expect_bad(call("/v1/segments/a*b/ids"), "not a valid tag name");
  expect_bad(call("/api/segment/get/" + std::string(129, 'a')), "at most 128");
  expect_bad(call("/v1/segments//ids"), "empty");
  expect_bad(call("/v1/segments/x%zz"), "");
  expect_bad(call("/v1/segments/orders/ids?count=0"), "0 is too small");
  expect_bad(call("/v1/segments/orders/ids?count=abc"), "\"abc\" is not a whole number");
  expect_bad(call("/v1/segments/orders/ids?count="), "\"count\" is empty");
  expect_bad(call("/v1/segments/orders/ids?count=1001"), "more than max_batch (1000)");
  expect_bad(call("/v1/segments/orders/ids?size=3"), "size");
  expect_bad(call("/v1/segments/orders/range?size=-1"), "\"size\"");
  expect_bad(call("/v1/segments/orders/range?count=1"), "count");
  expect_bad(call("/v1/segments?x=1"), "x");
  expect_bad(call("/api/segment/get/orders?count=2"), "count");
  // Nothing was issued by any of them.
  EXPECT_EQ(call("/v1/segments/orders").doc()["ids_issued"], 0);
}

TEST_F(SegmentApiTest, MethodsOtherThanGetAndHeadAre405) {
  Reply r = call("/v1/segments", Method::kOther);
  EXPECT_EQ(r.status(), 405);
  EXPECT_TRUE(r.response.allow);
  EXPECT_TRUE(r.response.allow_post);
  for (std::string_view target :
       {"/v1/segments/orders/ids", "/v1/segments/orders/range", "/v1/segments/orders",
        "/api/segment/get/orders", "/segments", "/v1/ids", "/healthz"}) {
    for (Method method : {Method::kPost, Method::kOther}) {
      r = call(target, method, "Bearer t0ken-for-tests", "{}");
      EXPECT_EQ(r.status(), 405) << target;
      EXPECT_TRUE(r.response.allow);
      EXPECT_FALSE(r.response.allow_post);
    }
  }
}

TEST_F(SegmentApiTest, HeadIssuesNothing) {
  create_orders();
  for (std::string_view target : {"/v1/segments/orders/ids?count=10",
                                  "/v1/segments/orders/range?size=10", "/api/segment/get/orders"}) {
    const Reply r = call(target, Method::kHead);
    EXPECT_EQ(r.status(), 200) << target;
    EXPECT_TRUE(r.response.omit_content_length);
    EXPECT_TRUE(r.body.empty());
  }
  expect_bad(call("/v1/segments/orders/ids?count=0", Method::kHead), "too small");
  EXPECT_EQ(ids("/v1/segments/orders/ids"), std::vector<std::uint64_t>{1});
}

TEST_F(SegmentApiTest, IoThreadsNeverWaitForTheStore) {
  create_orders(1, 100);
  // Not loaded yet: deferred, nothing written.
  Reply r = call("/v1/segments/orders/ids?count=3", Method::kGet, {}, {}, Blocking::kNever);
  ASSERT_TRUE(r.response.deferred) << r.body;
  EXPECT_TRUE(r.body.empty());
  Reply done = complete(r);
  ASSERT_EQ(done.status(), 200) << done.body;
  EXPECT_EQ(done.doc()["ids"], json::parse("[\"1\",\"2\",\"3\"]"));
  // Loaded: served at once from the buffer.
  r = call("/v1/segments/orders/ids?count=2", Method::kGet, {}, {}, Blocking::kNever);
  EXPECT_FALSE(r.response.deferred);
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.doc()["ids"], json::parse("[\"4\",\"5\"]"));
  // Reading or writing the store always goes to the pool.
  for (std::string_view target : {"/v1/segments", "/v1/segments/orders"}) {
    r = call(target, Method::kGet, {}, {}, Blocking::kNever);
    EXPECT_TRUE(r.response.deferred) << target;
    done = complete(r);
    EXPECT_EQ(done.status(), 200) << done.body;
  }
  r = call("/v1/segments", Method::kPost, "Bearer t0ken-for-tests", "{\"tag\":\"later\"}",
           Blocking::kNever);
  ASSERT_TRUE(r.response.deferred) << r.body;
  done = complete(r);
  EXPECT_EQ(done.status(), 201) << done.body;
  EXPECT_EQ(done.doc()["tag"], "later");
  // Bad requests are answered on the I/O thread.
  r = call("/v1/segments", Method::kPost, "", "{\"tag\":\"later\"}", Blocking::kNever);
  EXPECT_FALSE(r.response.deferred);
  EXPECT_EQ(r.status(), 401);
}

TEST_F(SegmentApiTest, StoreOutageIs503WithRetryAfter) {
  create_orders(1, 10);
  ASSERT_EQ(ids("/v1/segments/orders/ids?count=5").size(), 5u);
  store_->fail = true;
  // The buffers still hold IDs: served. Then empty for max_wait (100 ms): 503.
  Reply r;
  int served = 0;
  for (int i = 0; i < 100; ++i) {
    r = call("/v1/segments/orders/ids");
    if (r.status() != 200) break;
    ++served;
  }
  EXPECT_GE(served, 5);
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_TRUE(r.response.retry_after);
  EXPECT_EQ(r.code(), "UNAVAILABLE");
  EXPECT_HAS(r.body, "injected");
  // The store itself: 503 too.
  r = call("/v1/segments");
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_TRUE(r.response.retry_after);
  r = call("/v1/segments/unloaded/ids");
  EXPECT_EQ(r.status(), 503) << r.body;
  // A served tag is still shown from memory, without its stored row.
  r = call("/v1/segments/orders");
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_TRUE(r.doc()["stored"].is_null());
  EXPECT_GE(r.doc()["store_errors"].get<int>(), 1);
  EXPECT_HAS(r.doc()["last_error"].get<std::string>(), "injected");
  // Back: served again, once the fetcher's next retry reaches the store (its backoff after the
  // failures runs on real time and may outlast one request's max_wait of 100 ms: under ASan
  // beside a build the first request after the outage came too soon).
  store_->fail = false;
  for (int attempt = 0; attempt < 100; ++attempt) {
    r = call("/v1/segments/orders/ids?count=3");
    if (r.status() == 200) break;
    EXPECT_EQ(r.status(), 503) << r.body;
  }
  ASSERT_EQ(r.status(), 200) << r.body;
  EXPECT_EQ(r.doc()["ids"].size(), 3u);
}

TEST_F(SegmentApiTest, RequestsQueuedPastTheirDeadlineAre503AtOnce) {
  create_orders(1, 100);
  const Reply list = call("/v1/segments", Method::kGet, {}, {}, Blocking::kNever);
  const Reply fresh = call("/v1/segments/orders/ids", Method::kGet, {}, {}, Blocking::kNever);
  ASSERT_TRUE(list.response.deferred);
  ASSERT_TRUE(fresh.response.deferred);
  api_clock_.advance(std::chrono::seconds(2));  // past max(max_wait, 1 s)
  Reply r = complete(list);
  EXPECT_EQ(r.status(), 503) << r.body;
  EXPECT_TRUE(r.response.retry_after);
  EXPECT_HAS(r.message(), "segment_max_wait_ms");
  r = complete(fresh);  // the tag is not loaded: it would have to wait
  EXPECT_EQ(r.status(), 503) << r.body;
  // What memory holds is still served, however late.
  ASSERT_EQ(ids("/v1/segments/orders/ids").size(), 1u);
  const Reply loaded =
      call("/v1/segments/orders/ids?count=2", Method::kGet, {}, {}, Blocking::kNever);
  ASSERT_FALSE(loaded.response.deferred);
}

TEST_F(SegmentApiTest, MetricsPerTag) {
  create_orders(1, 100);
  ASSERT_EQ(ids("/v1/segments/orders/ids?count=7").size(), 7u);
  const Reply r = call("/metrics");
  ASSERT_EQ(r.status(), 200);
  for (std::string_view line :
       {"# TYPE flurry_segment_ids_issued_total counter\n",
        "\nflurry_segment_ids_issued_total{tag=\"orders\"} 7\n",
        "\nflurry_segment_ids_skipped_total{tag=\"orders\"} 0\n",
        "\nflurry_segment_ranges_fetched_total{tag=\"orders\"} ",
        "\nflurry_segment_store_errors_total{tag=\"orders\"} 0\n",
        "\nflurry_segment_waits_total{tag=\"orders\"} ",
        "\nflurry_segment_unavailable_total{tag=\"orders\"} 0\n",
        "# TYPE flurry_segment_remaining gauge\n", "\nflurry_segment_remaining{tag=\"orders\"} ",
        "\nflurry_segment_step{tag=\"orders\"} ", "# TYPE flurry_segment_fetch_seconds summary\n",
        "\nflurry_segment_fetch_seconds_sum{tag=\"orders\"} ",
        "\nflurry_segment_fetch_seconds_count{tag=\"orders\"} "}) {
    EXPECT_HAS(r.body, line);
  }
}

// The /segments page moved into the console: old bookmarks are redirected to its Tags section,
// without a token (the redirect carries nothing).
TEST_F(SegmentApiTest, SegmentsPageRedirectsToTheConsole) {
  const Reply r = call("/segments");
  ASSERT_EQ(r.status(), 302) << r.body;
  EXPECT_EQ(r.response.route, Route::kSegmentsPage);
  ASSERT_EQ(r.response.headers.size(), 1u);
  EXPECT_EQ(r.response.headers[0].name, "Location");
  EXPECT_EQ(r.response.headers[0].value, "/console#tags");
  EXPECT_EQ(call("/segments", Method::kHead).status(), 302);
  expect_bad(call("/segments?x=1"), "x");
}

// The console's files: embedded, served without a token with the console's headers, each with
// its content type; the page loads only its own script and style sheet (no inline code, which
// the Content-Security-Policy forbids) and shows server data only as text.
TEST_F(SegmentApiTest, ConsoleFiles) {
  struct Expected {
    std::string_view target;
    std::string_view type;
    std::string_view hook;
  };
  for (const Expected& e :
       {Expected{"/console", "text/html; charset=utf-8", "<!DOCTYPE html>"},
        Expected{"/console/", "text/html; charset=utf-8", "<script src=\"/console/console.js\""},
        Expected{"/console/console.js", "text/javascript; charset=utf-8", "textContent"},
        Expected{"/console/console.css", "text/css; charset=utf-8", ".layout-bar"}}) {
    SCOPED_TRACE(e.target);
    const Reply r = call(e.target);
    ASSERT_EQ(r.status(), 200) << r.body;
    EXPECT_EQ(r.response.route, Route::kConsole);
    EXPECT_EQ(r.response.content_type, e.type);
    EXPECT_EQ(r.response.cache_control, "no-cache");
    EXPECT_HAS(r.body, e.hook);
    std::size_t header_bytes = 0;
    bool csp = false;
    for (const HttpHeader& h : r.response.headers) {
      header_bytes += h.name.size() + h.value.size() + 4;
      if (h.name == "Content-Security-Policy") {
        csp = true;
        EXPECT_HAS(h.value, "default-src 'none'; script-src 'self'; style-src 'self';");
        EXPECT_HAS(h.value, "frame-ancestors 'none'");
      }
    }
    EXPECT_TRUE(csp);
    EXPECT_LE(header_bytes, kMaxExtraHeaderBytes);
    // Nothing from another origin (the SVG namespace is a name, not a request), no HTML built
    // from strings.
    const std::string other_origins =
        std::regex_replace(r.body, std::regex("\"http://www\\.w3\\.org/2000/svg\""), "");
    EXPECT_EQ(other_origins.find("http://"), std::string::npos);
    EXPECT_EQ(other_origins.find("https://"), std::string::npos);
    EXPECT_EQ(r.body.find("innerHTML"), std::string::npos);
    EXPECT_EQ(r.body.find("insertAdjacentHTML"), std::string::npos);
    EXPECT_EQ(r.body.find("document.write"), std::string::npos);
    EXPECT_EQ(call(std::string(e.target) + "?x=1").status(), 400);
    EXPECT_EQ(call(e.target, Method::kHead).status(), 200);
  }
  const std::string page = call("/console").body;
  EXPECT_EQ(page.find("<style"), std::string::npos);
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_EQ(page.find(" style="), std::string::npos);
  EXPECT_FALSE(std::regex_search(page, std::regex(" on[a-z]+=")));  // no onclick= and the like
  EXPECT_EQ(call("/console/nothing.js").status(), 404);
}

TEST(SegmentApiWithoutSegments, RoutesAre404) {
  testing::use_own_host_guard_scope();
  TempDir dir;
  service::ServiceOptions options;
  options.registry.data_dir = dir.path() / "data";
  options.registry.host_dir = dir.path();  // this test's own host
  Result<std::unique_ptr<service::Service>> service = service::Service::create(std::move(options));
  ASSERT_TRUE(service.ok());
  ASSERT_TRUE((*service)->start().ok());
  testing::OpsStack stack(**service, nullptr, nullptr, std::string(kToken));
  Api api(stack.operations);
  ApiResponse r;
  OutBuf body;
  ApiScratch scratch;
  api.handle(Method::kGet, "/v1/segments", r, body, scratch);
  EXPECT_EQ(r.status, 404);
  (*service)->stop();
}

}  // namespace
}  // namespace flurry::http

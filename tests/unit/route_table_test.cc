// The HTTP route table alone (routes.h): which entry serves a path when patterns share a prefix,
// when a literal pattern is shadowed by an earlier {name} pattern, and which methods an entry
// takes. Handlers here only record that they ran; no operations are called.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "http/api.h"
#include "http/routes.h"
#include "ops/authorizer.h"
#include "ops/deferral.h"

namespace flurry::http {
namespace {

struct Outcome {
  Route route = Route::kOther;
  int status = 200;
  std::string ran;  // the pattern of the handler that ran, empty when none did
  std::string param;
  bool allow = false;
  bool allow_post = false;
  std::string body;
  bool www_authenticate = false;
};

const std::string kAdminToken = "admin-0123456789abcdef0123456789abcdef";
const std::string kReadToken = "readr-0123456789abcdef0123456789abcdef";

class RouteTableTest : public ::testing::Test {
 protected:
  void add(Route route, Methods methods, std::string_view pattern, Access access = {}) {
    table_.add(route, methods, pattern, access, [this, p = std::string(pattern)](RouteCall& c) {
      ran_ = p;
      param_ = std::string(c.params[0]);
    });
  }

  Outcome dispatch(std::string_view path, Method method = Method::kGet,
                   std::string_view authorization = {}) {
    ran_.clear();
    param_.clear();
    const ApiRequest request{method, path, authorization, {}};
    ApiResponse response;
    OutBuf body;
    ops::Deferral deferral;
    RouteCall call{request, path, {}, {}, response, body, scratch_, Blocking::kAllowed, deferral};
    table_.dispatch(call);
    return Outcome{response.route,
                   response.status,
                   ran_,
                   param_,
                   response.allow,
                   response.allow_post,
                   std::string(body.view()),
                   response.www_authenticate};
  }

  ops::Authorizer authorizer_{
      {{kAdminToken, {ops::Scope::kAdmin}}, {kReadToken, {ops::Scope::kRead}}}, {ops::Scope::kIds}};
  RouteTable table_{authorizer_};
  ApiScratch scratch_;
  std::string ran_;
  std::string param_;
};

TEST_F(RouteTableTest, APathThatIsAPrefixOfAnotherGoesToItsOwnRoute) {
  add(Route::kIds, Methods::kGetHead, "/v1/ids");
  add(Route::kIdDecode, Methods::kGetHead, "/v1/ids/{id}");
  add(Route::kLayout, Methods::kGetHead, "/v1/layout");

  Outcome o = dispatch("/v1/ids");
  EXPECT_EQ(o.route, Route::kIds);
  EXPECT_EQ(o.ran, "/v1/ids");

  o = dispatch("/v1/ids/123");
  EXPECT_EQ(o.route, Route::kIdDecode);
  EXPECT_EQ(o.ran, "/v1/ids/{id}");
  EXPECT_EQ(o.param, "123");

  // An empty last segment is still the {id} route (its handler refuses the empty ID).
  o = dispatch("/v1/ids/");
  EXPECT_EQ(o.ran, "/v1/ids/{id}");
  EXPECT_EQ(o.param, "");

  // Neither a prefix of /v1/ids nor /v1/ids with more after it is /v1/ids.
  for (std::string_view path :
       {"/v1/id", "/v1/idsx", "/v1/ids/1/2", "/v1", "/", "//v1/ids", "/v1//ids", "/V1/ids"}) {
    SCOPED_TRACE(path);
    o = dispatch(path);
    EXPECT_EQ(o.status, 404);
    EXPECT_EQ(o.route, Route::kOther);
    EXPECT_EQ(o.ran, "");
    EXPECT_NE(o.body.find("no such route"), std::string::npos) << o.body;
  }
}

TEST_F(RouteTableTest, ALiteralShadowedByAnEarlierPatternIsServedByThatPattern) {
  // The first pattern that matches serves, whether or not a later one is literal.
  add(Route::kSegmentTag, Methods::kGetHead, "/v1/segments/{tag}");
  add(Route::kSegmentList, Methods::kGetHead, "/v1/segments/new");
  add(Route::kHealthz, Methods::kGetHead, "/healthz");
  add(Route::kReadyz, Methods::kGetHead, "/healthz");  // a duplicate: never served

  Outcome o = dispatch("/v1/segments/new");
  EXPECT_EQ(o.route, Route::kSegmentTag);
  EXPECT_EQ(o.param, "new");
  o = dispatch("/healthz");
  EXPECT_EQ(o.route, Route::kHealthz);
}

TEST_F(RouteTableTest, AnEntryTakesOnlyItsMethods) {
  add(Route::kIds, Methods::kGetHead, "/v1/ids");
  add(Route::kSegmentList, Methods::kGetHeadPost, "/v1/segments");
  add(Route::kIdDecode, Methods::kGetHead, "/v1/ids/{id}");

  for (Method m : {Method::kGet, Method::kHead}) {
    EXPECT_EQ(dispatch("/v1/ids", m).ran, "/v1/ids");
    EXPECT_EQ(dispatch("/v1/segments", m).ran, "/v1/segments");
  }
  for (Method m : {Method::kPost, Method::kOther}) {
    for (std::string_view path : {"/v1/ids", "/v1/ids/5"}) {
      SCOPED_TRACE(path);
      const Outcome o = dispatch(path, m);
      EXPECT_EQ(o.status, 405);
      EXPECT_TRUE(o.allow);
      EXPECT_FALSE(o.allow_post);
      EXPECT_EQ(o.ran, "");
      EXPECT_NE(o.body.find("only GET and HEAD are allowed here"), std::string::npos) << o.body;
      EXPECT_NE(o.route, Route::kOther);  // the route's metrics label, not "other"
    }
  }
  EXPECT_EQ(dispatch("/v1/segments", Method::kPost).ran, "/v1/segments");
  const Outcome o = dispatch("/v1/segments", Method::kOther);
  EXPECT_EQ(o.status, 405);
  EXPECT_TRUE(o.allow_post);
  EXPECT_EQ(o.ran, "");
}

// The scope is checked by the table, before the handler, per method: an open scope runs the
// handler without a token; a closed one answers 401 (with WWW-Authenticate) without one, 403
// with a token that lacks the scope; 405 comes before any of it.
TEST_F(RouteTableTest, TheTableChecksEachMethodsScopeBeforeTheHandler) {
  add(Route::kSegmentList, Methods::kGetHeadPost, "/v1/segments",
      {ops::Scope::kRead, ops::Scope::kAdmin});
  add(Route::kIds, Methods::kGetHead, "/v1/ids", {ops::Scope::kIds});
  add(Route::kHealthz, Methods::kGetHead, "/healthz", {ops::Scope::kNone});

  EXPECT_EQ(dispatch("/v1/ids").ran, "/v1/ids");    // open
  EXPECT_EQ(dispatch("/healthz").ran, "/healthz");  // never needs one
  Outcome o = dispatch("/v1/segments");             // read: not open here
  EXPECT_EQ(o.status, 401);
  EXPECT_TRUE(o.www_authenticate);
  EXPECT_EQ(o.ran, "");
  EXPECT_NE(o.body.find("\"reason\":\"TOKEN_MISSING\""), std::string::npos) << o.body;
  EXPECT_EQ(dispatch("/v1/segments", Method::kGet, "Bearer " + kReadToken).ran, "/v1/segments");
  EXPECT_EQ(dispatch("/v1/segments", Method::kHead, "Bearer " + kReadToken).ran, "/v1/segments");

  o = dispatch("/v1/segments", Method::kPost, "Bearer " + kReadToken);
  EXPECT_EQ(o.status, 403);
  EXPECT_FALSE(o.www_authenticate);
  EXPECT_EQ(o.ran, "");
  EXPECT_NE(o.body.find("\"code\":\"PERMISSION_DENIED\",\"reason\":\"SCOPE_MISSING\""),
            std::string::npos)
      << o.body;
  o = dispatch("/v1/segments", Method::kPost);
  EXPECT_EQ(o.status, 401);
  EXPECT_EQ(dispatch("/v1/segments", Method::kPost, "Bearer " + kAdminToken).ran, "/v1/segments");
  // The admin token has no read scope.
  EXPECT_EQ(dispatch("/v1/segments", Method::kGet, "Bearer " + kAdminToken).status, 403);

  o = dispatch("/v1/ids", Method::kPost);
  EXPECT_EQ(o.status, 405);
  EXPECT_EQ(o.ran, "");
}

// A call its operation defers is finished by the closure the handler built (RouteCall::run) over
// the values it parsed: the route is matched, the credential admitted and the request parsed
// once; only the operation runs again, where it may block. A token revoked meanwhile and the
// request's buffers reused for another request change nothing, and the new text's credential is
// never compared.
TEST_F(RouteTableTest, ADeferredCallResumesItsClosureWithoutParsingRoutingOrAdmittingAgain) {
  int parsed = 0;
  std::vector<Blocking> ran;
  table_.add(Route::kSegmentTag, Methods::kGetHead, "/v1/segments/{tag}", {ops::Scope::kRead},
             [&](RouteCall& c) {
               ++parsed;
               c.run([&ran, tag = std::string(c.params[0])](RouteCall& r) {
                 ran.push_back(r.blocking);
                 if (r.blocking == Blocking::kNever) {
                   // What an operation answers when it would wait: the pool is named.
                   r.deferral.pool = ops::Pool::kStore;
                   r.fail(Status(Reason::kWouldBlock, "the store is slow"));
                   return;
                 }
                 r.response.content_type = "text/plain";
                 r.body.append(tag);
               });
             });
  std::string target = "/v1/segments/orders";
  std::string authorization = "Bearer " + kReadToken;
  const ApiRequest request{Method::kGet, target, authorization, {}};
  ApiResponse deferred;
  OutBuf body;
  RouteCall call{request,          target,           {}, {}, deferred, body, scratch_,
                 Blocking::kNever, deferred.deferral};
  table_.dispatch(call);
  ASSERT_TRUE(deferred.deferred) << body.view();
  ASSERT_TRUE(deferred.resume);
  EXPECT_EQ(deferred.deferral.pool, ops::Pool::kStore);
  EXPECT_EQ(body.view(), "");

  // Before the pool runs it: the token is revoked, the connection's buffers hold another request.
  authorizer_.replace({});
  target.assign("/v1/segments/other");
  authorization.assign("Bearer wrong-token-0123456789abcdef0123456789");
  ApiResponse done;
  OutBuf done_body;
  ApiScratch scratch;
  Api::resume(deferred, Method::kGet, done, done_body, scratch);
  EXPECT_EQ(done.status, 200) << done_body.view();
  EXPECT_FALSE(done.deferred);
  EXPECT_EQ(done.route, Route::kSegmentTag);
  EXPECT_EQ(done_body.view(), "orders");
  EXPECT_EQ(parsed, 1);
  EXPECT_EQ(ran, (std::vector<Blocking>{Blocking::kNever, Blocking::kAllowed}));
  EXPECT_EQ(authorizer_.guesses(), 0u);  // no token was compared and found unknown

  // The same route now refuses a new call: the revocation took effect for what comes next.
  EXPECT_EQ(dispatch("/v1/segments/orders", Method::kGet, "Bearer " + kReadToken).status, 403);
}

}  // namespace
}  // namespace flurry::http

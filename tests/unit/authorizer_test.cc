// The authorizer (flurry/ops/authorizer.h) alone, on a fake monotonic clock: scopes, open
// scopes, every refusal with its code and reason, the unknown token's delay, reloading, and no
// token in any message. Behaviour only: timing is not measured here.
#include "flurry/ops/authorizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"

namespace flurry::ops {
namespace {

using std::chrono::milliseconds;
using testing::FakeMonotonicClock;

// Four tokens of the same length (a comparison that stopped at the first difference, or at the
// first match, would still give the same answers: these tests pin the answers).
const std::string kAdmin = "admin-0123456789abcdef0123456789abcdef";
const std::string kReader = "readr-0123456789abcdef0123456789abcdef";
const std::string kIssuer = "issue-0123456789abcdef0123456789abcdef";
const std::string kDecoder = "decod-0123456789abcdef0123456789abcdef";

std::string bearer(const std::string& token) {
  return "Bearer " + token;
}

server::TokenList tokens() {
  return {{kReader, {Scope::kRead}},
          {kIssuer, {Scope::kIds, Scope::kRead}},
          {kDecoder, {Scope::kOrdersDecode}},
          {kAdmin, server::kAdminTokenScopes}};
}

class AuthorizerTest : public ::testing::Test {
 protected:
  Status admit(Authorizer& a, const std::string& credential, Scope scope) {
    Deferral d;
    Status st = a.admit(credential, scope, Blocking::kNever, d);
    messages_.push_back(st.message());
    return st;
  }
  // Every message seen holds no token, not even a part of one.
  void expect_no_token_in_messages() {
    for (const std::string& m : messages_) {
      for (const std::string& t : {kAdmin, kReader, kIssuer, kDecoder}) {
        EXPECT_EQ(m.find(t.substr(6)), std::string::npos) << m;
      }
    }
  }

  FakeMonotonicClock clock_;
  std::vector<std::string> messages_;
};

TEST_F(AuthorizerTest, EachTokenHasItsScopesAndNoOther) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  EXPECT_TRUE(admit(a, bearer(kReader), Scope::kRead).ok());
  EXPECT_TRUE(admit(a, bearer(kIssuer), Scope::kIds).ok());
  EXPECT_TRUE(admit(a, bearer(kIssuer), Scope::kRead).ok());
  EXPECT_TRUE(admit(a, bearer(kDecoder), Scope::kOrdersDecode).ok());
  EXPECT_TRUE(admit(a, bearer(kAdmin), Scope::kAdmin).ok());
  EXPECT_TRUE(admit(a, bearer(kAdmin), Scope::kOrdersDecode).ok());
  const struct {
    const std::string& token;
    Scope scope;
  } refused[] = {{kReader, Scope::kIds},   {kReader, Scope::kAdmin}, {kIssuer, Scope::kAdmin},
                 {kDecoder, Scope::kRead}, {kAdmin, Scope::kIds},    {kAdmin, Scope::kRead}};
  for (const auto& r : refused) {
    const Status st = admit(a, bearer(r.token), r.scope);
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << server::to_string(r.scope);
    EXPECT_EQ(st.reason(), Reason::kScopeMissing);
    EXPECT_EQ(st.message(), "the token does not have scope " +
                                std::string(server::to_string(r.scope)) +
                                ", which this call needs");
  }
  expect_no_token_in_messages();
}

TEST_F(AuthorizerTest, TheRightTokenIsAdmittedAndRemembered) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  Deferral d;
  EXPECT_TRUE(a.admit(bearer(kAdmin), Scope::kAdmin, Blocking::kNever, d).ok());
  EXPECT_TRUE(d.admitted);
  Deferral spaced;
  EXPECT_TRUE(a.admit("  bearer \t" + kAdmin + " ", Scope::kAdmin, Blocking::kNever, spaced).ok());
  // A deferral that was admitted is not compared again.
  EXPECT_TRUE(a.admit("", Scope::kAdmin, Blocking::kNever, d).ok());
}

TEST_F(AuthorizerTest, OpenScopesNeedNoTokenAndKNoneNever) {
  Authorizer open(tokens(), server::kDefaultOpenScopes, clock_);
  EXPECT_FALSE(open.needs_token(Scope::kIds));
  EXPECT_FALSE(open.needs_token(Scope::kRead));
  EXPECT_TRUE(open.needs_token(Scope::kAdmin));
  EXPECT_TRUE(open.needs_token(Scope::kOrdersDecode));
  EXPECT_TRUE(admit(open, "", Scope::kIds).ok());
  // Even a token the server does not know: the scope is open, nothing is compared.
  EXPECT_TRUE(admit(open, "Bearer whatever", Scope::kRead).ok());
  EXPECT_EQ(admit(open, "", Scope::kAdmin).code(), StatusCode::kUnauthenticated);

  Authorizer closed(tokens(), ScopeSet{}, clock_);
  EXPECT_TRUE(closed.needs_token(Scope::kIds));
  EXPECT_FALSE(closed.needs_token(Scope::kNone));
  EXPECT_TRUE(admit(closed, "", Scope::kNone).ok());
  const Status st = admit(closed, "", Scope::kIds);
  EXPECT_EQ(st.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(st.reason(), Reason::kTokenMissing);
  EXPECT_EQ(st.message(),
            "this call needs a token with scope ids: send Authorization: Bearer <token>");
}

TEST_F(AuthorizerTest, MalformedCredentialsAreRefusedAtOnce) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  for (const std::string& bad : {std::string(), std::string("Basic abc"), std::string("Bearer"),
                                 std::string("Bearer \t "), kAdmin}) {
    const Status st = admit(a, bad, Scope::kAdmin);
    EXPECT_EQ(st.code(), StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(st.reason(), Reason::kTokenMissing) << bad;
  }
  expect_no_token_in_messages();
}

TEST_F(AuthorizerTest, AScopeNoTokenHasIsRefusedSayingHowToGrantIt) {
  Authorizer none({}, ScopeSet{}, clock_);
  Status st = admit(none, bearer(kAdmin), Scope::kAdmin);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(st.reason(), Reason::kScopeMissing);
  EXPECT_NE(st.message().find("token_file"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("admin_token_file"), std::string::npos) << st.message();
  EXPECT_FALSE(none.granted(Scope::kAdmin));
  // Only admin and orders:decode come with admin_token_file.
  st = admit(none, "", Scope::kIds);
  EXPECT_EQ(st.reason(), Reason::kScopeMissing);
  EXPECT_EQ(st.message().find("admin_token_file"), std::string::npos) << st.message();
  Authorizer readers({{kReader, {Scope::kRead}}}, ScopeSet{}, clock_);
  EXPECT_EQ(admit(readers, bearer(kReader), Scope::kAdmin).reason(), Reason::kScopeMissing);
  EXPECT_TRUE(readers.granted(Scope::kRead));
  EXPECT_FALSE(readers.granted(Scope::kAdmin));
}

// An unknown token under Blocking::kNever: deferred to the store pool with its refusal
// (UNAUTHENTICATED / TOKEN_UNKNOWN); until the delay has passed every other unknown token is
// UNAVAILABLE at once, while a right token is still admitted (a client with a stale token must
// not hold back the others); the deferred call waits on the clock and answers without comparing
// again.
TEST_F(AuthorizerTest, UnknownTokenIsRefusedLateAndHoldsOffOtherGuessesOnly) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  Deferral d;
  const Status first =
      a.admit(bearer("guess-0123456789abcdef0123456789abcdef"), Scope::kAdmin, Blocking::kNever, d);
  EXPECT_EQ(first.reason(), Reason::kWouldBlock);
  EXPECT_EQ(d.pool, Pool::kStore);
  EXPECT_EQ(d.refusal.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(d.refusal.reason(), Reason::kTokenUnknown);
  EXPECT_EQ(d.not_before, clock_.now() + Authorizer::kFailedTokenDelay);
  for (const std::string& next :
       {std::string("Bearer another"), bearer("guess-0123456789abcdef0123456789abcdee")}) {
    const Status held = admit(a, next, Scope::kAdmin);
    EXPECT_EQ(held.code(), StatusCode::kUnavailable);
    EXPECT_NE(held.message().find("unknown token"), std::string::npos);
  }
  EXPECT_TRUE(admit(a, bearer(kAdmin), Scope::kAdmin).ok());
  Status refused;
  std::atomic<bool> answered{false};
  std::thread pool([&] {
    refused = a.admit(bearer("guess"), Scope::kAdmin, Blocking::kAllowed, d);
    answered = true;
  });
  ASSERT_TRUE(clock_.await_waiters(1));
  clock_.advance(Authorizer::kFailedTokenDelay - milliseconds(1));
  ASSERT_TRUE(clock_.await_waiters(1));
  EXPECT_FALSE(answered.load());
  clock_.advance(milliseconds(1));
  pool.join();
  EXPECT_EQ(refused.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(refused.message(), "the token is not one this server accepts");
  EXPECT_TRUE(admit(a, bearer(kAdmin), Scope::kAdmin).ok());
  expect_no_token_in_messages();
}

// Each configured token is matched exactly, a near miss of any of them is unknown.
TEST_F(AuthorizerTest, NearMissesOfEveryTokenAreUnknown) {
  for (const std::string& t : {kAdmin, kReader, kIssuer, kDecoder}) {
    std::string last = t;
    last.back() = last.back() == 'f' ? 'e' : 'f';
    for (const std::string& guess : {t.substr(0, t.size() - 1), t + "0", last, t.substr(1)}) {
      Authorizer a(tokens(), ScopeSet{}, clock_);
      Deferral d;
      const Status st = a.admit(bearer(guess), Scope::kRead, Blocking::kNever, d);
      EXPECT_EQ(st.reason(), Reason::kWouldBlock) << guess;
      EXPECT_EQ(d.refusal.reason(), Reason::kTokenUnknown) << guess;
    }
  }
}

TEST_F(AuthorizerTest, UnknownTokenWithBlockingAllowedWaitsHere) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  Status refused;
  std::thread caller([&] {
    Deferral d;
    refused = a.admit(bearer("nope"), Scope::kIds, Blocking::kAllowed, d);
  });
  ASSERT_TRUE(clock_.await_waiters(1));
  clock_.advance(Authorizer::kFailedTokenDelay);
  caller.join();
  EXPECT_EQ(refused.reason(), Reason::kTokenUnknown);
}

// Right tokens checked at once from many threads (tokens required for issuing) are all admitted:
// none is refused because another check was comparing at that moment.
TEST_F(AuthorizerTest, ManyRightTokensAtOnceAreAllAdmitted) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string credential = bearer(t % 2 == 0 ? kIssuer : kReader);
      for (int i = 0; i < 20000; ++i) {
        Deferral d;
        if (!a.admit(credential, Scope::kRead, Blocking::kNever, d).ok()) ++refused;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(refused.load(), 0);
}

TEST_F(AuthorizerTest, ReplacedTokensTakeEffectForTheNextCall) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  EXPECT_TRUE(a.granted(Scope::kAdmin));
  a.replace({{kReader, {Scope::kRead, Scope::kAdmin}}});
  EXPECT_TRUE(admit(a, bearer(kReader), Scope::kAdmin).ok());
  Deferral d;
  EXPECT_EQ(a.admit(bearer(kAdmin), Scope::kAdmin, Blocking::kNever, d).reason(),
            Reason::kWouldBlock);
  EXPECT_EQ(d.refusal.reason(), Reason::kTokenUnknown);
  a.replace({});
  EXPECT_FALSE(a.granted(Scope::kRead));
}

}  // namespace
}  // namespace flurry::ops

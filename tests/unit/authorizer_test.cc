// The authorizer (flurry/ops/authorizer.h) alone, on a fake monotonic clock: scopes, open
// scopes, every refusal with its code and reason, the unknown token's delay, reloading, and no
// token in any message. Behaviour only: timing is not measured here.
#include "ops/authorizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "fake_clock.h"
#include "ops/retry.h"

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

ops::TokenList tokens() {
  return {{kReader, {Scope::kRead}},
          {kIssuer, {Scope::kIds, Scope::kRead}},
          {kDecoder, {Scope::kOrdersDecode}},
          {kAdmin, ops::kAdminTokenScopes}};
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
    EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << ops::to_string(r.scope);
    EXPECT_EQ(st.reason(), Reason::kScopeMissing);
    EXPECT_EQ(st.message(), "the token does not have scope " +
                                std::string(ops::to_string(r.scope)) + ", which this call needs");
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
  Authorizer open(tokens(), ops::kDefaultOpenScopes, clock_);
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
  // The operations layer names no transport's header or metadata.
  EXPECT_EQ(st.message(), "this call needs a token with scope ids: send a bearer token");
}

TEST_F(AuthorizerTest, EachTransportWordsItsOwnCredential) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  const CredentialWords http{"Authorization: Bearer <token>", "the Authorization header"};
  const CredentialWords grpc{"authorization metadata: Bearer <token>",
                             "the authorization metadata"};
  Deferral d;
  EXPECT_EQ(a.admit("", Scope::kIds, Blocking::kNever, d, {}, http).message(),
            "this call needs a token with scope ids: send Authorization: Bearer <token>");
  EXPECT_EQ(a.admit("", Scope::kIds, Blocking::kNever, d, {}, grpc).message(),
            "this call needs a token with scope ids: send authorization metadata: Bearer <token>");
  EXPECT_EQ(a.admit("Basic abc", Scope::kIds, Blocking::kNever, d, {}, http).message(),
            "the Authorization header must be Bearer <token> with a token that has scope ids");
  EXPECT_EQ(a.admit("Basic abc", Scope::kIds, Blocking::kNever, d, {}, grpc).message(),
            "the authorization metadata must be Bearer <token> with a token that has scope ids");
  EXPECT_EQ(a.admit("Basic abc", Scope::kIds, Blocking::kNever, d).message(),
            "the credential must be Bearer <token> with a token that has scope ids");
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
// (UNAUTHENTICATED / TOKEN_UNKNOWN); a second one, within the brake's budget, is compared and
// deferred likewise, while a right token is still admitted at once; the deferred call waits on
// the clock and answers without comparing again.
TEST_F(AuthorizerTest, UnknownTokenIsRefusedLateAndRightTokensAreNot) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  Deferral d;
  const Status first =
      a.admit(bearer("guess-0123456789abcdef0123456789abcdef"), Scope::kAdmin, Blocking::kNever, d);
  EXPECT_EQ(first.reason(), Reason::kWouldBlock);
  EXPECT_EQ(d.pool, Pool::kStore);
  EXPECT_EQ(d.refusal.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(d.refusal.reason(), Reason::kTokenUnknown);
  EXPECT_EQ(d.not_before, clock_.now() + Authorizer::kFailedTokenDelay);
  Deferral second;
  EXPECT_EQ(a.admit(bearer("guess-0123456789abcdef0123456789abcdee"), Scope::kAdmin,
                    Blocking::kNever, second)
                .reason(),
            Reason::kWouldBlock);
  EXPECT_EQ(second.refusal.reason(), Reason::kTokenUnknown);
  EXPECT_EQ(a.guesses(), 2u);
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
  EXPECT_EQ(a.guesses(), 2u);  // the deferred call did not compare again
  EXPECT_TRUE(admit(a, bearer(kAdmin), Scope::kAdmin).ok());
  expect_no_token_in_messages();
}

// One client's guesses: GuessBrake::kClientBurst are compared, then it is braked: its tokens,
// wrong or right, are refused at once (UNAVAILABLE, saying when to retry) without being
// compared, so the refusal tells nothing. Another client is not held back, and the braked one
// gets kClientPerSecond guesses a second back. (Both showed a right token first, so the overall
// budget, which the guesses use up too, does not apply to them: this is the per-client one.)
TEST_F(AuthorizerTest, TheBrakeStopsOneClientsGuessesWithoutComparing) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  const std::string guesser = "192.0.2.7";
  auto guess = [&](const std::string& client, const std::string& token) {
    Deferral d;
    Status st = a.admit(bearer(token), Scope::kRead, Blocking::kNever, d, client);
    messages_.push_back(st.message());
    return st;
  };
  ASSERT_TRUE(guess(guesser, kReader).ok());
  ASSERT_TRUE(guess("192.0.2.8", kReader).ok());
  for (int i = 0; i < GuessBrake::kClientBurst; ++i) {
    EXPECT_EQ(guess(guesser, "wrong-" + std::to_string(i) + "-0123456789abcdef0123456789").reason(),
              Reason::kWouldBlock)
        << i;
  }
  EXPECT_EQ(a.guesses(), static_cast<std::uint64_t>(GuessBrake::kClientBurst));
  for (const std::string& token :
       {std::string("wrong-again-0123456789abcdef0123456789"), kReader}) {
    const Status braked = guess(guesser, token);
    EXPECT_EQ(braked.code(), StatusCode::kUnavailable);
    EXPECT_EQ(braked.reason(), Reason::kNone);
    EXPECT_NE(braked.message().find("the token was not checked: retry in 1 second"),
              std::string::npos)
        << braked.message();
    EXPECT_TRUE(ops::retry_advice(braked).retry);
  }
  EXPECT_EQ(a.guesses(), static_cast<std::uint64_t>(GuessBrake::kClientBurst));
  EXPECT_EQ(a.braked(), 2u);
  // Another address: its right token at once, its wrong one compared.
  EXPECT_TRUE(guess("192.0.2.8", kReader).ok());
  EXPECT_EQ(guess("192.0.2.8", "wrong-other-0123456789abcdef0123456789").reason(),
            Reason::kWouldBlock);
  // One interval later, one more guess of the braked client is compared, and only one.
  clock_.advance(milliseconds(1000 / GuessBrake::kClientPerSecond));
  EXPECT_EQ(guess(guesser, "wrong-later-0123456789abcdef0123456789").reason(), Reason::kWouldBlock);
  EXPECT_EQ(guess(guesser, kReader).code(), StatusCode::kUnavailable);
  // Once its budget is back, its right token is admitted.
  clock_.advance(milliseconds(1000 / GuessBrake::kClientPerSecond));
  EXPECT_TRUE(guess(guesser, kReader).ok());
  expect_no_token_in_messages();
}

// All clients together: GuessBrake::kOverallBurst guesses, then kOverallPerSecond a second, from
// however many addresses. While that budget is used up, a client that presented a right token
// before is still admitted at once (and its own guesses compared); one never seen with a right
// token is refused without comparing.
TEST_F(AuthorizerTest, TheOverallBrakeSparesClientsSeenWithARightToken) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  auto call = [&](const std::string& client, const std::string& token) {
    Deferral d;
    return a.admit(bearer(token), Scope::kIds, Blocking::kNever, d, client);
  };
  ASSERT_TRUE(call("10.0.0.1", kIssuer).ok());  // a client with a token, trusted from now on
  for (int i = 0; i < GuessBrake::kOverallBurst; ++i) {
    EXPECT_EQ(
        call("198.51.100." + std::to_string(i), "wrong-0123456789abcdef0123456789ab").reason(),
        Reason::kWouldBlock)
        << i;
  }
  const Status stranger = call("198.51.100.200", "wrong-0123456789abcdef0123456789ab");
  EXPECT_EQ(stranger.code(), StatusCode::kUnavailable);
  EXPECT_EQ(call("198.51.100.201", kIssuer).code(), StatusCode::kUnavailable);
  EXPECT_EQ(a.guesses(), static_cast<std::uint64_t>(GuessBrake::kOverallBurst));
  // The trusted client: admitted at once (not deferred), its own guess compared.
  Deferral d;
  EXPECT_TRUE(a.admit(bearer(kIssuer), Scope::kIds, Blocking::kNever, d, "10.0.0.1").ok());
  EXPECT_TRUE(d.admitted);
  EXPECT_EQ(call("10.0.0.1", "wrong-0123456789abcdef0123456789ab").reason(), Reason::kWouldBlock);
  // Trust ends kTrustedFor after the last right token: then the overall budget holds it back too.
  clock_.advance(GuessBrake::kTrustedFor);
  for (int i = 0; i < GuessBrake::kOverallBurst; ++i) {
    EXPECT_EQ(call("203.0.113." + std::to_string(i), "wrong-0123456789abcdef0123456789ab").reason(),
              Reason::kWouldBlock);
  }
  EXPECT_EQ(call("10.0.0.1", kIssuer).code(), StatusCode::kUnavailable);
}

// The probe of issue 32 on the fake clock: 8 clients on one address and 8 on others guess as
// fast as they can for 3 s. Compared guesses stay within what the docs promise: per address
// kClientBurst + kClientPerSecond * 3, in all kOverallBurst + kOverallPerSecond * 3.
TEST_F(AuthorizerTest, GuessesOverTimeStayWithinTheBudgets) {
  Authorizer a(tokens(), ScopeSet{}, clock_);
  std::map<std::string, int> compared;
  for (int ms = 0; ms < 3000; ++ms) {
    for (int c = 0; c < 16; ++c) {
      const std::string client = c < 8 ? std::string("127.0.0.9") : "10.1.1." + std::to_string(c);
      Deferral d;
      const Status st = a.admit(bearer("wrong-0123456789abcdef0123456789ab"), Scope::kIds,
                                Blocking::kNever, d, client);
      if (st.reason() == Reason::kWouldBlock) ++compared[client];
    }
    clock_.advance(milliseconds(1));
  }
  int total = 0;
  for (const auto& [client, n] : compared) {
    EXPECT_LE(n, GuessBrake::kClientBurst + 3 * GuessBrake::kClientPerSecond) << client;
    total += n;
  }
  EXPECT_LE(total, GuessBrake::kOverallBurst + 3 * GuessBrake::kOverallPerSecond);
  // And the budget is used, not just refused: at least the sustained rate got through.
  EXPECT_GE(total, 3 * GuessBrake::kOverallPerSecond);
  EXPECT_EQ(a.guesses(), static_cast<std::uint64_t>(total));
  EXPECT_EQ(a.braked(), 16u * 3000u - static_cast<std::uint64_t>(total));
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

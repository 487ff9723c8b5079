#include "ops/authorizer.h"

#include <chrono>
#include <string>
#include <utility>

#include "core/ascii.h"

namespace flurry::ops {
namespace {

// 1 when `presented` is `expected`, else 0; the time depends on the expected token's length
// only, whatever is presented.
unsigned same_token(std::string_view presented, std::string_view expected) noexcept {
  unsigned diff = presented.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    diff |= static_cast<unsigned char>(p ^ expected[i]);
  }
  // 0 -> 1, anything else -> 0, without a branch.
  return 1U & ((diff - 1U) >> 8U);
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string scope_name(Scope scope) {
  return "scope " + std::string(to_string(scope));
}

}  // namespace

Authorizer::Authorizer(ops::TokenList tokens, ScopeSet open, MonotonicClock& clock)
    : open_(open),
      clock_(clock),
      tokens_(std::make_shared<const ops::TokenList>(std::move(tokens))),
      brake_(clock) {}

std::shared_ptr<const ops::TokenList> Authorizer::tokens() const {
  MutexLock lock(mu_);
  return tokens_;
}

void Authorizer::replace(ops::TokenList tokens) {
  auto fresh = std::make_shared<const ops::TokenList>(std::move(tokens));
  MutexLock lock(mu_);
  tokens_.swap(fresh);
}

bool Authorizer::granted(Scope scope) const {
  return ops::token_with(*tokens(), scope) != nullptr;
}

Status Authorizer::admit(std::string_view credential, Scope scope, Blocking blocking,
                         Deferral& deferral, std::string_view client,
                         const CredentialWords& words) {
  if (deferral.admitted) return OkStatus();
  if (!deferral.refusal.ok()) {
    // An unknown token compared before the call was deferred: answered once its delay is over.
    clock_.wait_until(deferral.not_before, {});
    return deferral.refusal;
  }
  if (!needs_token(scope)) return OkStatus();
  const std::shared_ptr<const ops::TokenList> tokens = this->tokens();
  if (ops::token_with(*tokens, scope) == nullptr) {
    const bool admin_file_grants = ops::kAdminTokenScopes.has(scope);
    return Status(Reason::kScopeMissing,
                  "this call needs a token with " + scope_name(scope) +
                      " and this server has none: list one in token_file (FLURRY_TOKEN_FILE, "
                      "--token-file) as <token> " +
                      std::string(to_string(scope)) +
                      (admin_file_grants ? ", or set admin_token_file" : "") + ", and send it as " +
                      std::string(words.how_to_send));
  }
  credential = trim(credential);
  if (credential.empty()) {
    return Status(Reason::kTokenMissing, "this call needs a token with " + scope_name(scope) +
                                             ": send " + std::string(words.how_to_send));
  }
  const std::size_t space = credential.find_first_of(" \t");
  const std::string_view scheme = credential.substr(0, space);
  const std::string_view token =
      space == std::string_view::npos ? std::string_view() : trim(credential.substr(space));
  if (!internal::iequals(scheme, "Bearer") || token.empty()) {
    return Status(Reason::kTokenMissing, std::string(words.carrier) +
                                             " must be Bearer <token> with a token that has " +
                                             scope_name(scope));
  }
  // The brake first, then the comparison and the charge under its one lock (well under a
  // microsecond for a few hundred tokens), so that no two guesses pass on one unit of budget.
  // A braked client's token is not compared: the refusal is the same for a right and a wrong
  // one, and tells nothing.
  MutexLock hold(brake_.mutex());
  if (const GuessBrake::Verdict verdict = brake_.check(client); verdict.braked) {
    hold.unlock();
    const auto seconds = std::chrono::ceil<std::chrono::seconds>(verdict.retry_after).count();
    return Status(StatusCode::kUnavailable,
                  "too many unknown tokens from this address or from all clients (the token "
                  "brake); the token was not checked: retry in " +
                      std::to_string(seconds) + (seconds == 1 ? " second" : " seconds"));
  }
  // Every configured token is compared, whichever matches: the time says nothing about which.
  unsigned matched = 0;
  std::uint8_t scopes = 0;
  for (const ops::TokenEntry& entry : *tokens) {
    const unsigned same = same_token(token, entry.token);
    matched |= same;
    scopes |= static_cast<std::uint8_t>(entry.scopes.bits() & (0U - same));
  }
  if (matched != 0) {
    brake_.matched(client);
    hold.unlock();
    if (!ScopeSet::of_bits(scopes).has(scope)) {
      return Status(Reason::kScopeMissing,
                    "the token does not have " + scope_name(scope) + ", which this call needs");
    }
    deferral.admitted = true;
    return OkStatus();
  }
  brake_.guessed(client);
  hold.unlock();
  const MonoTime not_before = clock_.now() + kFailedTokenDelay;
  Status refusal(Reason::kTokenUnknown, "the token is not one this server accepts");
  if (blocking == Blocking::kAllowed) {
    clock_.wait_until(not_before, {});
    return refusal;
  }
  // Waiting is for the store pool, never for the transport's thread.
  deferral = Deferral{};
  deferral.pool = Pool::kStore;
  deferral.refusal = std::move(refusal);
  deferral.not_before = not_before;
  return Status(Reason::kWouldBlock, "an unknown token is answered after a delay");
}

}  // namespace flurry::ops

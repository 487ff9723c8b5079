#include "flurry/ops/admin.h"

#include <string>
#include <utility>

#include "server/text.h"

namespace flurry::ops {
namespace {

bool same_token(std::string_view presented, std::string_view expected) noexcept {
  // Constant time in the expected token's length, whatever is presented.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    diff = static_cast<unsigned char>(diff | (p ^ expected[i]));
  }
  return diff == 0;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::int64_t ticks(MonoTime t) noexcept {
  return t.time_since_epoch().count();
}

}  // namespace

AdminAuthorizer::AdminAuthorizer(std::string token, MonotonicClock& clock)
    : token_(std::move(token)), clock_(clock) {}

Status AdminAuthorizer::admit(std::string_view credential, const AdminAction& action,
                              Blocking blocking, Deferral& deferral) {
  if (deferral.admitted) return OkStatus();
  if (!deferral.refusal.ok()) {
    // A wrong token compared before the call was deferred: answered once its delay is over.
    clock_.wait_until(deferral.not_before, {});
    return deferral.refusal;
  }
  if (token_.empty()) {
    return Status(StatusCode::kPermissionDenied,
                  std::string(action.plural) +
                      " is disabled on this server: set admin_token_file "
                      "(FLURRY_ADMIN_TOKEN_FILE, --admin-token-file) to a file holding a token and "
                      "send it as Authorization: Bearer <token>, or " +
                      std::string(action.alternative));
  }
  credential = trim(credential);
  if (credential.empty()) {
    return Status(StatusCode::kUnauthenticated,
                  std::string(action.singular) +
                      " needs the admin token: send Authorization: Bearer <token>");
  }
  const std::size_t space = credential.find_first_of(" \t");
  const std::string_view scheme = credential.substr(0, space);
  const std::string_view token =
      space == std::string_view::npos ? std::string_view() : trim(credential.substr(space));
  if (!server::iequals(scheme, "Bearer") || token.empty()) {
    return Status(StatusCode::kUnauthenticated,
                  "the Authorization header must be Bearer <token> with the admin token");
  }
  // One comparison at a time, and none while a wrong token is being answered: a guess that
  // finds the gate closed is refused without being compared, so no number of connections
  // guesses faster than one per kFailedTokenDelay, and no answer tells a wrong token sooner.
  const Status busy(StatusCode::kUnavailable,
                    "a wrong admin token was presented a moment ago and is still being answered; "
                    "retry in a second");
  if (ticks(clock_.now()) < refusing_until_.load(std::memory_order_acquire)) return busy;
  bool open = false;
  if (!comparing_.compare_exchange_strong(open, true, std::memory_order_acq_rel)) return busy;
  if (same_token(token, token_)) {
    comparing_.store(false, std::memory_order_release);
    deferral.admitted = true;
    return OkStatus();
  }
  const MonoTime not_before = clock_.now() + kFailedTokenDelay;
  refusing_until_.store(ticks(not_before), std::memory_order_release);
  comparing_.store(false, std::memory_order_release);
  Status refusal(StatusCode::kPermissionDenied, "the admin token is not the right one");
  if (blocking == Blocking::kAllowed) {
    clock_.wait_until(not_before, {});
    return refusal;
  }
  // Waiting is for the store pool, never for the transport's thread.
  deferral = Deferral{};
  deferral.pool = Pool::kStore;
  deferral.refusal = std::move(refusal);
  deferral.not_before = not_before;
  return Status(Reason::kWouldBlock, "a wrong admin token is answered after a delay");
}

}  // namespace flurry::ops

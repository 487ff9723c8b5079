// The admin credential, checked in one place for every transport and every guarded operation
// (creating a segment tag, decoding an order number). Owned by the operations layer: it does not
// depend on segment mode being configured.
//
// The credential is the text HTTP's Authorization header and gRPC's `authorization` metadata
// carry: "Bearer <token>". The token is kept here only, compared in constant time and never
// written anywhere. A wrong token is answered no sooner than kFailedTokenDelay later; while it
// is, every other attempt is refused (UNAVAILABLE) without being compared, so no number of
// connections guesses faster than one try per delay.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/clock.h"
#include "flurry/generator.h"  // Blocking
#include "flurry/ops/deferral.h"
#include "flurry/status.h"

namespace flurry::ops {

// What a guarded operation does, for its messages: "creating tags over HTTP", "creating a tag",
// and what to do instead when no token is configured.
struct AdminAction {
  std::string_view plural;
  std::string_view singular;
  std::string_view alternative;
};
inline constexpr AdminAction kCreateTagAction = {
    "creating tags over HTTP", "creating a tag",
    "create the tag with `flurry segment create` against the store"};
inline constexpr AdminAction kDecodeOrderAction = {
    "decoding order numbers over HTTP", "decoding an order number",
    "decode it with `flurry order decode --key-file FILE`"};

class AdminAuthorizer {
 public:
  static constexpr std::chrono::milliseconds kFailedTokenDelay{100};

  // `token` empty: every guarded operation is refused (PERMISSION_DENIED saying how to enable
  // it). `clock` must outlive this.
  explicit AdminAuthorizer(std::string token, MonotonicClock& clock = SteadyClock::instance());
  AdminAuthorizer(const AdminAuthorizer&) = delete;
  AdminAuthorizer& operator=(const AdminAuthorizer&) = delete;

  [[nodiscard]] bool enabled() const noexcept { return !token_.empty(); }

  // OK when `credential` is "Bearer <the token>" (scheme case-insensitive, blanks around
  // trimmed). At once otherwise: UNAUTHENTICATED (empty, or not Bearer <token>),
  // PERMISSION_DENIED (no token configured), UNAVAILABLE (another wrong token is being
  // answered). A wrong token: PERMISSION_DENIED "the admin token is not the right one", no
  // sooner than kFailedTokenDelay after it was compared: with Blocking::kNever this returns
  // UNAVAILABLE / WOULD_BLOCK having filled `deferral` (pool kStore, the refusal and when it
  // may be answered); with Blocking::kAllowed it waits on the clock. Called again with a
  // deferral that holds a refusal (kAllowed), it waits until then and returns the refusal
  // without comparing; with a deferral that says `admitted`, OK without comparing.
  [[nodiscard]] Status admit(std::string_view credential, const AdminAction& action,
                             Blocking blocking, Deferral& deferral);

 private:
  const std::string token_;
  MonotonicClock& clock_;
  // Held while a token is compared.
  std::atomic<bool> comparing_{false};
  // Until when (the clock's nanoseconds) a wrong token's refusal holds off every other attempt.
  std::atomic<std::int64_t> refusing_until_{0};
};

}  // namespace flurry::ops

// Who may call what: the bearer tokens and their scopes (flurry/server/tokens.h), checked in one
// place for every transport. HTTP's route table and gRPC's method table name the scope each
// route or method needs; this decides whether a call's credential carries it.
//
// The credential is the text HTTP's Authorization header and gRPC's `authorization` metadata
// carry: "Bearer <token>". The tokens are kept here only, compared in constant time with every
// configured token (no early exit that would tell which one matched, or where a guess went
// wrong) and never written anywhere. Before a token is compared the token brake (guess_brake.h)
// is asked: a client (peer address) that has used up its budget of wrong tokens, or any client
// not recently seen with a right token while all clients together have used up theirs, is
// refused at once with UNAVAILABLE and the time to wait, WITHOUT comparing the token, so that a
// refusal says nothing about it. A token compared and found unknown is answered no sooner than
// kFailedTokenDelay later (on the store pool, never on the transport's thread). A right token
// from a client that is not braked is admitted at once, whatever others are guessing. What keeps
// tokens from being guessed is their length and variety (tokens.h), not the brake.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "flurry/clock.h"
#include "flurry/generator.h"  // Blocking
#include "flurry/mutex.h"
#include "flurry/status.h"
#include "ops/deferral.h"
#include "ops/guess_brake.h"
#include "ops/tokens.h"

namespace flurry::ops {

using ops::Scope;
using ops::ScopeSet;

// How admit()'s messages name the credential: each transport words its own (HTTP its header,
// gRPC its metadata); the defaults name neither.
struct CredentialWords {
  // How to send a token, after "send" and "send it as": HTTP's "Authorization: Bearer <token>".
  std::string_view how_to_send = "a bearer token";
  // What must read "Bearer <token>": HTTP's "the Authorization header".
  std::string_view carrier = "the credential";
};

class Authorizer {
 public:
  static constexpr std::chrono::milliseconds kFailedTokenDelay{100};

  // `tokens`: what read_tokens() read (may be empty: then every scope that is not open is
  // refused, PERMISSION_DENIED saying how to configure a token). `open`: the scopes served
  // without a token (open_scopes). `clock` must outlive this.
  Authorizer(ops::TokenList tokens, ScopeSet open, MonotonicClock& clock = SteadyClock::instance());
  Authorizer(const Authorizer&) = delete;
  Authorizer& operator=(const Authorizer&) = delete;

  // Whether a call needing `scope` must present a token. Fixed for the server's life (only the
  // tokens are reloaded), so a route table may ask once, when it is built.
  [[nodiscard]] bool needs_token(Scope scope) const noexcept {
    return scope != Scope::kNone && !open_.has(scope);
  }

  // Whether some configured token has `scope` (for the start line: "tag creation enabled").
  [[nodiscard]] bool granted(Scope scope) const;

  // Replaces the tokens (SIGHUP): calls compared after this returns use the new ones.
  void replace(ops::TokenList tokens);

  // OK when `scope` needs no token, or `credential` is "Bearer <token>" (scheme
  // case-insensitive, blanks around trimmed) for a configured token that has `scope`. Otherwise,
  // at once: UNAUTHENTICATED / TOKEN_MISSING (no credential, or not Bearer <token>),
  // PERMISSION_DENIED / SCOPE_MISSING (no configured token has `scope`, or the token does not
  // have it), UNAVAILABLE when `client` is braked (GuessBrake; the token is not compared, the
  // message says how many seconds to wait). `client` is the caller's address without the port
  // (any stable text; "" for callers without one, which then share one budget). An unknown
  // token: UNAUTHENTICATED / TOKEN_UNKNOWN no sooner than kFailedTokenDelay after it was
  // compared: with Blocking::kNever this returns UNAVAILABLE / WOULD_BLOCK having filled
  // `deferral` (pool kStore, the refusal and when it may be answered); with Blocking::kAllowed it
  // waits on the clock. Called again with a deferral that holds a refusal (kAllowed), it waits
  // until then and returns the refusal without comparing; with a deferral that says `admitted`, OK
  // without comparing. No message holds the credential; `words` names it as the transport does.
  [[nodiscard]] Status admit(std::string_view credential, Scope scope, Blocking blocking,
                             Deferral& deferral, std::string_view client = {},
                             const CredentialWords& words = {});

  // The token brake's counters: tokens compared and found unknown, and tokens refused without
  // comparing, since start. Thread-safe.
  [[nodiscard]] std::uint64_t guesses() const { return brake_.guesses(); }
  [[nodiscard]] std::uint64_t braked() const { return brake_.braked(); }

 private:
  [[nodiscard]] std::shared_ptr<const ops::TokenList> tokens() const FLURRY_EXCLUDES(mu_);

  const ScopeSet open_;
  MonotonicClock& clock_;
  mutable Mutex mu_;
  // The pointer is guarded; the list it points to is never changed.
  std::shared_ptr<const ops::TokenList> tokens_ FLURRY_GUARDED_BY(mu_);
  // Asked before each comparison; its lock is held from the check to the charge.
  GuessBrake brake_;
};

}  // namespace flurry::ops

// The token brake: how many wrong tokens (guesses) the server compares, per client and in all.
// The Authorizer (authorizer.h) asks it before comparing a presented token, so one brake serves
// HTTP and gRPC alike.
//
// A guess is a token that was compared with the configured ones and matched none. Each client
// (the peer's address, without the port) may make kClientBurst guesses at once and then
// kClientPerSecond a second; all clients together kOverallBurst and then kOverallPerSecond a
// second. A client over either budget is braked: its token is not compared at all (a right one
// neither), so a braked answer says nothing about the token. The overall budget does not apply to
// a client that presented a right token within kTrustedFor ("trusted"): a flood of guesses from
// other addresses never locks out the clients that hold tokens. A trusted client's guesses still
// count against its own budget and the overall one.
//
// Budgets are kept as GCRA (a token bucket as one time per client): a client is braked while its
// "theoretical arrival time" is more than (burst - 1) intervals ahead of now. Only clients with a
// recent guess are kept (idle ones are swept as the table grows; the overall budget bounds how
// many new ones appear a second), and at most kMaxTrusted trusted ones. Time comes from the
// MonotonicClock given.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "flurry/clock.h"
#include "flurry/mutex.h"

namespace flurry::ops {

class GuessBrake {
 public:
  static constexpr int kClientPerSecond = 10;
  static constexpr int kClientBurst = 20;
  static constexpr int kOverallPerSecond = 10;
  static constexpr int kOverallBurst = 20;
  static constexpr std::chrono::minutes kTrustedFor{10};
  static constexpr std::size_t kMaxTrusted = 4096;

  // `clock` must outlive this.
  explicit GuessBrake(MonotonicClock& clock) : clock_(clock) {}
  GuessBrake(const GuessBrake&) = delete;
  GuessBrake& operator=(const GuessBrake&) = delete;

  // What check() decided.
  struct Verdict {
    bool braked = false;
    // When braked: how long until one more guess of this client would be compared (> 0).
    Nanos retry_after{0};
  };

  // Whether a token presented by `client` may be compared now. Not thread-safe on its own: the
  // Authorizer calls check(), compares, and then calls guessed() or matched() under one lock
  // (lock()), so that no two guesses are let through on one remaining unit of budget.
  [[nodiscard]] Verdict check(std::string_view client) FLURRY_REQUIRES(mu_);
  // The token `client` presented was compared and matched none: one guess is charged to the
  // client and to the overall budget.
  void guessed(std::string_view client) FLURRY_REQUIRES(mu_);
  // The token `client` presented was right: the client is trusted for kTrustedFor.
  void matched(std::string_view client) FLURRY_REQUIRES(mu_);

  // The mutex check(), guessed() and matched() are called under (hold it with a MutexLock).
  [[nodiscard]] Mutex& mutex() FLURRY_RETURN_CAPABILITY(mu_) { return mu_; }

  // Wrong tokens compared, and tokens refused without comparing, since start (for tests and
  // metrics). Thread-safe.
  [[nodiscard]] std::uint64_t guesses() const FLURRY_EXCLUDES(mu_);
  [[nodiscard]] std::uint64_t braked() const FLURRY_EXCLUDES(mu_);

 private:
  void forget_idle(std::int64_t now) FLURRY_REQUIRES(mu_);

  MonotonicClock& clock_;
  mutable Mutex mu_;
  // Overall GCRA time (the clock's nanoseconds).
  std::int64_t overall_tat_ FLURRY_GUARDED_BY(mu_) = 0;
  // Per client with a recent guess: its GCRA time.
  std::unordered_map<std::string, std::int64_t> clients_ FLURRY_GUARDED_BY(mu_);
  // clients_ is swept of idle clients when it reaches this size (then twice what is left, at
  // least kSweepAt): amortized constant time per guess, and no more clients kept than about
  // twice the ones with a recent guess.
  static constexpr std::size_t kSweepAt = 64;
  std::size_t sweep_at_ FLURRY_GUARDED_BY(mu_) = kSweepAt;
  // Per trusted client: until when it is trusted.
  std::unordered_map<std::string, std::int64_t> trusted_ FLURRY_GUARDED_BY(mu_);
  std::uint64_t guesses_ FLURRY_GUARDED_BY(mu_) = 0;
  std::uint64_t braked_ FLURRY_GUARDED_BY(mu_) = 0;
};

}  // namespace flurry::ops

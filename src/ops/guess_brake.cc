#include "ops/guess_brake.h"

#include <algorithm>

namespace flurry::ops {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;
constexpr std::int64_t kClientInterval = kSecond / GuessBrake::kClientPerSecond;
constexpr std::int64_t kClientTolerance = kClientInterval * (GuessBrake::kClientBurst - 1);
constexpr std::int64_t kOverallInterval = kSecond / GuessBrake::kOverallPerSecond;
constexpr std::int64_t kOverallTolerance = kOverallInterval * (GuessBrake::kOverallBurst - 1);

std::int64_t ticks(MonoTime t) noexcept {
  return t.time_since_epoch().count();
}

}  // namespace

GuessBrake::Verdict GuessBrake::check(std::string_view client) {
  const std::int64_t now = ticks(clock_.now());
  std::int64_t wait = 0;
  // Looked up only when they can matter: a right token's check, with no recent guesses, costs
  // no lookup (an IPv4 address fits std::string's inline buffer, so none allocates either).
  if (!clients_.empty()) {
    if (const auto it = clients_.find(std::string(client)); it != clients_.end()) {
      wait = it->second - kClientTolerance - now;
    }
  }
  if (const std::int64_t overall = overall_tat_ - kOverallTolerance - now; overall > wait) {
    const auto trusted = trusted_.find(std::string(client));
    if (trusted == trusted_.end() || trusted->second <= now) wait = overall;
  }
  if (wait <= 0) return {};
  ++braked_;
  return Verdict{true, Nanos(wait)};
}

void GuessBrake::guessed(std::string_view client) {
  const std::int64_t now = ticks(clock_.now());
  ++guesses_;
  overall_tat_ = std::max(overall_tat_, now) + kOverallInterval;
  if (clients_.size() >= sweep_at_) {
    forget_idle(now);
    sweep_at_ = std::max<std::size_t>(kSweepAt, 2 * clients_.size());
  }
  std::int64_t& tat = clients_[std::string(client)];
  tat = std::max(tat, now) + kClientInterval;
}

void GuessBrake::matched(std::string_view client) {
  const std::int64_t now = ticks(clock_.now());
  const std::int64_t until = now + std::chrono::duration_cast<Nanos>(kTrustedFor).count();
  const std::string key(client);
  if (const auto it = trusted_.find(key); it != trusted_.end()) {
    it->second = until;
    return;
  }
  if (trusted_.size() >= kMaxTrusted) {
    forget_idle(now);
    sweep_at_ = std::max<std::size_t>(kSweepAt, 2 * clients_.size());
  }
  // Still full of clients trusted now: this one waits until some expire (the overall budget
  // applies to it meanwhile).
  if (trusted_.size() < kMaxTrusted) trusted_.emplace(key, until);
}

void GuessBrake::forget_idle(std::int64_t now) {
  // A client whose time is past has its whole burst again: the same as not being kept.
  std::erase_if(clients_, [now](const auto& entry) { return entry.second <= now; });
  std::erase_if(trusted_, [now](const auto& entry) { return entry.second <= now; });
}

std::uint64_t GuessBrake::guesses() const {
  MutexLock hold(mu_);
  return guesses_;
}

std::uint64_t GuessBrake::braked() const {
  MutexLock hold(mu_);
  return braked_;
}

}  // namespace flurry::ops

// Fault injection for NodeRegistry backends: a wrapper that delegates to a real registry
// (SQLite, static, or any other backend under test) and, per operation, makes calls fail with a
// chosen Status, hang until released, or run a hook first (e.g. to move a fake clock while a
// call is "in progress"). Not a fake registry: what is not injected is the real backend's answer.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "flurry/registry.h"
#include "flurry/status.h"

namespace flurry::testing {

// Thread-safe: every member may be called from any thread, also while calls are in progress.
// The destructor releases every hang and waits for the calls hung in it to leave.
class FaultyRegistry final : public NodeRegistry {
 public:
  enum class Op : std::size_t { kClaim, kRenew, kSaveHorizon, kRelease };

  // The injected error of a registry that cannot be reached (retryable).
  [[nodiscard]] static Status unreachable() {
    return Status(Reason::kIo, "injected failure: registry unreachable");
  }
  // The injected error of a lease that another owner has taken.
  [[nodiscard]] static Status lease_gone() {
    return Status(Reason::kLeaseLost, "injected failure: the node ID was claimed by another owner");
  }
  // The injected error of a registry that went backwards (restored from a backup).
  [[nodiscard]] static Status regressed() {
    return Status(Reason::kRegistryRegressed, "injected failure: the registry went backwards");
  }

  explicit FaultyRegistry(NodeRegistry& inner) : inner_(inner) {}
  ~FaultyRegistry() override {
    std::unique_lock lock(mu_);
    for (State& s : ops_) s.hang = false;
    cv_.notify_all();
    cv_.wait(lock, [this] {
      std::size_t hung = 0;
      for (const State& s : ops_) hung += s.hung;
      return hung == 0;
    });
  }
  FaultyRegistry(const FaultyRegistry&) = delete;
  FaultyRegistry& operator=(const FaultyRegistry&) = delete;

  [[nodiscard]] Result<Claim> claim(std::string_view owner, std::uint64_t node_count) override {
    if (std::optional<Status> st = enter(Op::kClaim)) return *st;
    return finish(Op::kClaim, inner_.claim(owner, node_count));
  }
  // Operator calls are not injected: they go straight to the backend.
  [[nodiscard]] Result<RegistryListing> list() override { return inner_.list(); }
  [[nodiscard]] Status release_node(std::uint64_t node, bool force) override {
    return inner_.release_node(node, force);
  }
  [[nodiscard]] Status renew(const Lease& lease) override {
    if (std::optional<Status> st = enter(Op::kRenew)) return *st;
    return finish(Op::kRenew, inner_.renew(lease));
  }
  [[nodiscard]] Status save_horizon(const Lease& lease, const HorizonRecord& record) override {
    if (std::optional<Status> st = enter(Op::kSaveHorizon)) return *st;
    return finish(Op::kSaveHorizon, inner_.save_horizon(lease, record));
  }
  [[nodiscard]] Status release(const Lease& lease) override {
    if (std::optional<Status> st = enter(Op::kRelease)) return *st;
    return finish(Op::kRelease, inner_.release(lease));
  }
  [[nodiscard]] std::string describe() const override { return inner_.describe(); }

  // The inner registry's watch (none for most backends) plus one of the wrapper's own, through
  // which push_loss() plays a registry that learns of a loss between renewals.
  [[nodiscard]] Result<std::unique_ptr<LeaseWatch>> watch_lease(
      const Lease& lease, LeaseLostCallback on_lost) override {
    Result<std::unique_ptr<LeaseWatch>> inner = inner_.watch_lease(lease, on_lost);
    if (!inner.ok()) return inner;
    std::lock_guard lock(watch_mu_);
    const std::uint64_t id = ++watch_ids_;
    watches_[id] = std::move(on_lost);
    return std::unique_ptr<LeaseWatch>(
        std::make_unique<Subscription>(*this, id, std::move(inner).value()));
  }
  // Calls every live watch's callback with `why`, on this thread; how many there were.
  std::size_t push_loss(const Status& why) {
    std::lock_guard lock(watch_mu_);
    for (const auto& [id, callback] : watches_) callback(why);
    return watches_.size();
  }

  // Calls of `op` fail with `error` (not OK) without reaching the inner registry: the next
  // `times` calls, or every call from now on when `times` is empty. Replaces an earlier fail().
  void fail(Op op, Status error, std::optional<std::uint64_t> times = std::nullopt) {
    std::lock_guard lock(mu_);
    State& s = at(op);
    s.error = std::move(error);
    s.fail_left = times;
    if (times && *times == 0) s.error.reset();
  }
  // Calls of `op` reach the inner registry again.
  void heal(Op op) {
    std::lock_guard lock(mu_);
    at(op).error.reset();
  }

  // While on, calls of `op` block on entry (before a hook or an injected failure) until it is
  // turned off; then they go on as if they had just begun.
  void hang(Op op, bool on) {
    {
      std::lock_guard lock(mu_);
      at(op).hang = on;
    }
    cv_.notify_all();
  }
  // Blocks until at least `n` calls of `op` are hung. False after `real_timeout`.
  [[nodiscard]] bool await_hung(Op op, std::size_t n,
                                std::chrono::milliseconds real_timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, real_timeout, [&] { return at(op).hung >= n; });
  }

  // Runs `hook` at the start of every call of `op` (after a hang, before an injected failure or
  // the inner registry), on the calling thread, without the wrapper's lock. Empty: none.
  void on_call(Op op, std::function<void()> hook) {
    std::lock_guard lock(mu_);
    at(op).hook = std::move(hook);
  }

  // Calls of `op` begun (hung ones included).
  [[nodiscard]] std::uint64_t calls(Op op) const {
    std::lock_guard lock(mu_);
    return at(op).calls;
  }
  // Calls of `op` that failed, injected or not.
  [[nodiscard]] std::uint64_t failures(Op op) const {
    std::lock_guard lock(mu_);
    return at(op).failures;
  }
  // Calls of `op` hung now.
  [[nodiscard]] std::size_t hung(Op op) const {
    std::lock_guard lock(mu_);
    return at(op).hung;
  }

 private:
  // Ends the wrapper's watch (after a push in progress) and then the inner one.
  class Subscription final : public LeaseWatch {
   public:
    Subscription(FaultyRegistry& owner, std::uint64_t id, std::unique_ptr<LeaseWatch> inner)
        : owner_(owner), id_(id), inner_(std::move(inner)) {}
    ~Subscription() override {
      std::lock_guard lock(owner_.watch_mu_);
      owner_.watches_.erase(id_);
    }

   private:
    FaultyRegistry& owner_;
    const std::uint64_t id_;
    std::unique_ptr<LeaseWatch> inner_;
  };

  struct State {
    bool hang = false;
    std::size_t hung = 0;
    std::optional<Status> error;
    std::optional<std::uint64_t> fail_left;  // empty: fail until heal()
    std::function<void()> hook;
    std::uint64_t calls = 0;
    std::uint64_t failures = 0;
  };

  State& at(Op op) { return ops_[static_cast<std::size_t>(op)]; }
  const State& at(Op op) const { return ops_[static_cast<std::size_t>(op)]; }

  // The call's injected error, or nothing when it should reach the inner registry.
  std::optional<Status> enter(Op op) {
    std::function<void()> hook;
    {
      std::unique_lock lock(mu_);
      State& s = at(op);
      ++s.calls;
      if (s.hang) {
        ++s.hung;
        cv_.notify_all();
        cv_.wait(lock, [&s] { return !s.hang; });
        --s.hung;
        cv_.notify_all();
      }
      hook = s.hook;
    }
    if (hook) hook();
    std::lock_guard lock(mu_);
    State& s = at(op);
    if (!s.error) return std::nullopt;
    Status error = *s.error;
    if (s.fail_left && --*s.fail_left == 0) s.error.reset();
    ++s.failures;
    return error;
  }

  template <typename R>
  R finish(Op op, R result) {
    if (!result.ok()) {
      std::lock_guard lock(mu_);
      ++at(op).failures;
    }
    return result;
  }

  NodeRegistry& inner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::array<State, 4> ops_;
  std::mutex watch_mu_;  // held while a push runs the callbacks
  std::uint64_t watch_ids_ = 0;
  std::map<std::uint64_t, LeaseLostCallback> watches_;
};

}  // namespace flurry::testing

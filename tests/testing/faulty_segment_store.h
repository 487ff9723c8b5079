// Fault injection around a real SegmentStore (SQLite in the unit tests): allocations fail while
// `fail` is set, may be held after the store answered until released (hold, release), and every
// step asked for is recorded. Not a fake: every call that is let through reaches the real store.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flurry/segment_store.h"

namespace flurry::testing {

class FaultySegmentStore final : public SegmentStore {
 public:
  explicit FaultySegmentStore(std::unique_ptr<SegmentStore> inner) : inner_(std::move(inner)) {}

  std::atomic<bool> fail{false};

  Status create_tag(const SegmentTagSpec& spec) override { return inner_->create_tag(spec); }
  using SegmentStore::allocate;
  Result<SegmentAllocation> allocate(const SegmentTag& tag, std::uint64_t step,
                                     std::uint64_t floor) override {
    {
      std::lock_guard lock(mu_);
      steps_.push_back(step);
    }
    Result<SegmentAllocation> got = Status(Reason::kIo, "injected: the store is down");
    if (!fail.load()) got = inner_->allocate(tag, step, floor);
    // Held (hold()): the call has its answer from the store but waits until release() to
    // return it, as a caller descheduled after the store's answer would.
    std::unique_lock lock(mu_);
    ++entered_;
    entered_cv_.notify_all();
    held_cv_.wait(lock, [&] { return !held_; });
    return got;
  }
  // Makes later allocate() calls wait, after the store answered them, until release().
  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void release() {
    std::lock_guard lock(mu_);
    held_ = false;
    held_cv_.notify_all();
  }
  // Waits until `n` allocate() calls in all have had the store's answer (held ones included);
  // false after 10 s of real time (a safety net for a broken implementation, not a timing bound).
  [[nodiscard]] bool await_entered(std::size_t n) {
    std::unique_lock lock(mu_);
    return entered_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_ >= n; });
  }
  Result<SegmentTagInfo> tag(const SegmentTag& tag) override {
    if (fail.load()) return Status(Reason::kIo, "injected: the store is down");
    return inner_->tag(tag);
  }
  Result<std::vector<SegmentTagInfo>> list_tags() override {
    if (fail.load()) return Status(Reason::kIo, "injected: the store is down");
    return inner_->list_tags();
  }
  std::string describe() const override { return "faulty(" + inner_->describe() + ")"; }
  Result<SegmentStoreIdentity> identity(Blocking blocking) override {
    if (blocking == Blocking::kAllowed && fail.load()) {
      return Status(Reason::kIo, "injected: the store is down");
    }
    return inner_->identity(blocking);
  }

  // Every step allocate() was called with, in order (failed calls included).
  std::vector<std::uint64_t> steps() const {
    std::lock_guard lock(mu_);
    return steps_;
  }
  std::size_t allocations() const {
    std::lock_guard lock(mu_);
    return steps_.size();
  }

 private:
  std::unique_ptr<SegmentStore> inner_;
  mutable std::mutex mu_;
  std::vector<std::uint64_t> steps_;
  bool held_ = false;
  std::size_t entered_ = 0;
  std::condition_variable held_cv_;
  std::condition_variable entered_cv_;
};

}  // namespace flurry::testing

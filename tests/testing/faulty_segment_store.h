// Fault injection around a real SegmentStore (SQLite in the unit tests): allocations fail while
// `fail` is set, may be held until released, and every step asked for is recorded. Not a fake:
// every call that is let through reaches the real store.
#pragma once

#include <atomic>
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
    if (fail.load()) return Status(Reason::kIo, "injected: the store is down");
    return inner_->allocate(tag, step, floor);
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
};

}  // namespace flurry::testing

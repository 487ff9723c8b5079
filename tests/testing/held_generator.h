// Keeps the generator's blocking thread of an ops::Pools busy until released (or destroyed), as a
// request waiting there for the clock or the rate limit does: while it is held, new ID requests
// with Blocking::kNever queue behind it. Released on destruction, so a failed assertion never
// leaves a pool thread waiting forever.
#pragma once

#include <future>

#include "ops/deferral.h"

namespace flurry::testing {

class HeldGenerator {
 public:
  explicit HeldGenerator(ops::Pools& pools) {
    pools.post(ops::Pool::kGenerator, [released = released_] { released.wait(); });
  }
  ~HeldGenerator() { release(); }
  HeldGenerator(const HeldGenerator&) = delete;
  HeldGenerator& operator=(const HeldGenerator&) = delete;

  void release() {
    if (released_once_) return;
    released_once_ = true;
    promise_.set_value();
  }

 private:
  std::promise<void> promise_;
  std::shared_future<void> released_ = promise_.get_future().share();
  bool released_once_ = false;
};

}  // namespace flurry::testing

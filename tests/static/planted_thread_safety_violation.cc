// A planted violation of the lock discipline, for tools/check-thread-safety.py's own test
// (tests/static/planted_thread_safety.sh): the lines marked PLANTED touch state guarded by mu_
// without holding it, and the check must report each of them, and nothing else. Never built.
#include "flurry/mutex.h"

namespace {

class Counter {
 public:
  // Right: the guarded member under its lock, and a FLURRY_REQUIRES function called with it.
  int read() FLURRY_EXCLUDES(mu_) {
    flurry::MutexLock lock(mu_);
    bump_locked();
    return count_;
  }
  void wait_positive() FLURRY_EXCLUDES(mu_) {
    flurry::MutexLock lock(mu_);
    lock.wait(cv_, [&]() FLURRY_REQUIRES(mu_) { return count_ > 0; });
  }

  // Wrong.
  void bump() { ++count_; }             // PLANTED: written without mu_
  void bump_twice() { bump_locked(); }  // PLANTED: a FLURRY_REQUIRES(mu_) call without mu_

 private:
  void bump_locked() FLURRY_REQUIRES(mu_) { ++count_; }

  flurry::Mutex mu_;
  std::condition_variable cv_;
  int count_ FLURRY_GUARDED_BY(mu_) = 0;
};

}  // namespace

int planted_thread_safety_violation() {
  Counter c;
  c.bump();
  c.bump_twice();
  c.wait_positive();
  return c.read();
}

// flurry::Mutex, flurry::SharedMutex and their scoped locks: std::mutex and std::shared_mutex with
// clang's thread-safety annotations, so that `clang++ -Wthread-safety` proves at compile time that
// every member marked FLURRY_GUARDED_BY(mu_) is touched only with mu_ held
// (tools/check-thread-safety.py runs that check in `make test`). libstdc++'s own mutexes carry no
// annotations, hence these thin wrappers; other compilers see plain std::mutex and no attributes.
//
// Use:
//   mutable flurry::Mutex mu_;
//   int count_ FLURRY_GUARDED_BY(mu_) = 0;
//   void bump() FLURRY_EXCLUDES(mu_) { flurry::MutexLock lock(mu_); ++count_; }
//   void bump_locked() FLURRY_REQUIRES(mu_) { ++count_; }
// Waiting on a condition variable: lock.wait(cv, pred) (the lock is held again when it returns);
// the analysis does not see into a lambda, so a predicate that reads guarded members says so:
//   lock.wait(cv_, [&]() FLURRY_REQUIRES(mu_) { return count_ > 0; });
//
// Thread safety: as std::mutex / std::shared_mutex. Not recursive.
#ifndef FLURRY_MUTEX_H_
#define FLURRY_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#if defined(__clang__)
#define FLURRY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define FLURRY_THREAD_ANNOTATION(x)
#endif

#define FLURRY_CAPABILITY(x) FLURRY_THREAD_ANNOTATION(capability(x))
#define FLURRY_SCOPED_CAPABILITY FLURRY_THREAD_ANNOTATION(scoped_lockable)
#define FLURRY_GUARDED_BY(x) FLURRY_THREAD_ANNOTATION(guarded_by(x))
#define FLURRY_PT_GUARDED_BY(x) FLURRY_THREAD_ANNOTATION(pt_guarded_by(x))
#define FLURRY_ACQUIRED_BEFORE(...) FLURRY_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define FLURRY_ACQUIRED_AFTER(...) FLURRY_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define FLURRY_REQUIRES(...) FLURRY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define FLURRY_REQUIRES_SHARED(...) \
  FLURRY_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define FLURRY_ACQUIRE(...) FLURRY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define FLURRY_ACQUIRE_SHARED(...) FLURRY_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define FLURRY_RELEASE(...) FLURRY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define FLURRY_RELEASE_SHARED(...) FLURRY_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define FLURRY_RELEASE_GENERIC(...) \
  FLURRY_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define FLURRY_TRY_ACQUIRE(...) FLURRY_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define FLURRY_EXCLUDES(...) FLURRY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define FLURRY_ASSERT_CAPABILITY(x) FLURRY_THREAD_ANNOTATION(assert_capability(x))
#define FLURRY_RETURN_CAPABILITY(x) FLURRY_THREAD_ANNOTATION(lock_returned(x))
#define FLURRY_NO_THREAD_SAFETY_ANALYSIS FLURRY_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace flurry {

// A std::mutex the analysis knows as a capability.
class FLURRY_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() FLURRY_ACQUIRE() { mu_.lock(); }
  void unlock() FLURRY_RELEASE() { mu_.unlock(); }
  [[nodiscard]] bool try_lock() FLURRY_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For the analysis only: tells it that the calling thread holds this mutex (a precondition
  // established where the analysis cannot follow, e.g. a callback run under the lock).
  void assert_held() const FLURRY_ASSERT_CAPABILITY(this) {}

  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope; unlock()/lock() release and take it again inside the scope (e.g.
// around a slow call), and wait*() wait on a std::condition_variable with it.
class FLURRY_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) FLURRY_ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() FLURRY_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() FLURRY_RELEASE() { lock_.unlock(); }
  void lock() FLURRY_ACQUIRE() { lock_.lock(); }

  // The lock is held when these return, as when they were called.
  void wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <class Predicate>
  void wait(std::condition_variable& cv, Predicate pred) {
    cv.wait(lock_, std::move(pred));
  }
  template <class Clock, class Duration>
  std::cv_status wait_until(std::condition_variable& cv,
                            const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv.wait_until(lock_, deadline);
  }
  template <class Clock, class Duration, class Predicate>
  bool wait_until(std::condition_variable& cv,
                  const std::chrono::time_point<Clock, Duration>& deadline, Predicate pred) {
    return cv.wait_until(lock_, deadline, std::move(pred));
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::condition_variable& cv,
                          const std::chrono::duration<Rep, Period>& timeout) {
    return cv.wait_for(lock_, timeout);
  }
  template <class Rep, class Period, class Predicate>
  bool wait_for(std::condition_variable& cv, const std::chrono::duration<Rep, Period>& timeout,
                Predicate pred) {
    return cv.wait_for(lock_, timeout, std::move(pred));
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// A std::shared_mutex the analysis knows as a capability (many readers or one writer).
class FLURRY_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() FLURRY_ACQUIRE() { mu_.lock(); }
  void unlock() FLURRY_RELEASE() { mu_.unlock(); }
  void lock_shared() FLURRY_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void unlock_shared() FLURRY_RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex exclusively for its scope.
class FLURRY_SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) FLURRY_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~WriterLock() FLURRY_RELEASE() { mu_.unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex& mu_;
};

// Holds a SharedMutex shared (as a reader) for its scope.
class FLURRY_SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) FLURRY_ACQUIRE_SHARED(mu) : mu_(mu) { mu_.lock_shared(); }
  ~ReaderLock() FLURRY_RELEASE() { mu_.unlock_shared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex& mu_;
};

}  // namespace flurry

#endif  // FLURRY_MUTEX_H_

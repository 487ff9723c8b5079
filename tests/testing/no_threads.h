// Making std::thread fail, to test what code does when no thread can be created (it must report
// a Status, not throw). Only for a death test's child in the "threadsafe" style: a freshly
// executed process, so there are no cached thread stacks that a new thread could reuse.
#pragma once

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <system_error>
#include <thread>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FLURRY_TESTING_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define FLURRY_TESTING_SANITIZED 1
#endif
#endif

namespace flurry::testing {

// The exit code of a death-test child that could not forbid new threads: the test is skipped.
inline constexpr int kCannotForbidThreads = 77;

// Caps this process's address space just above what is mapped now, with room for small
// allocations but not for another thread's stack, so that from now on creating a thread fails
// (std::thread throws std::system_error). Returns false when that could not be arranged, e.g.
// under a sanitizer, whose allocator maps memory as it goes: then the caller should exit with
// kCannotForbidThreads. Irreversible for the process.
inline bool forbid_new_threads() {
#ifdef FLURRY_TESTING_SANITIZED
  return false;
#else
  pthread_attr_t attr;
  if (pthread_getattr_default_np(&attr) != 0) return false;
  std::size_t stack = 0;
  const int got = pthread_attr_getstacksize(&attr, &stack);
  pthread_attr_destroy(&attr);
  if (got != 0 || stack < (std::size_t{1} << 20)) return false;
  unsigned long pages = 0;  // the first field of statm: the address space's size, in pages
  {
    std::ifstream statm("/proc/self/statm");
    if (!(statm >> pages)) return false;
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0) return false;
  limit.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) +
                   static_cast<rlim_t>(stack / 2);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_cur > limit.rlim_max) return false;
  if (setrlimit(RLIMIT_AS, &limit) != 0) return false;
  try {
    std::thread probe([] {});
    probe.join();  // it could be created after all: its stack is cached now, so give up
    return false;
  } catch (const std::system_error&) {
    return true;
  }
#endif
}

// Runs `child()` in a death-test child, a freshly executed process ("threadsafe" style), and
// expects it to end with _exit(0); a child that cannot forbid new threads ends with
// _exit(kCannotForbidThreads), and then the calling test is skipped. `child` calls
// forbid_new_threads() itself, once it has started whatever threads it needs; it reports a
// failed expectation by writing to stderr and exiting with another code.
template <typename Child>
void expect_child_without_threads(Child child) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int code = -1;
  const auto exited = [&code](int status) {
    code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return code == 0 || code == kCannotForbidThreads;
  };
  EXPECT_EXIT(child(), exited, "");
  if (code == kCannotForbidThreads) {
    GTEST_SKIP() << "thread creation cannot be made to fail here (a sanitizer build?)";
  }
}

}  // namespace flurry::testing

// The benchmarks' aggregate rate over wall-clock time (bench/README.md, "What each benchmark
// measures").
//
// Google Benchmark gives every thread the same number of iterations and divides by the mean of
// the threads' own real times. When threads progress unevenly (a throttled generator, a
// contended mutex, a descheduled thread) one finishes early and stops its timer while the
// others still work, so on 2 threads items_per_second can overstate the aggregate rate (it can
// even exceed a layout's rate limit). WallRate divides the items of all threads by the time from
// thread 0 entering the loop to every thread having left it (the loop ends on a barrier). Thread
// 0 alone reports it, so the sum over threads is this value.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>

namespace flurry::bench {

class WallRate {
 public:
  // Construct just before the benchmark loop.
  explicit WallRate(const benchmark::State& state)
      : start_(state.thread_index() == 0 ? std::chrono::steady_clock::now()
                                         : std::chrono::steady_clock::time_point{}) {}

  // After the loop: sets items_per_second's item count (iterations x items_per_iteration) and,
  // on thread 0, the counter wall_items_per_second.
  void report(benchmark::State& state, std::int64_t items_per_iteration = 1) const {
    state.SetItemsProcessed(state.iterations() * items_per_iteration);
    if (state.thread_index() != 0 || state.error_occurred()) return;
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start_;
    const double items = static_cast<double>(state.iterations()) * state.threads() *
                         static_cast<double>(items_per_iteration);
    state.counters["wall_items_per_second"] = items / wall.count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace flurry::bench

// In-process throughput of segment mode: one tag's IDs from a SegmentService over a real SQLite
// store, on 1 and 2 threads sharing the tag, beside references measured in the same run:
//
//   Ref_AtomicAdd       a bare std::atomic fetch_add on one counter: the floor of any scheme
//                       whose hot path is one atomic add (segment mode's is).
//   Ref_LockedCounter   a counter behind a mutex, as a buffer guarded by a lock serves IDs.
//   Segment_Next        SegmentCounter::next() for one ID: the hot path (the tag looked up once).
//   Segment_NextByName  SegmentService::next(tag, ...) for one ID: adds the tag's lookup.
//   Segment_Batch100    SegmentCounter::next() for 100 IDs at a time (items are IDs).
//
// The tag's base step is large (50,000,000) so that the figure is the hot path, with a range
// switch (and a prefetch from SQLite in the background) about every 50M IDs. Every benchmark
// reports items_per_second and wall_items_per_second (items over the wall time of the run: the
// one to trust on 2 threads, where Google Benchmark's per-thread CPU accounting misleads).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "wall_rate.h"

namespace {

using flurry::bench::WallRate;

constexpr std::uint64_t kStep = 50'000'000;

struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<flurry::SegmentService> service;
  flurry::SegmentCounter* counter = nullptr;
  std::optional<flurry::SegmentTag> tag;
  std::string error;
};

Fixture& fixture() {
  static Fixture* f = [] {
    auto* fx = new Fixture;
    std::string pattern = (std::filesystem::temp_directory_path() / "flurry-segbench-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      fx->error = "mkdtemp failed";
      return fx;
    }
    fx->dir = pattern;
    flurry::SegmentStoreSpec spec;
    spec.sqlite_path = fx->dir / "segments.db";
    auto store = flurry::open_segment_store(spec);
    if (!store.ok()) {
      fx->error = store.status().to_string();
      return fx;
    }
    flurry::SegmentTagSpec tag;
    tag.tag = "bench";
    tag.step = kStep;
    if (flurry::Status st = (*store)->create_tag(tag); !st.ok()) {
      fx->error = st.to_string();
      return fx;
    }
    std::vector<std::unique_ptr<flurry::SegmentStore>> stores;
    stores.push_back(std::move(*store));
    flurry::SegmentOptions options;
    options.max_step = kStep;
    options.max_wait = std::chrono::milliseconds(5000);
    auto service = flurry::SegmentService::create(std::move(stores), options);
    if (!service.ok()) {
      fx->error = service.status().to_string();
      return fx;
    }
    fx->service = std::move(*service);
    fx->tag = flurry::SegmentTag::of("bench").value();
    auto counter = fx->service->counter(*fx->tag);
    if (!counter.ok()) {
      fx->error = counter.status().to_string();
      return fx;
    }
    fx->counter = *counter;
    return fx;
  }();
  return *f;
}

void BM_Ref_AtomicAdd(benchmark::State& state) {
  static std::atomic<std::uint64_t> counter{0};
  const WallRate wall(state);
  for (auto _ : state) benchmark::DoNotOptimize(counter.fetch_add(1, std::memory_order_acq_rel));
  wall.report(state, 1);
}

void BM_Ref_LockedCounter(benchmark::State& state) {
  static std::mutex mu;
  static std::uint64_t counter = 0;
  const WallRate wall(state);
  for (auto _ : state) {
    std::lock_guard lock(mu);
    benchmark::DoNotOptimize(++counter);
  }
  wall.report(state, 1);
}

template <std::size_t kBatch, bool kByName>
void BM_Segment(benchmark::State& state) {
  Fixture& f = fixture();
  if (f.counter == nullptr) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  std::uint64_t ids[kBatch];
  const flurry::IdCount count = flurry::IdCount::of(kBatch, kBatch).value();
  const WallRate wall(state);
  for (auto _ : state) {
    const flurry::Status st =
        kByName ? f.service->next(*f.tag, count, ids) : f.counter->next(count, ids);
    if (!st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(ids);
  }
  wall.report(state, static_cast<std::int64_t>(kBatch));
}

void BM_Segment_Next(benchmark::State& state) {
  BM_Segment<1, false>(state);
}
void BM_Segment_NextByName(benchmark::State& state) {
  BM_Segment<1, true>(state);
}
void BM_Segment_Batch100(benchmark::State& state) {
  BM_Segment<100, false>(state);
}

BENCHMARK(BM_Ref_AtomicAdd)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Ref_LockedCounter)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Segment_Next)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Segment_NextByName)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Segment_Batch100)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  Fixture& f = fixture();
  f.service.reset();
  if (!f.dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(f.dir, ec);
  }
  return 0;
}

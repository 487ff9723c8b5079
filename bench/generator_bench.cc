// Throughput of flurry::Generator against a textbook snowflake, with micro references.
//
// Every generator and reference benchmark runs on 1 and 2 threads sharing one generator, is
// timed in real time and reports items_per_second (IDs per second, all threads together) and
// wall_items_per_second (the same over the run's wall-clock time; the one to trust on 2
// threads, see wall_rate.h). See bench/README.md for what each benchmark measures and the targets.
//
// Layouts:
//   classic   the `flurry` preset, time:41@1ms,node:10,seq:12: at most 4,096,000 IDs/s, so the
//             figure is the rate limit if the generator can keep up with it.
//   uncapped  time:40@1ms,node:1,seq:22: 4.19e9 IDs/s, so the rate limit does not cap next().
//   <preset>  every preset of Layout::presets() (uid-generator with a live epoch), each capped
//             by its own rate limit.
#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/horizon.h"
#include "flurry/layout.h"
#include "flurry/status.h"
#include "reference/textbook_snowflake.h"
#include "wall_rate.h"

namespace {

using flurry::bench::WallRate;

// ------------------------------------------------------------------------------------------
// The shared generators: one per layout, created lazily before the first benchmark that uses
// it starts timing, shared by all its threads and by later benchmarks on the same layout, and
// closed in main() after the run, when the temporary state directory is removed too.

// A layout to benchmark: the label in the benchmark's name and the text Layout::parse reads.
struct Which {
  std::string label;
  std::string text;

  friend bool operator<(const Which& a, const Which& b) { return a.label < b.label; }
};

const Which kClassic{"classic", "flurry"};
const Which kUncapped{"uncapped", "time:40@1ms,node:1,seq:22;epoch=2025-01-01Z"};

// Rate limits above this are out of reach of next() (uncapped: 4.19e9 IDs/s).
constexpr double kReachableRate = 1e9;

struct Fixture {
  std::unique_ptr<flurry::FileHorizonStore> store;
  std::unique_ptr<flurry::Generator> generator;
  std::string error;  // why the generator could not be created, when it is null
  // Spend the max_lead burst allowance before timing, so the figure is the sustained rate and
  // not the rate limit plus up to max_lead's worth of IDs issued ahead of the clock. Only for
  // layouts whose limit next() can reach: the uncapped one is never meant to reach its limit.
  bool saturate_lead = false;
};

std::mutex g_fixtures_mu;
std::filesystem::path g_state_dir;  // mkdtemp'ed on first use, empty until then
std::map<Which, std::unique_ptr<Fixture>> g_fixtures;

Fixture& fixture(const Which& which) {
  std::lock_guard lock(g_fixtures_mu);
  std::unique_ptr<Fixture>& slot = g_fixtures[which];
  if (slot) return *slot;
  slot = std::make_unique<Fixture>();
  Fixture& f = *slot;

  if (g_state_dir.empty()) {
    char dir_template[] = "/tmp/flurry-bench-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) {
      f.error = "mkdtemp failed: " + std::error_code(errno, std::generic_category()).message();
      return f;
    }
    g_state_dir = dir_template;
  }
  auto layout = flurry::Layout::parse(which.text);
  if (!layout.ok()) {
    f.error = "layout: " + layout.status().to_string();
    return f;
  }
  f.saturate_lead = layout->rate_limit_per_second() < kReachableRate;
  flurry::GeneratorOptions options;  // defaults: node 0, max_lead 1 s, window 2 s
  options.background_horizon = true;
  f.store = std::make_unique<flurry::FileHorizonStore>(
      flurry::FileHorizonStore::path_for(g_state_dir / which.label, options.node));
  auto generator = flurry::Generator::create(std::move(layout).value(), options,
                                             flurry::SystemClock::coarse(), *f.store);
  if (!generator.ok()) {
    f.error = "Generator::create: " + generator.status().to_string();
    return f;
  }
  f.generator = std::move(generator).value();
  return f;
}

// Closes the generators and removes the state directory. Returns false if closing failed.
bool teardown() {
  std::lock_guard lock(g_fixtures_mu);
  bool ok = true;
  for (auto& [which, f] : g_fixtures) {
    if (f->generator) {
      if (flurry::Status st = f->generator->close(); !st.ok()) {
        std::fprintf(stderr, "flurry_bench: closing the %s generator: %s\n", which.label.c_str(),
                     st.to_string().c_str());
        ok = false;
      }
    }
    f->generator.reset();
    f->store.reset();
  }
  g_fixtures.clear();
  if (!g_state_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(g_state_dir, ec);
    if (ec) {
      std::fprintf(stderr, "flurry_bench: cannot remove %s: %s\n", g_state_dir.c_str(),
                   ec.message().c_str());
    }
    g_state_dir.clear();
  }
  return ok;
}

// Issues IDs one tick's worth at a time until a call is throttled, i.e. until the generator's
// time field is max_lead ahead of the clock. Untimed (called before the benchmark loop).
flurry::Status saturate_lead(flurry::Generator& generator) {
  const std::uint64_t per_tick = std::uint64_t{1} << generator.layout().seq_field().bits;
  std::vector<std::uint64_t> chunk(static_cast<std::size_t>(per_tick));
  const std::uint64_t throttled_before = generator.stats().throttle_waits;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (generator.stats().throttle_waits == throttled_before &&
         std::chrono::steady_clock::now() < give_up) {
    if (flurry::Status st = generator.next_batch(chunk); !st.ok()) return st;
  }
  return flurry::OkStatus();
}

// Shared set-up of the generator benchmarks; returns null after SkipWithError. Every thread
// takes the same branch, so either all of them enter the benchmark loop or none does.
flurry::Generator* prepare(benchmark::State& state, const Which& which,
                           std::uint64_t& throttled_before) {
  Fixture& f = fixture(which);
  if (!f.generator) {
    state.SkipWithError(f.error.c_str());
    return nullptr;
  }
  if (state.thread_index() == 0) {
    // Runs before the start barrier of the benchmark loop: the other threads wait for it.
    if (f.saturate_lead) {
      if (flurry::Status st = saturate_lead(*f.generator); !st.ok()) {
        // Not fatal here; the timed loop reports the error if it persists.
        std::fprintf(stderr, "flurry_bench: warm-up: %s\n", st.to_string().c_str());
      }
    }
    throttled_before = f.generator->stats().throttle_waits;
  }
  return f.generator.get();
}

// Slow-path throttle sleeps during the timed loop (reported by thread 0 only, so the sum over
// threads is the generator's count).
void report_throttles(benchmark::State& state, flurry::Generator& generator,
                      std::uint64_t throttled_before) {
  if (state.thread_index() != 0) return;
  state.counters["throttle_waits"] =
      static_cast<double>(generator.stats().throttle_waits - throttled_before);
}

void BM_Flurry_Next(benchmark::State& state, const Which& which) {
  std::uint64_t throttled_before = 0;
  flurry::Generator* generator = prepare(state, which, throttled_before);
  if (generator == nullptr) return;
  const WallRate wall(state);
  for (auto _ : state) {
    flurry::Result<std::uint64_t> id = generator->next();
    if (!id.ok()) {
      state.SkipWithError(id.status().to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(*id);
  }
  wall.report(state, 1);
  report_throttles(state, *generator, throttled_before);
}

void BM_Flurry_NextBatch1000(benchmark::State& state, const Which& which) {
  static thread_local std::array<std::uint64_t, 1000> ids;
  std::uint64_t throttled_before = 0;
  flurry::Generator* generator = prepare(state, which, throttled_before);
  if (generator == nullptr) return;
  const WallRate wall(state);
  for (auto _ : state) {
    if (flurry::Status st = generator->next_batch(ids); !st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(ids.data());
    benchmark::ClobberMemory();
  }
  wall.report(state, static_cast<std::int64_t>(ids.size()));
  report_throttles(state, *generator, throttled_before);
}

// ------------------------------------------------------------------------------------------
// The reference: the textbook snowflake (Twitter's 2010 IdWorker, as reimplemented everywhere;
// src/reference/textbook_snowflake.h, shared with `flurry bench --reference`).

using flurry::reference::TextbookSnowflake;

TextbookSnowflake g_textbook_classic(10, 12, 0);  // (ms - epoch) << 22 | node << 12 | seq
TextbookSnowflake g_textbook_uncapped(1, 22, 0);  // (ms - epoch) << 23 | node << 22 | seq

// The presets with a 1 ms unit, the textbook's: the same node and sequence widths (a clock
// field counts as node bits, the textbook has no such thing).
TextbookSnowflake g_textbook_flurry(10, 12, 0);
TextbookSnowflake g_textbook_twitter(10, 12, 0);
TextbookSnowflake g_textbook_instagram(13, 10, 0);
TextbookSnowflake g_textbook_multiclock(12, 10, 0);
TextbookSnowflake g_textbook_region(13, 10, 0);
TextbookSnowflake g_textbook_js_safe(5, 7, 0);

template <class Textbook>
void BM_TextbookSnowflake(benchmark::State& state, Textbook* textbook) {
  const WallRate wall(state);
  for (auto _ : state) {
    std::uint64_t id = 0;
    if (!textbook->next(id)) {
      state.SkipWithError("textbook snowflake: the clock moved backwards");
      break;
    }
    benchmark::DoNotOptimize(id);
  }
  wall.report(state, 1);
}

// 1000 calls per iteration: the textbook design has no batch, so this is what a batch costs.
template <class Textbook>
void BM_TextbookSnowflake1000(benchmark::State& state, Textbook* textbook) {
  static thread_local std::array<std::uint64_t, 1000> ids;
  const WallRate wall(state);
  for (auto _ : state) {
    for (std::uint64_t& id : ids) {
      if (!textbook->next(id)) {
        state.SkipWithError("textbook snowflake: the clock moved backwards");
        break;
      }
    }
    if (state.error_occurred()) break;
    benchmark::DoNotOptimize(ids.data());
    benchmark::ClobberMemory();
  }
  wall.report(state, static_cast<std::int64_t>(ids.size()));
}

// ------------------------------------------------------------------------------------------
// Micro references: what the building blocks cost on this machine.

void BM_ClockFine(benchmark::State& state) {
  for (auto _ : state) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    benchmark::DoNotOptimize(ts);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ClockCoarse(benchmark::State& state) {
  for (auto _ : state) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    benchmark::DoNotOptimize(ts);
  }
  state.SetItemsProcessed(state.iterations());
}

// What the hot path of next() cannot beat, with a word shared by the threads (on 2 threads the
// cache line moves between the cores as it does for the generator's state): a coarse clock read
// and a compare-and-swap increment (the generator's reservation without its checks), the same
// with one fetch_add (its fast path), and a bare fetch_add.
struct alignas(64) SharedWord {
  std::atomic<std::uint64_t> value{0};
};
SharedWord g_shared_word;

std::int64_t coarse_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void BM_BareClockCas(benchmark::State& state) {
  const WallRate wall(state);
  for (auto _ : state) {
    const std::int64_t now = coarse_ns();
    std::uint64_t cur = g_shared_word.value.load(std::memory_order_acquire);
    while (!g_shared_word.value.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel,
                                                      std::memory_order_acquire)) {
    }
    benchmark::DoNotOptimize(now);
    benchmark::DoNotOptimize(cur);
  }
  wall.report(state, 1);
}

void BM_BareClockFetchAdd(benchmark::State& state) {
  const WallRate wall(state);
  for (auto _ : state) {
    const std::int64_t now = coarse_ns();
    const std::uint64_t v = g_shared_word.value.fetch_add(1, std::memory_order_acq_rel);
    benchmark::DoNotOptimize(now);
    benchmark::DoNotOptimize(v);
  }
  wall.report(state, 1);
}

void BM_BareFetchAdd(benchmark::State& state) {
  const WallRate wall(state);
  for (auto _ : state) {
    const std::uint64_t v = g_shared_word.value.fetch_add(1, std::memory_order_acq_rel);
    benchmark::DoNotOptimize(v);
  }
  wall.report(state, 1);
}

// An uncontended compare-and-swap: each thread has its own atomic.
void BM_AtomicCas(benchmark::State& state) {
  std::atomic<std::uint64_t> word{0};
  benchmark::DoNotOptimize(&word);
  for (auto _ : state) {
    std::uint64_t cur = word.load(std::memory_order_acquire);
    bool swapped = word.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel,
                                              std::memory_order_relaxed);
    benchmark::DoNotOptimize(swapped);
  }
  state.SetItemsProcessed(state.iterations());
}

// ------------------------------------------------------------------------------------------
// Registration, in run order: each flurry figure next to its reference.

BENCHMARK_CAPTURE(BM_Flurry_Next, classic, kClassic)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);
BENCHMARK_CAPTURE(BM_TextbookSnowflake, classic, &g_textbook_classic)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);
BENCHMARK_CAPTURE(BM_Flurry_Next, uncapped, kUncapped)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);
BENCHMARK_CAPTURE(BM_TextbookSnowflake, uncapped, &g_textbook_uncapped)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);
BENCHMARK_CAPTURE(BM_Flurry_NextBatch1000, classic, kClassic)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);
BENCHMARK_CAPTURE(BM_Flurry_NextBatch1000, uncapped, kUncapped)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);
BENCHMARK_CAPTURE(BM_TextbookSnowflake1000, uncapped, &g_textbook_uncapped)
    ->MinTime(1.0)
    ->UseRealTime()
    ->Threads(1)
    ->Threads(2);

BENCHMARK(BM_ClockFine)->UseRealTime()->Threads(1)->Threads(2);
BENCHMARK(BM_ClockCoarse)->UseRealTime()->Threads(1)->Threads(2);
BENCHMARK(BM_AtomicCas)->UseRealTime()->Threads(1)->Threads(2);
BENCHMARK(BM_BareClockCas)->UseRealTime()->Threads(1)->Threads(2);
BENCHMARK(BM_BareClockFetchAdd)->UseRealTime()->Threads(1)->Threads(2);
BENCHMARK(BM_BareFetchAdd)->UseRealTime()->Threads(1)->Threads(2);

// Every preset, registered after the benchmarks above: BM_Flurry_Next/<preset>, then
// BM_TextbookSnowflake/<preset> where the textbook applies (a 1 ms unit). A preset whose own
// epoch has run out (uid-generator) is measured with epoch 2025-01-01Z.
std::vector<Which>& preset_layouts() {
  static std::vector<Which> layouts;  // stable addresses once filled: captured by reference
  return layouts;
}

template <class Textbook>
void register_textbook(const std::string& preset, Textbook* textbook) {
  benchmark::RegisterBenchmark(
      ("BM_TextbookSnowflake/" + preset).c_str(),
      [textbook](benchmark::State& state) { BM_TextbookSnowflake(state, textbook); })
      ->MinTime(1.0)
      ->UseRealTime()
      ->Threads(1)
      ->Threads(2);
}

void register_preset_benchmarks() {
  std::vector<Which>& layouts = preset_layouts();
  const auto now = flurry::SystemClock::coarse().now();
  for (const flurry::Layout::Preset& p : flurry::Layout::presets()) {
    Which which{std::string(p.name), std::string(p.name)};
    const auto layout = flurry::Layout::parse(which.text);
    if (layout.ok() && !layout->check_alive(now).ok()) which.text += ";epoch=2025-01-01Z";
    layouts.push_back(std::move(which));
  }
  for (const Which& which : layouts) {
    const std::string name = "BM_Flurry_Next/" + which.label;
    const auto run = [&which](benchmark::State& state) { BM_Flurry_Next(state, which); };
    const auto layout = flurry::Layout::parse(which.text);
    if (layout.ok() && layout->unit() >= std::chrono::seconds(1)) {
      // Units of a second or more: with the burst spent, the first call waits for the next
      // tick, and a run timed by MinTime would end after that one call. Four ticks' worth of
      // IDs over all threads instead.
      const auto per_tick =
          static_cast<benchmark::IterationCount>(std::uint64_t{1} << layout->seq_field().bits);
      for (int threads : {1, 2}) {
        benchmark::RegisterBenchmark(name.c_str(), run)
            ->Iterations(4 * per_tick / threads)
            ->UseRealTime()
            ->Threads(threads);
      }
    } else {
      benchmark::RegisterBenchmark(name.c_str(), run)
          ->MinTime(1.0)
          ->UseRealTime()
          ->Threads(1)
          ->Threads(2);
    }
    const std::string& preset = which.label;
    if (preset == "flurry") register_textbook(preset, &g_textbook_flurry);
    if (preset == "twitter") register_textbook(preset, &g_textbook_twitter);
    if (preset == "instagram") register_textbook(preset, &g_textbook_instagram);
    if (preset == "multiclock") register_textbook(preset, &g_textbook_multiclock);
    if (preset == "region") register_textbook(preset, &g_textbook_region);
    if (preset == "js-safe") register_textbook(preset, &g_textbook_js_safe);
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_preset_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return teardown() ? 0 : 1;
}

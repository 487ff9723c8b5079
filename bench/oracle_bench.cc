// oracle_bench: what the timestamp oracle costs in process, without a transport.
// `TimestampOracle::grant(n)` with this process the leader (a SQLite registry and the oracle's
// floor in a temporary directory, the system clocks, as `flurry serve --tso` opens them on its
// default registry), beside `Generator::next_range(n)` on the same `tso` layout with a file
// horizon store: the oracle's generator without the lease, the gate after each grant and the
// counters. Both in the same run, on 1 and 2 threads; items_per_second is timestamps per second.
// The `tso` layout allows 262,144 values a millisecond (262M/s): a figure near that is the
// layout's limit, not the code's cost. See bench/README.md, "Timestamp oracle".
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/horizon.h"
#include "flurry/horizon_floor.h"
#include "flurry/layout.h"
#include "flurry/registry.h"
#include "flurry/timestamp_oracle.h"

namespace {

using namespace std::chrono_literals;

struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<flurry::NodeRegistry> registry;
  std::unique_ptr<flurry::HorizonFloor> floor;
  std::unique_ptr<flurry::TimestampOracle> oracle;
  std::unique_ptr<flurry::FileHorizonStore> store;
  std::unique_ptr<flurry::Generator> generator;
  std::string error;  // why the fixture could not be set up, when it is not empty
};

std::mutex g_mu;
std::unique_ptr<Fixture> g_fixture;

Fixture& fixture() {
  std::lock_guard lock(g_mu);
  if (g_fixture) return *g_fixture;
  g_fixture = std::make_unique<Fixture>();
  Fixture& f = *g_fixture;
  char dir_template[] = "/tmp/flurry-oracle-bench-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    f.error = "mkdtemp failed";
    return f;
  }
  f.dir = dir_template;
  flurry::Result<flurry::Layout> layout = flurry::Layout::parse("tso");
  if (!layout.ok()) {
    f.error = layout.status().to_string();
    return f;
  }
  const flurry::Clocks clocks = flurry::Clocks::system();
  flurry::Result<std::unique_ptr<flurry::NodeRegistry>> registry = flurry::open_sqlite_registry(
      (f.dir / "tso-registry.db").string(), 10s, clocks.wall, layout->to_string());
  if (!registry.ok()) {
    f.error = "registry: " + registry.status().to_string();
    return f;
  }
  f.registry = std::move(registry).value();
  f.floor = std::make_unique<flurry::HorizonFloor>(f.dir / "floor", "sqlite:bench;scope=tso",
                                                   layout->to_string());
  flurry::TsoOptions options;  // the service's defaults: max_lead 1 s, window 2 s
  flurry::Result<std::unique_ptr<flurry::TimestampOracle>> oracle =
      flurry::TimestampOracle::create(*f.registry, *f.floor, *layout, options, clocks);
  if (!oracle.ok()) {
    f.error = "oracle: " + oracle.status().to_string();
    return f;
  }
  f.oracle = std::move(oracle).value();
  if (flurry::Status st = f.oracle->start(
          {"127.0.0.1:1", "127.0.0.1:2", "oracle_bench:" + std::to_string(getpid())});
      !st.ok()) {
    f.error = "start: " + st.to_string();
    return f;
  }
  for (int i = 0; i < 3000 && !f.oracle->readiness().ok(); ++i) std::this_thread::sleep_for(10ms);
  if (flurry::Status st = f.oracle->readiness(); !st.ok()) {
    f.error = "not leading within 30 s: " + st.to_string();
    return f;
  }
  flurry::GeneratorOptions generator_options;  // defaults: max_lead 1 s, window 2 s
  generator_options.background_horizon = true;
  f.store = std::make_unique<flurry::FileHorizonStore>(
      flurry::FileHorizonStore::path_for(f.dir / "generator", generator_options.node));
  flurry::Result<std::unique_ptr<flurry::Generator>> generator =
      flurry::Generator::create(*layout, generator_options, clocks.wall, *f.store);
  if (!generator.ok()) {
    f.error = "generator: " + generator.status().to_string();
    return f;
  }
  f.generator = std::move(generator).value();
  return f;
}

void BM_Oracle_Grant(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  const auto n = static_cast<std::uint64_t>(state.range(0));
  std::uint64_t last = 0;
  for (auto _ : state) {
    flurry::Result<flurry::TsoGrant> grant = f.oracle->grant(n);
    if (!grant.ok()) return state.SkipWithError(grant.status().to_string().c_str());
    if (state.threads() == 1 && grant->first <= last) return state.SkipWithError("not increasing");
    last = grant->first + grant->count - 1;
    benchmark::DoNotOptimize(last);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

void BM_Generator_NextRange(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.error.empty()) return state.SkipWithError(f.error.c_str());
  const auto n = static_cast<std::uint64_t>(state.range(0));
  std::uint64_t last = 0;
  for (auto _ : state) {
    flurry::Result<std::uint64_t> first = f.generator->next_range(n);
    if (!first.ok()) return state.SkipWithError(first.status().to_string().c_str());
    if (state.threads() == 1 && *first <= last) return state.SkipWithError("not increasing");
    last = *first + n - 1;
    benchmark::DoNotOptimize(last);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
}

BENCHMARK(BM_Generator_NextRange)->Arg(1)->Arg(1000)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Oracle_Grant)->Arg(1)->Arg(1000)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  int rc = 0;
  if (g_fixture) {
    if (g_fixture->oracle) g_fixture->oracle->stop();
    if (g_fixture->generator) {
      if (flurry::Status st = g_fixture->generator->close(); !st.ok()) {
        std::fprintf(stderr, "oracle_bench: closing the generator: %s\n", st.to_string().c_str());
        rc = 1;
      }
    }
    const std::filesystem::path dir = g_fixture->dir;
    g_fixture.reset();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  return rc;
}

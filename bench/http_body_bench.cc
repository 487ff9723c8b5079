// The in-process ceiling of GET /v1/ids?count=1000 beside the HTTP figure of serve_bench.sh: on
// one thread, next_batch(1000) alone, the body written alone (write_id_list, the server's own
// writer) and the two together, on the wide layout serve_bench.sh uses for its batch figures,
// plus the body written with one std::to_chars per ID (how it was written before consecutive IDs
// were copied and carried) as the reference. items_per_second is IDs per second. See
// bench/README.md, "Large batches".
#include <benchmark/benchmark.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/generator.h"
#include "flurry/horizon.h"
#include "flurry/layout.h"
#include "flurry/wide_id.h"
#include "http/json_views.h"
#include "http/text.h"

namespace {

constexpr const char* kWideLayout = "time:41@1ms,node:4,seq:18;epoch=2025-01-01Z";
constexpr std::size_t kBatch = 1000;

struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<flurry::FileHorizonStore> store;
  std::unique_ptr<flurry::Generator> generator;
  std::string error;
};

Fixture& fixture() {
  static Fixture f = [] {
    Fixture made;
    char dir_template[] = "/tmp/flurry-http-body-bench-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) {
      made.error = "mkdtemp: " + std::error_code(errno, std::generic_category()).message();
      return made;
    }
    made.dir = dir_template;
    auto layout = flurry::Layout::parse(kWideLayout);
    if (!layout.ok()) {
      made.error = "layout: " + layout.status().to_string();
      return made;
    }
    flurry::GeneratorOptions options;
    options.background_horizon = true;
    made.store = std::make_unique<flurry::FileHorizonStore>(
        flurry::FileHorizonStore::path_for(made.dir / "wide", options.node));
    auto generator = flurry::Generator::create(std::move(layout).value(), options,
                                               flurry::SystemClock::coarse(), *made.store);
    if (!generator.ok()) {
      made.error = "Generator::create: " + generator.status().to_string();
      return made;
    }
    made.generator = std::move(generator).value();
    return made;
  }();
  return f;
}

// A batch as next_batch returns one, for the benchmarks that write without issuing.
std::array<std::uint64_t, kBatch> sample_batch() {
  std::array<std::uint64_t, kBatch> ids{};
  Fixture& f = fixture();
  if (f.generator && f.generator->next_batch(ids).ok()) return ids;
  for (std::size_t i = 0; i < kBatch; ++i) ids[i] = (std::uint64_t{1} << 62) + i;
  return ids;
}

const flurry::IdTextCodec kDecimal = flurry::IdTextCodec::of(flurry::Encoding::kDecimal);

void BM_NextBatch1000(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.generator) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  std::array<std::uint64_t, kBatch> ids{};
  for (auto _ : state) {
    if (flurry::Status st = f.generator->next_batch(ids); !st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(ids.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
}

void BM_WriteBody1000(benchmark::State& state) {
  const std::array<std::uint64_t, kBatch> ids = sample_batch();
  flurry::http::OutBuf body;
  for (auto _ : state) {
    body.clear();
    benchmark::DoNotOptimize(
        flurry::http::write_id_list(flurry::http::IdListFormat::kJson, kDecimal, ids, body));
    benchmark::DoNotOptimize(body.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}

// The reference: one conversion per ID, as the body was written before.
void BM_WriteBody1000_ToChars(benchmark::State& state) {
  const std::array<std::uint64_t, kBatch> ids = sample_batch();
  flurry::http::OutBuf body;
  for (auto _ : state) {
    body.clear();
    char* const start = body.tail(kBatch * (flurry::kMaxEncodedIdLength + 3) + 16);
    char* out = start;
    std::memcpy(out, "{\"ids\":[", 8);
    out += 8;
    for (const std::uint64_t id : ids) {
      *out++ = '"';
      out = kDecimal.write(out, id);
      *out++ = '"';
      *out++ = ',';
    }
    std::memcpy(out - 1, "]}\n", 3);
    out += 2;
    body.commit(static_cast<std::size_t>(out - start));
    benchmark::DoNotOptimize(body.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
}

void BM_NextBatch1000_WriteBody(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.generator) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  std::array<std::uint64_t, kBatch> ids{};
  flurry::http::OutBuf body;
  for (auto _ : state) {
    if (flurry::Status st = f.generator->next_batch(ids); !st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      break;
    }
    body.clear();
    benchmark::DoNotOptimize(
        flurry::http::write_id_list(flurry::http::IdListFormat::kJson, kDecimal, ids, body));
    benchmark::DoNotOptimize(body.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(kBatch));
}

BENCHMARK(BM_NextBatch1000)->UseRealTime();
BENCHMARK(BM_WriteBody1000)->UseRealTime();
BENCHMARK(BM_WriteBody1000_ToChars)->UseRealTime();
BENCHMARK(BM_NextBatch1000_WriteBody)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  Fixture& f = fixture();
  int rc = 0;
  if (f.generator) {
    if (flurry::Status st = f.generator->close(); !st.ok()) {
      std::fprintf(stderr, "http_body_bench: closing the generator: %s\n", st.to_string().c_str());
      rc = 1;
    }
    f.generator.reset();
  }
  f.store.reset();
  if (!f.dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(f.dir, ec);
  }
  return rc;
}

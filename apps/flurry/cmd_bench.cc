// flurry bench: in-process throughput of one generator, with every ID checked for uniqueness.
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "common.h"
#include "flurry/clock.h"
#include "flurry/generator.h"
#include "flurry/horizon.h"
#include "flurry/layout.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

struct BenchArgs {
  std::string layout = "flurry";
  std::string threads = "1";
  std::string seconds = "2";
  std::string batch = "1";
  bool json = false;
};

// IDs kept in memory over all threads (8 bytes each): the run stops early when reached.
constexpr std::uint64_t kMaxIds = 200'000'000;
constexpr std::uint64_t kMaxThreads = 1024;
constexpr std::uint64_t kMaxBatch = std::uint64_t{1} << 24;
constexpr double kMaxSeconds = 3600;

// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = "/tmp/flurry-bench-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) {
      path_ = pattern;
    } else {
      error_ = errno;
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] int error() const noexcept { return error_; }

 private:
  std::filesystem::path path_;
  int error_ = 0;
};

struct Worker {
  std::vector<std::uint64_t> ids;
  Status error;
};

// True when every ID of every worker occurs once. Each worker's IDs must already be sorted.
bool all_unique(const std::vector<Worker>& workers) {
  using Head = std::tuple<std::uint64_t, std::size_t, std::size_t>;  // value, worker, index
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    if (!workers[w].ids.empty()) heads.emplace(workers[w].ids[0], w, 0);
  }
  bool first = true;
  std::uint64_t previous = 0;
  while (!heads.empty()) {
    const auto [value, w, i] = heads.top();
    heads.pop();
    if (!first && value == previous) return false;
    first = false;
    previous = value;
    if (i + 1 < workers[w].ids.size()) heads.emplace(workers[w].ids[i + 1], w, i + 1);
  }
  return true;
}

int run_bench(const BenchArgs& args) {
  const std::uint64_t threads = parse_uint(args.threads, "--threads", 1, kMaxThreads);
  const double seconds = parse_seconds(args.seconds, "--seconds", kMaxSeconds);
  const std::uint64_t batch = parse_uint(args.batch, "--batch", 1, kMaxBatch);

  Result<Layout> parsed = Layout::parse(args.layout);
  if (!parsed.ok()) return fail(parsed.status());
  const double limit = parsed->rate_limit_per_second();

  TempDir dir;
  if (dir.path().empty()) {
    print_error(std::string("cannot create a temporary directory under /tmp: ") +
                std::strerror(dir.error()));
    return kExitFailure;
  }
  FileHorizonStore store(FileHorizonStore::path_for(dir.path(), 0));
  GeneratorOptions options;  // the defaults, background horizon included, as a server runs
  Result<std::unique_ptr<Generator>> created =
      Generator::create(std::move(parsed).value(), options, SystemClock::coarse(), store);
  if (!created.ok()) return fail(created.status());
  Generator& generator = **created;

  // Room for what the layout's rate allows over the run (plus the lead), within the cap.
  const std::uint64_t per_thread_cap = std::max<std::uint64_t>(kMaxIds / threads, batch);
  const double expected = limit * (seconds + 2.0) + static_cast<double>(batch);
  const std::uint64_t reserve = expected >= static_cast<double>(per_thread_cap)
                                    ? per_thread_cap
                                    : static_cast<std::uint64_t>(expected);

  std::vector<Worker> workers(static_cast<std::size_t>(threads));
  for (Worker& w : workers) w.ids.reserve(static_cast<std::size_t>(reserve));

  std::atomic<bool> stop{false};
  std::latch start(static_cast<std::ptrdiff_t>(threads + 1));
  const auto work = [&](Worker& w) {
    start.arrive_and_wait();
    std::vector<std::uint64_t>& ids = w.ids;
    try {
      while (!stop.load(std::memory_order_relaxed)) {
        if (ids.size() + batch > per_thread_cap) break;  // memory cap: end the run
        if (batch == 1) {
          Result<std::uint64_t> id = generator.next();
          if (!id.ok()) {
            w.error = id.status();
            break;
          }
          ids.push_back(*id);
        } else {
          const std::size_t old = ids.size();
          ids.resize(old + static_cast<std::size_t>(batch));
          Status s = generator.next_batch(std::span(ids.data() + old, batch));
          if (!s.ok()) {
            ids.resize(old);
            w.error = std::move(s);
            break;
          }
        }
      }
    } catch (const std::exception& e) {  // out of memory: keep what was collected
      w.error = Status(StatusCode::kResourceExhausted, Reason::kNone,
                       std::string("bench thread: ") + e.what());
    }
    stop.store(true, std::memory_order_relaxed);
  };
  std::vector<std::thread> pool;
  pool.reserve(workers.size());
  std::string spawn_error;
  for (Worker& w : workers) {
    try {
      pool.emplace_back(work, std::ref(w));
    } catch (const std::system_error& e) {
      spawn_error = e.what();
      stop.store(true);
      // Release the threads already waiting, as if the missing ones had arrived.
      start.count_down(static_cast<std::ptrdiff_t>(workers.size() - pool.size()));
      break;
    }
  }
  if (!spawn_error.empty()) {
    start.arrive_and_wait();
    for (std::thread& t : pool) t.join();
    (void)generator.close();
    print_error("cannot start a thread: " + spawn_error);
    return kExitFailure;
  }

  start.arrive_and_wait();
  const auto begin = std::chrono::steady_clock::now();
  const auto deadline = begin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(seconds));
  while (!stop.load(std::memory_order_relaxed)) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(5)));
  }
  stop.store(true, std::memory_order_relaxed);
  for (std::thread& t : pool) t.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();

  const Status closed = generator.close();
  for (const Worker& w : workers) {
    if (!w.error.ok()) return fail(w.error);
  }
  if (!closed.ok()) return fail(closed);

  std::uint64_t total = 0;
  bool increasing = true;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    std::vector<std::uint64_t>& ids = workers[i].ids;
    total += ids.size();
    if (std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<>()) != ids.end()) {
      increasing = false;
      print_error("thread " + std::to_string(i) + ": IDs are not strictly increasing");
      std::sort(ids.begin(), ids.end());
    }
  }
  const bool unique = all_unique(workers);
  if (!unique) print_error("duplicate IDs were issued");
  const double rate = elapsed > 0 ? static_cast<double>(total) / elapsed : 0;

  if (args.json) {
    nlohmann::ordered_json j;
    j["ids_per_second"] = rate;
    j["layout_limit_per_second"] = limit;
    j["threads"] = threads;
    j["seconds"] = elapsed;
    j["batch"] = batch;
    j["ids"] = total;
    j["unique"] = unique;
    std::cout << j.dump() << '\n';
  } else {
    std::cout << "ids_per_second           " << format_number(std::round(rate)) << '\n'
              << "layout_limit_per_second  " << format_number(limit) << '\n'
              << "threads                  " << threads << '\n'
              << "seconds                  " << format_number(std::round(elapsed * 1000) / 1000)
              << '\n'
              << "batch                    " << batch << '\n'
              << "ids                      " << total << '\n'
              << "unique                   " << (unique ? "true" : "false") << '\n';
  }
  return unique && increasing ? kExitOk : kExitFailure;
}

}  // namespace

Verb add_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure in-process throughput and check every ID issued is unique");
  cmd->add_option("--layout", args->layout, "Layout text or preset name")
      ->type_name("LAYOUT")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads calling the generator")
      ->type_name("T")
      ->capture_default_str();
  cmd->add_option("--seconds", args->seconds, "How long to run (decimals allowed)")
      ->type_name("S")
      ->capture_default_str();
  cmd->add_option("--batch", args->batch, "IDs per call: 1 uses next(), more uses next_batch()")
      ->type_name("B")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  return {cmd, [args] { return run_bench(*args); }};
}

}  // namespace flurry::cli

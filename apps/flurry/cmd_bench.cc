// flurry bench: in-process throughput of one generator, with every ID checked for uniqueness.
//
// What the figure includes: the generator calls alone. Each thread writes its IDs to its own
// buffer, mapped and pre-faulted before the clock starts (a page fault costs microseconds on a
// virtual machine; faulting the buffer in during the run cost more than the generator itself),
// and the order and uniqueness of the IDs are checked after the clock has stopped.
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

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
#include <nlohmann/json.hpp>
#include <optional>
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
#include "reference/textbook_snowflake.h"
#include "verbs.h"

namespace flurry::cli {
namespace {

struct BenchArgs {
  std::string layout = "flurry";
  std::string threads = "1";
  std::string seconds = "2";
  std::string batch = "1";
  bool json = false;
  bool reference = false;
};

// IDs kept in memory over all threads (8 bytes each): the run stops early when reached.
constexpr std::uint64_t kMaxIds = 200'000'000;
constexpr std::uint64_t kMaxThreads = 1024;
constexpr std::uint64_t kMaxBatch = std::uint64_t{1} << 24;
constexpr double kMaxSeconds = 3600;

// Printed beside the rate: what the timed part contains and what it leaves out.
constexpr std::string_view kMeasures =
    "generator calls only; IDs written to a pre-faulted buffer; "
    "order and uniqueness checked after timing";

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

// Room for one thread's IDs: anonymous memory, asked for in transparent huge pages (far fewer
// faults), and faulted in by prefault() so that no page fault falls inside the timed run.
class IdBuffer {
 public:
  IdBuffer() = default;
  IdBuffer(const IdBuffer&) = delete;
  IdBuffer& operator=(const IdBuffer&) = delete;
  ~IdBuffer() {
    if (data_ != nullptr) ::munmap(data_, bytes());
  }

  // Maps room for `capacity` IDs; returns errno on failure.
  int map(std::size_t capacity) {
    void* p = ::mmap(nullptr, capacity * sizeof(std::uint64_t), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return errno;
    data_ = static_cast<std::uint64_t*>(p);
    capacity_ = capacity;
#ifdef MADV_HUGEPAGE
    (void)::madvise(data_, bytes(), MADV_HUGEPAGE);  // a hint: no huge pages is no error
#endif
    return 0;
  }

  // Backs every page with memory now. Returns errno when the memory is not there.
  int prefault() {
#ifdef MADV_POPULATE_WRITE
    if (::madvise(data_, bytes(), MADV_POPULATE_WRITE) == 0) return 0;
    if (errno != EINVAL) return errno;  // EINVAL: a kernel older than 5.14; touch the pages
#endif
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    auto* bytes_view = reinterpret_cast<volatile unsigned char*>(data_);
    for (std::size_t i = 0; i < bytes(); i += page) bytes_view[i] = 0;
    return 0;
  }

  [[nodiscard]] std::uint64_t* data() const noexcept {
    return data_;
  }
  [[nodiscard]] std::size_t capacity() const noexcept {
    return capacity_;
  }

 private:
  [[nodiscard]] std::size_t bytes() const noexcept {
    return capacity_ * sizeof(std::uint64_t);
  }

  std::uint64_t* data_ = nullptr;
  std::size_t capacity_ = 0;
};

struct Worker {
  IdBuffer buffer;
  std::size_t count = 0;  // IDs written to the buffer
  bool full = false;      // stopped because the buffer had no room for another call
  Status error;

  [[nodiscard]] std::span<std::uint64_t> ids() const { return {buffer.data(), count}; }
};

struct Settings {
  std::uint64_t threads = 1;
  double seconds = 0;
  std::uint64_t batch = 1;
};

Settings parse_settings(const BenchArgs& args) {
  Settings s;
  s.threads = parse_uint(args.threads, "--threads", 1, kMaxThreads);
  s.seconds = parse_seconds(args.seconds, "--seconds", kMaxSeconds);
  s.batch = parse_uint(args.batch, "--batch", 1, kMaxBatch);
  return s;
}

// IDs one thread's buffer holds: what the layout's rate allows over the run (plus the lead),
// within kMaxIds over all threads and half of the free memory, and at least one batch.
std::size_t ids_per_thread(const Settings& s, double limit) {
  const auto page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  const auto free_pages = static_cast<double>(::sysconf(_SC_AVPHYS_PAGES));
  double cap = static_cast<double>(kMaxIds);
  if (page > 0 && free_pages > 0) cap = std::min(cap, free_pages * page / 2 / 8);
  cap /= static_cast<double>(s.threads);
  const double expected = limit * (s.seconds + 2.0) + static_cast<double>(s.batch);
  const double ids = std::max(std::min(expected, cap), static_cast<double>(s.batch));
  return static_cast<std::size_t>(ids);
}

// The timed loop of one thread: generator calls and a store of each ID, nothing else.
void generate(Generator& generator, Worker& w, std::uint64_t batch, const std::atomic<bool>& stop) {
  std::uint64_t* const begin = w.buffer.data();
  std::uint64_t* const end = begin + w.buffer.capacity();
  std::uint64_t* out = begin;
  if (batch == 1) {
    while (out != end && !stop.load(std::memory_order_relaxed)) {
      Result<std::uint64_t> id = generator.next();
      if (!id.ok()) {
        w.error = id.status();
        break;
      }
      *out++ = *id;
    }
  } else {
    const auto n = static_cast<std::size_t>(batch);
    while (static_cast<std::size_t>(end - out) >= n && !stop.load(std::memory_order_relaxed)) {
      Status s = generator.next_batch(std::span(out, n));
      if (!s.ok()) {
        w.error = std::move(s);
        break;
      }
      out += n;
    }
  }
  w.count = static_cast<std::size_t>(out - begin);
  w.full = w.error.ok() && !stop.load(std::memory_order_relaxed);
}

// The same loop around the textbook snowflake, one call per ID (it has no batches).
void generate_textbook(reference::TextbookSnowflake& textbook, Worker& w,
                       const std::atomic<bool>& stop) {
  std::uint64_t* const begin = w.buffer.data();
  std::uint64_t* const end = begin + w.buffer.capacity();
  std::uint64_t* out = begin;
  while (out != end && !stop.load(std::memory_order_relaxed)) {
    if (!textbook.next(*out)) {
      w.error = Status(Reason::kClockBehind, "the textbook snowflake saw the clock step back");
      break;
    }
    ++out;
  }
  w.count = static_cast<std::size_t>(out - begin);
  w.full = w.error.ok() && !stop.load(std::memory_order_relaxed);
}

// What one thread runs in the timed part.
using Body = std::function<void(Worker&, const std::atomic<bool>&)>;

// Runs the workers for `seconds` (or until one stops: buffer full or an error). Each thread
// pre-faults its buffer before the start; the clock runs from the start to the last join.
// Returns the elapsed seconds, or the reason no thread could be started.
Result<double> timed_run(std::vector<Worker>& workers, const Settings& s, const Body& body) {
  std::atomic<bool> stop{false};
  std::latch start(static_cast<std::ptrdiff_t>(workers.size() + 1));
  const auto work = [&](Worker& w) {
    if (int err = w.buffer.prefault(); err != 0) {
      w.error = Status(StatusCode::kResourceExhausted,
                       std::string("cannot pre-fault the ID buffer: ") + std::strerror(err));
      stop.store(true, std::memory_order_relaxed);
    }
    start.arrive_and_wait();
    if (w.error.ok()) body(w, stop);
    stop.store(true, std::memory_order_relaxed);
  };

  std::vector<std::thread> pool;
  pool.reserve(workers.size());
  for (Worker& w : workers) {
    try {
      pool.emplace_back(work, std::ref(w));
    } catch (const std::system_error& e) {
      stop.store(true);
      // Release the threads already waiting, as if the missing ones had arrived.
      start.count_down(static_cast<std::ptrdiff_t>(workers.size() - pool.size()));
      start.arrive_and_wait();
      for (std::thread& t : pool) t.join();
      return Status(StatusCode::kResourceExhausted,
                    std::string("cannot start a thread: ") + e.what());
    }
  }

  start.arrive_and_wait();
  const auto begin = std::chrono::steady_clock::now();
  const auto deadline = begin + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(s.seconds));
  while (!stop.load(std::memory_order_relaxed)) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(5)));
  }
  stop.store(true, std::memory_order_relaxed);
  for (std::thread& t : pool) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

// True when every ID of every worker occurs once. Each worker's IDs must already be sorted.
bool all_unique(const std::vector<Worker>& workers) {
  if (workers.size() == 1) return true;  // sorted and strictly increasing: nothing repeats
  using Head = std::tuple<std::uint64_t, std::size_t, std::size_t>;  // value, worker, index
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    if (workers[w].count > 0) heads.emplace(workers[w].ids()[0], w, 0);
  }
  bool first = true;
  std::uint64_t previous = 0;
  while (!heads.empty()) {
    const auto [value, w, i] = heads.top();
    heads.pop();
    if (!first && value == previous) return false;
    first = false;
    previous = value;
    if (i + 1 < workers[w].count) heads.emplace(workers[w].ids()[i + 1], w, i + 1);
  }
  return true;
}

struct Checked {
  std::uint64_t total = 0;
  bool increasing = true;  // each thread's IDs strictly increase
  bool unique = true;      // no ID was issued twice, over all threads
};

// The checks after timing. Sorts a thread's IDs that do not strictly increase (after saying so)
// so that uniqueness can still be checked.
Checked check_ids(std::vector<Worker>& workers) {
  Checked c;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const std::span<std::uint64_t> ids = workers[i].ids();
    c.total += ids.size();
    if (std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<>()) != ids.end()) {
      c.increasing = false;
      print_error("thread " + std::to_string(i) + ": IDs are not strictly increasing");
      std::sort(ids.begin(), ids.end());
    }
  }
  if (!c.increasing && workers.size() == 1) {
    c.unique = std::adjacent_find(workers[0].ids().begin(), workers[0].ids().end()) ==
               workers[0].ids().end();
  } else {
    c.unique = all_unique(workers);
  }
  if (!c.unique) print_error("duplicate IDs were issued");
  return c;
}

struct Report {
  double rate = 0;
  double limit = 0;
  std::uint64_t threads = 0;
  double elapsed = 0;
  std::uint64_t batch = 0;
  std::uint64_t ids = 0;
  bool unique = false;
  bool buffer_full = false;  // a thread's buffer filled up before the time was over
  // With --reference: the textbook snowflake through the same harness, just after.
  std::optional<double> reference_rate;
  double reference_elapsed = 0;
  std::uint64_t reference_ids = 0;
  bool reference_unique = false;
};

constexpr std::string_view kReferenceName =
    "textbook snowflake: one mutex, the fine clock in ms, one call per ID";

void print_report(const Report& r, bool json) {
  const char* stopped_by = r.buffer_full ? "buffer_full" : "time";
  if (json) {
    nlohmann::ordered_json j;
    j["ids_per_second"] = r.rate;
    j["layout_limit_per_second"] = r.limit;
    j["threads"] = r.threads;
    j["seconds"] = r.elapsed;
    j["batch"] = r.batch;
    j["ids"] = r.ids;
    j["unique"] = r.unique;
    j["stopped_by"] = stopped_by;
    j["measures"] = kMeasures;
    if (r.reference_rate) {
      j["reference"] = {{"name", kReferenceName},
                        {"ids_per_second", *r.reference_rate},
                        {"seconds", r.reference_elapsed},
                        {"ids", r.reference_ids},
                        {"unique", r.reference_unique}};
      j["ratio_to_reference"] = *r.reference_rate > 0 ? r.rate / *r.reference_rate : 0.0;
    }
    std::cout << j.dump() << '\n';
    return;
  }
  std::cout << "ids_per_second           " << format_number(std::round(r.rate)) << '\n'
            << "layout_limit_per_second  " << format_number(r.limit) << '\n'
            << "threads                  " << r.threads << '\n'
            << "seconds                  " << format_number(std::round(r.elapsed * 1000) / 1000)
            << '\n'
            << "batch                    " << r.batch << '\n'
            << "ids                      " << r.ids << '\n'
            << "unique                   " << (r.unique ? "true" : "false") << '\n'
            << "stopped_by               " << stopped_by << '\n'
            << "measures                 " << kMeasures << '\n';
  if (r.reference_rate) {
    const double ratio = *r.reference_rate > 0 ? r.rate / *r.reference_rate : 0.0;
    std::cout << "reference                " << kReferenceName << '\n'
              << "reference_ids_per_second " << format_number(std::round(*r.reference_rate)) << '\n'
              << "reference_unique         " << (r.reference_unique ? "true" : "false") << '\n'
              << "ratio_to_reference       " << format_number(std::round(ratio * 100) / 100)
              << '\n';
  }
}

// Maps one buffer of `capacity` IDs per worker; prints why not and returns false on failure.
bool map_buffers(std::vector<Worker>& workers, std::size_t capacity) {
  for (Worker& w : workers) {
    if (int err = w.buffer.map(capacity); err != 0) {
      print_error("cannot map " + std::to_string(capacity * sizeof(std::uint64_t) >> 20) +
                  " MiB for the IDs of a thread: " + std::strerror(err));
      return false;
    }
  }
  return true;
}

int run_bench(const BenchArgs& args) {
  const Settings settings = parse_settings(args);
  Result<Layout> parsed = Layout::parse(args.layout);
  if (!parsed.ok()) return fail(parsed.status());
  const double limit = parsed->rate_limit_per_second();
  // The reference issues IDs of the same width: the layout's node and sequence bits under a
  // time in milliseconds (node 0).
  const int node_bits = parsed->total_bits() - parsed->time_field().bits - parsed->seq_field().bits;
  const int seq_bits = parsed->seq_field().bits;

  const std::size_t capacity = ids_per_thread(settings, limit);
  std::vector<Worker> workers(static_cast<std::size_t>(settings.threads));
  if (!map_buffers(workers, capacity)) return kExitFailure;

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

  const Result<double> elapsed =
      timed_run(workers, settings, [&](Worker& w, const std::atomic<bool>& stop) {
        generate(generator, w, settings.batch, stop);
      });
  const Status closed = generator.close();
  if (!elapsed.ok()) {
    print_error(elapsed.status().message());
    return kExitFailure;
  }
  for (const Worker& w : workers) {
    if (!w.error.ok()) return fail(w.error);
  }
  if (!closed.ok()) return fail(closed);

  const Checked checked = check_ids(workers);
  Report r;
  r.rate = *elapsed > 0 ? static_cast<double>(checked.total) / *elapsed : 0;
  r.limit = limit;
  r.threads = settings.threads;
  r.elapsed = *elapsed;
  r.batch = settings.batch;
  r.ids = checked.total;
  r.unique = checked.unique;
  r.buffer_full =
      std::any_of(workers.begin(), workers.end(), [](const Worker& w) { return w.full; });
  bool reference_ok = true;
  if (args.reference) {
    // Fresh buffers, so both runs pay the same page faults (none: both are pre-faulted).
    workers = std::vector<Worker>(static_cast<std::size_t>(settings.threads));
    if (!map_buffers(workers, capacity)) return kExitFailure;
    reference::TextbookSnowflake textbook(node_bits, seq_bits, 0);
    const Result<double> ref_elapsed = timed_run(
        workers, settings,
        [&](Worker& w, const std::atomic<bool>& stop) { generate_textbook(textbook, w, stop); });
    if (!ref_elapsed.ok()) {
      print_error(ref_elapsed.status().message());
      return kExitFailure;
    }
    for (const Worker& w : workers) {
      if (!w.error.ok()) return fail(w.error);
    }
    const Checked ref = check_ids(workers);
    r.reference_rate = *ref_elapsed > 0 ? static_cast<double>(ref.total) / *ref_elapsed : 0;
    r.reference_elapsed = *ref_elapsed;
    r.reference_ids = ref.total;
    r.reference_unique = ref.unique;
    reference_ok = ref.unique && ref.increasing;
  }
  print_report(r, args.json);
  return checked.unique && checked.increasing && reference_ok ? kExitOk : kExitFailure;
}

}  // namespace

Verb add_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure in-process throughput of the generator calls alone (IDs go to a pre-faulted "
      "buffer) and check after timing that every ID issued is unique");
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
  cmd->add_flag("--reference", args->reference,
                "Then run the textbook snowflake (one mutex, the fine clock in ms) through the "
                "same harness and threads, and print its rate and the ratio");
  return {cmd, [args] { return run_bench(*args); }};
}

}  // namespace flurry::cli

// tso_load: the timestamp oracle's load client (gRPC `flurry.v1.Tso.Stream`) and, in the same
// binary, the do-nothing Tso server it is read against. See bench/README.md, "Timestamp oracle".
//
//   tso_load floor HOST:PORT [--overlap]
//       Serves `Tso.Stream` and `Tso.Get` with gRPC's callback API, as `flurry serve` does, but
//       with no work behind them: each request is answered with `first` from one fetch_add on an
//       atomic counter. Prints "listening PORT" once bound; serves until SIGTERM/SIGINT.
//       --overlap: each grant starts at the previous grant's last value, a fault the client's
//       checks must report (their negative control).
//   tso_load threads|async HOST:PORT [--seconds S] [--warmup S] [--callers N] [--connections C]
//                                    [--max-batch M]
//       N callers (default 1000) call tso() in a closed loop (each call starts when its previous
//       one returned) for S seconds (default 10) after a warm-up of W seconds (default 1, not
//       counted). `threads`: each caller is a thread blocked in tso(). `async`: each caller is a
//       continuation; tso() completes by calling it on the connection's thread, and it issues its
//       next call from there. C connections (default 1), each with one channel, ONE bidirectional
//       Stream and one dispatcher thread; callers are spread over them round robin.
//
// tso() follows PD's rule (issue 35's spec, "Clients: tso()"): a call joins the connection's
// pending list; the dispatcher sends one request at a time, whose count is the number of calls
// pending when it is sent (at most M, default unlimited), and gives each of those calls one value
// of the grant, in order. A call never gets a value from a request sent before it was made, and
// nothing is fetched ahead.
//
// Checks on every value received: each caller's values strictly increase; each call was answered
// by a request sent after the call was made (`stale` counts the others); no value repeats across
// all callers (every value is kept and sorted at the end; `repeats` counts equal neighbours).
// Prints one line of key=value pairs, e.g.
//   mode=async callers=1000 connections=1 seconds=10.00 calls=12345678 rate=1234567
//   batches=12345 batch_rate=1234 mean_batch=999.1 p50_us=810 p99_us=1650 p999_us=2100
//   max_us=5200 errors=0 values=13579000 all_batches=13579 client_cpu_s=10.9 switches=51234
//   repeats=0 order_violations=0 stale=0 ok=1
// (one line; `values`, `all_batches`, the client's CPU time and its context switches (voluntary
// and not, getrusage) cover the whole run, warm-up included; the rest is the measured window)
// and exits 1 when a call failed or a check did not hold.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flurry/v1/flurry.grpc.pb.h"

namespace {

namespace v1 = flurry::v1;
using Clock = std::chrono::steady_clock;

// ---- the floor: a Tso server that does no work ----

std::atomic<std::uint64_t> floor_next{1};
bool floor_overlap = false;  // --overlap: the negative control of the client's checks

// `count` numbers from the counter; with --overlap each grant's first value repeats the previous
// grant's last one, which the client's checks must report.
std::uint64_t floor_grant(std::uint64_t count) {
  const std::uint64_t step = floor_overlap && count > 0 ? count - 1 : count;
  return floor_next.fetch_add(step, std::memory_order_relaxed);
}

// One Stream: reads requests and answers each with `count` numbers from the counter, the next read
// overlapping the writes as in bench/grpc_floor.cc.
class FloorStream final : public grpc::ServerBidiReactor<v1::TsoRequest, v1::TsoResponse> {
 public:
  FloorStream() {
    std::lock_guard lock(mu_);
    reading_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::lock_guard lock(mu_);
    reading_ = false;
    if (!ok) {
      closed_ = true;
      return settle();
    }
    v1::TsoResponse response;
    response.set_first(floor_grant(request_.count()));
    response.set_count(request_.count());
    queue_.push_back(std::move(response));
    settle();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      closed_ = true;
      queue_.clear();
    }
    settle();
  }

  void OnDone() override { delete this; }

 private:
  void settle() {
    if (finished_) return;
    if (!writing_ && !queue_.empty()) {
      writing_ = true;
      StartWrite(&queue_.front());
    }
    if (!reading_ && !closed_ && queue_.size() < 64) {
      reading_ = true;
      StartRead(&request_);
    }
    if (closed_ && !reading_ && !writing_ && queue_.empty()) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }

  std::mutex mu_;
  v1::TsoRequest request_;
  std::deque<v1::TsoResponse> queue_;
  bool reading_ = false;
  bool writing_ = false;
  bool closed_ = false;
  bool finished_ = false;
};

class FloorTso final : public v1::Tso::CallbackService {
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const v1::TsoRequest* request,
                                v1::TsoResponse* response) override {
    response->set_first(floor_grant(request->count()));
    response->set_count(request->count());
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerBidiReactor<v1::TsoRequest, v1::TsoResponse>* Stream(
      grpc::CallbackServerContext*) override {
    return new FloorStream();
  }
};

std::atomic<bool> stop_serving{false};

int serve_floor(const std::string& address) {
  FloorTso service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "tso_load floor: cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("listening %d\n", port);
  std::fflush(stdout);
  std::signal(SIGTERM, [](int) { stop_serving.store(true); });
  std::signal(SIGINT, [](int) { stop_serving.store(true); });
  while (!stop_serving.load()) pause();
  server->Shutdown();
  return 0;
}

// ---- the client: tso() with PD's batching rule ----

// One tso() call. The caller sets on_done (async) or waits on `done` (threads); the connection
// fills in the rest before it completes the call.
struct Call {
  void (*on_done)(Call*) = nullptr;    // async: called on the connection's thread
  void* owner = nullptr;               // async: the caller, for on_done
  std::atomic<std::uint32_t> done{0};  // threads: set to 1 and notified
  std::uint64_t after_request = 0;     // requests the connection had sent when the call was made
  std::uint64_t request = 0;           // the request (1-based) whose grant answered the call
  std::uint64_t value = 0;
  bool ok = false;
};

// One channel, one Stream, one request in flight, sent by the connection's own dispatcher thread.
class Connection {
 public:
  Connection(const std::string& target, int index, std::uint64_t max_batch,
             Clock::time_point measure_from, Clock::time_point measure_to)
      : max_batch_(max_batch), measure_from_(measure_from), measure_to_(measure_to) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    args.SetInt("tso_load.connection", index);
    channel_ = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    thread_ = std::thread([this] { run(); });
  }

  // Joins the pending list; the call completes when a request sent after this moment is answered.
  void tso(Call* call) {
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      call->after_request = sent_;
      pending_.push_back(call);
      if (idle_) {
        idle_ = false;
        wake = true;
      }
    }
    if (wake) cv_.notify_one();
  }

  // Ends the dispatcher once nothing is pending (every caller has stopped calling).
  void stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // Read after stop().
  std::uint64_t batches = 0;      // requests sent in the measured window
  std::uint64_t all_batches = 0;  // requests answered, warm-up included
  std::uint64_t timestamps = 0;   // their counts summed
  std::uint64_t errors = 0;
  std::string last_error;

 private:
  void run() {
    std::unique_ptr<v1::Tso::Stub> stub = v1::Tso::NewStub(channel_);
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::TsoRequest, v1::TsoResponse>> stream;
    std::vector<Call*> batch;
    v1::TsoRequest request;
    v1::TsoResponse response;
    for (;;) {
      std::uint64_t seq = 0;
      {
        std::unique_lock lock(mu_);
        while (pending_.empty() && !stop_) {
          idle_ = true;
          cv_.wait(lock);
        }
        idle_ = false;
        if (pending_.empty()) break;  // stop_ and nothing left
        batch.clear();
        if (max_batch_ == 0 || pending_.size() <= max_batch_) {
          batch.swap(pending_);
        } else {
          const auto end = pending_.begin() + static_cast<std::ptrdiff_t>(max_batch_);
          batch.assign(pending_.begin(), end);
          pending_.erase(pending_.begin(), end);
        }
        seq = ++sent_;
      }
      if (!stream) {
        ctx = std::make_unique<grpc::ClientContext>();
        stream = stub->Stream(ctx.get());
      }
      const Clock::time_point sent_at = Clock::now();
      request.set_count(batch.size());
      bool ok = stream->Write(request) && stream->Read(&response);
      std::string why;
      if (ok && response.count() != batch.size()) {
        ok = false;
        why = "a grant of " + std::to_string(response.count()) + " for a request of " +
              std::to_string(batch.size());
      }
      if (!ok) {
        ++errors;
        ctx->TryCancel();
        const grpc::Status status = stream->Finish();
        last_error = !why.empty() ? why : status.error_message();
        stream.reset();
      } else {
        ++all_batches;
        if (sent_at >= measure_from_ && sent_at < measure_to_) {
          ++batches;
          timestamps += batch.size();
        }
      }
      for (std::size_t i = 0; i < batch.size(); ++i) {
        Call* call = batch[i];
        call->ok = ok;
        call->request = seq;
        call->value = ok ? response.first() + i : 0;
        if (call->on_done != nullptr) {
          call->on_done(call);
        } else {
          call->done.store(1, std::memory_order_release);
          call->done.notify_one();
        }
      }
      if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (stream) {
      stream->WritesDone();
      const grpc::Status status = stream->Finish();
      if (!status.ok()) {
        ++errors;
        last_error = status.error_message();
      }
    }
  }

  std::shared_ptr<grpc::Channel> channel_;
  const std::uint64_t max_batch_;
  const Clock::time_point measure_from_;
  const Clock::time_point measure_to_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Call*> pending_;  // guarded by mu_
  std::uint64_t sent_ = 0;      // guarded by mu_
  bool idle_ = false;           // guarded by mu_: the dispatcher waits on cv_
  bool stop_ = false;           // guarded by mu_
  std::thread thread_;
};

// ---- the load ----

struct Options {
  std::string mode, target;
  double seconds = 10, warmup = 1;
  std::size_t callers = 1000, connections = 1;
  std::uint64_t max_batch = 0;
};

// One caller: its call, its checks and what it measured. Touched only by the thread running the
// caller (its own thread, or the connection's thread in async mode) until the run has ended.
struct Caller {
  Call call;
  Connection* connection = nullptr;
  Clock::time_point started;
  Clock::time_point finished;
  std::uint64_t last = 0;
  std::uint64_t errors = 0;
  std::uint64_t order_violations = 0;
  std::uint64_t stale = 0;
  std::vector<std::uint64_t> values;
  std::vector<std::uint32_t> latencies_ns;  // calls started in the measured window
};

struct Run {
  Clock::time_point measure_from;
  Clock::time_point deadline;
  std::vector<Caller> callers;
  std::atomic<std::size_t> running{0};
  std::mutex done_mu;
  std::condition_variable done_cv;
};

Run* the_run = nullptr;  // for the async continuation, which gets only its Call

// Records the call that just completed; true when the caller calls again.
bool record(Run& run, Caller& c, Clock::time_point now) {
  const Call& call = c.call;
  if (!call.ok) {
    ++c.errors;
  } else {
    if (call.request <= call.after_request) ++c.stale;
    if (call.value <= c.last) ++c.order_violations;
    c.last = call.value;
    c.values.push_back(call.value);
    if (c.started >= run.measure_from && c.started < run.deadline) {
      c.latencies_ns.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(now - c.started).count(),
          UINT32_MAX)));
    }
  }
  c.finished = now;
  return now < run.deadline && c.errors < 100;
}

void caller_thread(Run& run, Caller& c) {
  for (;;) {
    c.call.done.store(0, std::memory_order_relaxed);
    c.started = Clock::now();
    c.connection->tso(&c.call);
    c.call.done.wait(0, std::memory_order_acquire);
    if (!record(run, c, Clock::now())) break;
  }
}

void async_done(Call* call) {
  Caller& c = *static_cast<Caller*>(call->owner);
  const Clock::time_point now = Clock::now();
  if (record(*the_run, c, now)) {
    c.started = now;
    c.connection->tso(&c.call);
    return;
  }
  if (the_run->running.fetch_sub(1) == 1) {
    std::lock_guard lock(the_run->done_mu);
    the_run->done_cv.notify_all();
  }
}

std::uint32_t percentile(const std::vector<std::uint32_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * sorted.size()))];
}

int load(const Options& o) {
  Run run;
  the_run = &run;
  const Clock::time_point t0 = Clock::now();
  const auto secs = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  run.measure_from = t0 + secs(o.warmup);
  run.deadline = run.measure_from + secs(o.seconds);
  std::vector<std::unique_ptr<Connection>> connections;
  for (std::size_t i = 0; i < o.connections; ++i) {
    connections.push_back(std::make_unique<Connection>(o.target, static_cast<int>(i), o.max_batch,
                                                       run.measure_from, run.deadline));
  }
  run.callers = std::vector<Caller>(o.callers);
  for (std::size_t i = 0; i < o.callers; ++i) {
    Caller& c = run.callers[i];
    c.connection = connections[i % o.connections].get();
    c.values.reserve(1 << 16);
    c.latencies_ns.reserve(1 << 16);
  }
  if (o.mode == "threads") {
    std::vector<std::thread> threads;
    threads.reserve(o.callers);
    for (Caller& c : run.callers) threads.emplace_back([&run, &c] { caller_thread(run, c); });
    for (std::thread& t : threads) t.join();
  } else {
    run.running.store(o.callers);
    for (Caller& c : run.callers) {
      c.call.on_done = async_done;
      c.call.owner = &c;
      c.started = Clock::now();
      c.connection->tso(&c.call);
    }
    std::unique_lock lock(run.done_mu);
    run.done_cv.wait(lock, [&run] { return run.running.load() == 0; });
  }
  for (auto& connection : connections) connection->stop();

  Clock::time_point end = run.deadline;
  std::uint64_t errors = 0, order_violations = 0, stale = 0, batches = 0, timestamps = 0,
                all_batches = 0;
  std::string last_error;
  std::vector<std::uint32_t> latencies;
  std::vector<std::uint64_t> values;
  for (const Caller& c : run.callers) {
    end = std::max(end, c.finished);
    errors += c.errors;
    order_violations += c.order_violations;
    stale += c.stale;
    latencies.insert(latencies.end(), c.latencies_ns.begin(), c.latencies_ns.end());
    values.insert(values.end(), c.values.begin(), c.values.end());
  }
  for (const auto& connection : connections) {
    batches += connection->batches;
    all_batches += connection->all_batches;
    timestamps += connection->timestamps;
    errors += connection->errors;
    if (!connection->last_error.empty()) last_error = connection->last_error;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // before the sorts: the client's CPU over the run
  const double cpu_s = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  std::sort(latencies.begin(), latencies.end());
  std::sort(values.begin(), values.end());
  std::uint64_t repeats = 0;
  for (std::size_t i = 1; i < values.size(); ++i) repeats += values[i] == values[i - 1] ? 1 : 0;
  const double elapsed = std::chrono::duration<double>(end - run.measure_from).count();
  const double window = std::chrono::duration<double>(run.deadline - run.measure_from).count();
  const bool ok =
      errors == 0 && repeats == 0 && order_violations == 0 && stale == 0 && !latencies.empty();
  std::printf(
      "mode=%s callers=%zu connections=%zu seconds=%.2f calls=%zu rate=%.0f batches=%llu "
      "batch_rate=%.0f mean_batch=%.1f p50_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f "
      "errors=%llu values=%zu all_batches=%llu client_cpu_s=%.2f switches=%ld repeats=%llu "
      "order_violations=%llu stale=%llu ok=%d\n",
      o.mode.c_str(), o.callers, o.connections, elapsed, latencies.size(),
      static_cast<double>(latencies.size()) / elapsed, static_cast<unsigned long long>(batches),
      static_cast<double>(batches) / window,
      batches == 0 ? 0.0 : static_cast<double>(timestamps) / static_cast<double>(batches),
      percentile(latencies, 0.50) / 1e3, percentile(latencies, 0.99) / 1e3,
      percentile(latencies, 0.999) / 1e3, latencies.empty() ? 0.0 : latencies.back() / 1e3,
      static_cast<unsigned long long>(errors), values.size(),
      static_cast<unsigned long long>(all_batches), cpu_s, usage.ru_nvcsw + usage.ru_nivcsw,
      static_cast<unsigned long long>(repeats), static_cast<unsigned long long>(order_violations),
      static_cast<unsigned long long>(stale), ok ? 1 : 0);
  if (!last_error.empty()) std::fprintf(stderr, "tso_load: last error: %s\n", last_error.c_str());
  return ok ? 0 : 1;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: tso_load floor HOST:PORT [--overlap]\n"
               "       tso_load threads|async HOST:PORT [--seconds S] [--warmup S] [--callers N]\n"
               "                [--connections C] [--max-batch M]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) usage();
  Options o;
  o.mode = argv[1];
  o.target = argv[2];
  if (o.mode == "floor") {
    if (argc == 4 && std::string(argv[3]) == "--overlap") {
      floor_overlap = true;
    } else if (argc != 3) {
      usage();
    }
    return serve_floor(o.target);
  }
  if (o.mode != "threads" && o.mode != "async") usage();
  for (int i = 3; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    const std::string flag = argv[i];
    char* end = nullptr;
    const double v = std::strtod(argv[i + 1], &end);
    if (end == argv[i + 1] || *end != '\0' || v < 0) usage();
    if (flag == "--seconds" && v > 0) {
      o.seconds = v;
    } else if (flag == "--warmup") {
      o.warmup = v;
    } else if (flag == "--callers" && v >= 1) {
      o.callers = static_cast<std::size_t>(v);
    } else if (flag == "--connections" && v >= 1) {
      o.connections = static_cast<std::size_t>(v);
    } else if (flag == "--max-batch") {
      o.max_batch = static_cast<std::uint64_t>(v);
    } else {
      usage();
    }
  }
  return load(o);
}

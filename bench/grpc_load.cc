// grpc_load: a load client for flurry's gRPC API (gRPC's callback API), for bench/serve_bench.sh.
//
//   grpc_load unary  HOST:PORT [seconds] [concurrency]   Ids.Next(count=1), `concurrency` calls in
//                                                        flight on one channel (default 50)
//   grpc_load stream HOST:PORT [seconds] [window]        Ids.Stream, count=1 messages on one
//                                                        connection, up to `window` requests
//                                                        ahead of the answers (default 64)
//   grpc_load range  HOST:PORT [count]                   Ids.StreamRange(count) (default 10^8)
//
// Every ID received is checked: unary IDs are unique (sorted at the end), stream and range IDs
// strictly increasing (one stream is issued in order). Prints one line of key=value pairs:
//   mode=unary calls=512345 seconds=10.00 rate=51234 p50_us=812 p99_us=1650 errors=0 ids_ok=1
// and exits 1 when a call failed or a check did not hold.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "flurry/v1/flurry.grpc.pb.h"

namespace {

namespace v1 = flurry::v1;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::shared_ptr<grpc::Channel> connect(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

// Waits until `n` parties called done().
class Latch {
 public:
  explicit Latch(int n) : left_(n) {}
  void done() {
    std::lock_guard lock(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

// ---- unary ----

struct Slot {
  std::unique_ptr<grpc::ClientContext> ctx;
  v1::NextRequest request;
  v1::NextResponse response;
  Clock::time_point started;
  std::vector<std::uint32_t> latencies_us;
  std::vector<std::uint64_t> ids;
  std::uint64_t errors = 0;
  std::string last_error;
};

class UnaryLoad {
 public:
  UnaryLoad(std::shared_ptr<grpc::Channel> channel, int concurrency, double seconds)
      : stub_(v1::Ids::NewStub(std::move(channel))),
        slots_(static_cast<std::size_t>(concurrency)),
        latch_(concurrency),
        seconds_(seconds) {}

  int run() {
    t0_ = Clock::now();
    deadline_ =
        t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_));
    for (Slot& s : slots_) {
      s.request.set_count(1);
      launch(s);
    }
    latch_.wait();
    const double elapsed = seconds_since(t0_);
    std::vector<std::uint32_t> lat;
    std::vector<std::uint64_t> ids;
    std::uint64_t errors = 0;
    std::string last_error;
    for (Slot& s : slots_) {
      lat.insert(lat.end(), s.latencies_us.begin(), s.latencies_us.end());
      ids.insert(ids.end(), s.ids.begin(), s.ids.end());
      errors += s.errors;
      if (!s.last_error.empty()) last_error = s.last_error;
    }
    std::sort(lat.begin(), lat.end());
    std::sort(ids.begin(), ids.end());
    const bool unique = std::adjacent_find(ids.begin(), ids.end()) == ids.end();
    const auto pct = [&](double p) {
      return lat.empty() ? 0u
                         : lat[std::min(lat.size() - 1, static_cast<std::size_t>(p * lat.size()))];
    };
    std::printf(
        "mode=unary calls=%zu seconds=%.2f rate=%.0f p50_us=%u p99_us=%u errors=%llu ids_ok=%d\n",
        lat.size(), elapsed, static_cast<double>(lat.size()) / elapsed, pct(0.50), pct(0.99),
        static_cast<unsigned long long>(errors), unique ? 1 : 0);
    if (!last_error.empty())
      std::fprintf(stderr, "grpc_load: last error: %s\n", last_error.c_str());
    return errors == 0 && unique && !lat.empty() ? 0 : 1;
  }

 private:
  void launch(Slot& s) {
    s.ctx = std::make_unique<grpc::ClientContext>();
    s.started = Clock::now();
    stub_->async()->Next(s.ctx.get(), &s.request, &s.response,
                         [this, &s](grpc::Status status) { finished(s, status); });
  }

  void finished(Slot& s, const grpc::Status& status) {
    const Clock::time_point now = Clock::now();
    if (status.ok() && s.response.ids_size() == 1) {
      s.latencies_us.push_back(static_cast<std::uint32_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(now - s.started).count()));
      s.ids.push_back(s.response.ids(0));
    } else {
      ++s.errors;
      s.last_error = status.error_message();
    }
    if (now < deadline_ && s.errors < 100) {
      launch(s);
    } else {
      latch_.done();
    }
  }

  std::unique_ptr<v1::Ids::Stub> stub_;
  std::vector<Slot> slots_;
  Latch latch_;
  double seconds_;
  Clock::time_point t0_;
  Clock::time_point deadline_;
};

// ---- stream ----

class StreamLoad final : public grpc::ClientBidiReactor<v1::NextRequest, v1::NextResponse> {
 public:
  StreamLoad(std::shared_ptr<grpc::Channel> channel, double seconds, std::uint64_t window)
      : stub_(v1::Ids::NewStub(std::move(channel))), seconds_(seconds), window_(window) {}

  int run() {
    request_.set_count(1);
    t0_ = Clock::now();
    deadline_ =
        t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_));
    stub_->async()->Stream(&ctx_, this);
    StartRead(&response_);
    {
      std::lock_guard lock(mu_);
      write_more();
    }
    StartCall();
    latch_.wait();
    const double elapsed = seconds_since(t0_);
    std::printf("mode=stream ids=%llu seconds=%.2f rate=%.0f errors=%d ids_ok=%d\n",
                static_cast<unsigned long long>(received_), elapsed,
                static_cast<double>(received_) / elapsed, status_.ok() ? 0 : 1, ordered_ ? 1 : 0);
    if (!status_.ok()) std::fprintf(stderr, "grpc_load: %s\n", status_.error_message().c_str());
    return status_.ok() && ordered_ && received_ > 0 ? 0 : 1;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mu_);
    writing_ = false;
    if (!ok) return;
    ++written_;
    write_more();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    {
      std::lock_guard lock(mu_);
      for (const std::uint64_t id : response_.ids()) {
        if (id <= last_) ordered_ = false;
        last_ = id;
        ++received_;
      }
      if (!stopping_ && Clock::now() >= deadline_) stopping_ = true;
      write_more();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    status_ = status;
    latch_.done();
  }

 private:
  // Called with mu_ held: one more request while fewer than window_ are unanswered, or the end of
  // the writes once the time is up and nothing is being written.
  void write_more() {
    if (writing_ || writes_done_) return;
    if (stopping_) {
      writes_done_ = true;
      StartWritesDone();
      return;
    }
    if (written_ - received_ >= window_) return;
    writing_ = true;
    StartWrite(&request_);
  }

  std::unique_ptr<v1::Ids::Stub> stub_;
  grpc::ClientContext ctx_;
  v1::NextRequest request_;
  v1::NextResponse response_;
  double seconds_;
  std::uint64_t window_;
  Clock::time_point t0_;
  Clock::time_point deadline_;
  std::mutex mu_;
  bool writing_ = false;
  bool stopping_ = false;
  bool writes_done_ = false;
  std::uint64_t written_ = 0;
  std::uint64_t received_ = 0;
  std::uint64_t last_ = 0;
  bool ordered_ = true;
  grpc::Status status_;
  Latch latch_{1};
};

// ---- range ----

class RangeLoad final : public grpc::ClientReadReactor<v1::IdChunk> {
 public:
  RangeLoad(std::shared_ptr<grpc::Channel> channel, std::uint64_t count)
      : stub_(v1::Ids::NewStub(std::move(channel))) {
    request_.set_count(count);
  }

  int run() {
    t0_ = Clock::now();
    stub_->async()->StreamRange(&ctx_, &request_, this);
    StartRead(&chunk_);
    StartCall();
    latch_.wait();
    const double elapsed = seconds_since(t0_);
    const bool all = received_ == request_.count();
    std::printf("mode=range ids=%llu seconds=%.2f rate=%.0f errors=%d ids_ok=%d\n",
                static_cast<unsigned long long>(received_), elapsed,
                static_cast<double>(received_) / elapsed, status_.ok() ? 0 : 1,
                ordered_ && all ? 1 : 0);
    if (!status_.ok()) std::fprintf(stderr, "grpc_load: %s\n", status_.error_message().c_str());
    return status_.ok() && ordered_ && all ? 0 : 1;
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const std::string& packed = chunk_.ids();
    const std::size_t n = packed.size() / 8;
    if (packed.size() % 8 != 0) ordered_ = false;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t id = 0;
      std::memcpy(&id, packed.data() + i * 8, 8);  // little-endian on the machines we bench on
      if (id <= last_) ordered_ = false;
      last_ = id;
    }
    received_ += n;
    StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override {
    status_ = status;
    latch_.done();
  }

 private:
  std::unique_ptr<v1::Ids::Stub> stub_;
  grpc::ClientContext ctx_;
  v1::RangeRequest request_;
  v1::IdChunk chunk_;
  Clock::time_point t0_;
  std::uint64_t received_ = 0;
  std::uint64_t last_ = 0;
  bool ordered_ = true;
  grpc::Status status_;
  Latch latch_{1};
};

int usage() {
  std::fprintf(stderr,
               "usage: grpc_load unary HOST:PORT [seconds] [concurrency]\n"
               "       grpc_load stream HOST:PORT [seconds] [window]\n"
               "       grpc_load range HOST:PORT [count]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string mode = argv[1];
  auto channel = connect(argv[2]);
  const auto number = [&](int i, double fallback) {
    return argc > i ? std::strtod(argv[i], nullptr) : fallback;
  };
  if (mode == "unary") {
    UnaryLoad load(channel, static_cast<int>(number(4, 50)), number(3, 10));
    return load.run();
  }
  if (mode == "stream") {
    StreamLoad load(channel, number(3, 10), static_cast<std::uint64_t>(number(4, 64)));
    return load.run();
  }
  if (mode == "range") {
    RangeLoad load(channel, static_cast<std::uint64_t>(number(3, 1e8)));
    return load.run();
  }
  return usage();
}

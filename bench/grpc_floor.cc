// grpc_floor: the reference for flurry's gRPC figures in bench/serve_bench.sh. It serves the same
// `flurry.v1.Ids` Next and Stream methods with gRPC's callback API, as `flurry serve` does, but
// does no work of its own: each answer is one increment of an atomic counter. What it reaches with
// bench/grpc_load in the same run is what gRPC itself allows on the machine; flurry's figures are
// read beside it.
//
//   grpc_floor HOST:PORT      serves until SIGTERM/SIGINT; prints "listening PORT" once bound
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>

#include "flurry/v1/flurry.grpc.pb.h"

namespace {

namespace v1 = flurry::v1;

std::atomic<std::uint64_t> next_id{1};

// One Stream: reads requests and answers each with count fresh numbers, the next read overlapping
// the writes like flurry's own stream does.
class FloorStream final : public grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse> {
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
    v1::NextResponse response;
    for (std::uint64_t i = 0; i < request_.count(); ++i) {
      response.add_ids(next_id.fetch_add(1, std::memory_order_relaxed));
    }
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
  v1::NextRequest request_;
  std::deque<v1::NextResponse> queue_;
  bool reading_ = false;
  bool writing_ = false;
  bool closed_ = false;
  bool finished_ = false;
};

class FloorIds final : public v1::Ids::CallbackService {
  grpc::ServerUnaryReactor* Next(grpc::CallbackServerContext* ctx, const v1::NextRequest* request,
                                 v1::NextResponse* response) override {
    for (std::uint64_t i = 0; i < request->count(); ++i) {
      response->add_ids(next_id.fetch_add(1, std::memory_order_relaxed));
    }
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>* Stream(
      grpc::CallbackServerContext*) override {
    return new FloorStream();
  }
};

std::atomic<bool> stop{false};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: grpc_floor HOST:PORT\n");
    return 2;
  }
  FloorIds service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(argv[1], grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "grpc_floor: cannot listen on %s\n", argv[1]);
    return 1;
  }
  std::printf("listening %d\n", port);
  std::fflush(stdout);
  std::signal(SIGTERM, [](int) { stop.store(true); });
  std::signal(SIGINT, [](int) { stop.store(true); });
  while (!stop.load()) pause();
  server->Shutdown();
  return 0;
}

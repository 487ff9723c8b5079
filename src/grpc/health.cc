// Health and reflection (health.h).
#include "health.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <malloc.h>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>

#include "flurry/timestamp_oracle.h"

namespace flurry::grpc_api {
namespace {

// How often health follows readiness: NOT_SERVING within a second of /readyz turning 503.
constexpr std::chrono::milliseconds kHealthPoll{200};
// The services whose health mirrors readiness ("" is the server as a whole).
constexpr std::array<const char*, 2> kHealthServices = {"", "flurry.v1.Ids"};
// SERVING only on the timestamp oracle's leader.
constexpr const char* kTsoHealthService = "flurry.v1.Tso";

}  // namespace

void enable_health_and_reflection() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
}

void Health::start(grpc::Server& server) {
  server_ = &server;
  follow_readiness();
  watcher_ = std::thread([this] { watch(); });
}

void Health::shutdown() {
  {
    MutexLock lock(mu_);
    if (shutting_down_) return;
    shutting_down_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  // Every service NOT_SERVING, for good: Watch streams are told now, before the drain.
  if (server_) server_->GetHealthCheckService()->Shutdown();
}

// Sets every mirrored health service from readiness, and flurry.v1.Tso from the oracle's; logs
// a change.
void Health::follow_readiness() {
  if (const TimestampOracle* tso = ops_.tso_oracle(); tso != nullptr) {
    const Status granting = tso->readiness();
    if (!tso_serving_ || *tso_serving_ != granting.ok()) {
      tso_serving_ = granting.ok();
      server_->GetHealthCheckService()->SetServingStatus(kTsoHealthService, granting.ok());
      spdlog::info("event=grpc_health service={} status={} reason={}", kTsoHealthService,
                   granting.ok() ? "SERVING" : "NOT_SERVING", to_string(granting.reason()));
    }
  }
  const Status ready = ops_.readiness();
  if (serving_ && *serving_ == ready.ok()) return;
  serving_ = ready.ok();
  for (const char* service : kHealthServices) {
    server_->GetHealthCheckService()->SetServingStatus(service, ready.ok());
  }
  if (ready.ok()) {
    spdlog::info("event=grpc_health status=SERVING");
  } else {
    spdlog::warn("event=grpc_health status=NOT_SERVING reason={}", to_string(ready.reason()));
  }
}

void Health::watch() {
  MutexLock lock(mu_);
  bool streams_seen = false;
  while (!shutting_down_) {
    lock.wait_for(cv_, kHealthPoll, [&]() FLURRY_REQUIRES(mu_) { return shutting_down_; });
    if (shutting_down_) break;
    lock.unlock();
    follow_readiness();
    // Once the last StreamRange has ended, what its chunks and gRPC's buffers held goes back
    // to the system rather than staying in malloc's free lists (a client that opened many
    // streams and went away leaves the server as it found it).
    const bool streams = streams_.streams() != 0;
    if (streams_seen && !streams) ::malloc_trim(0);
    streams_seen = streams;
    lock.lock();
  }
}

}  // namespace flurry::grpc_api

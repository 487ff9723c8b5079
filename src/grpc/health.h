// grpc.health.v1 and server reflection. The overall service "" and "flurry.v1.Ids" mirror
// Operations::readiness(), polled every kHealthPoll (NOT_SERVING within a second of /readyz
// turning 503, SERVING again after it recovers); shutdown() makes every service NOT_SERVING for
// good. "flurry.v1.Tso", on a server with the timestamp oracle (Operations::tso_served), follows
// the oracle's readiness instead: SERVING only while this process can grant (the leader), by the
// same poll. The same poll gives memory back to the system once the last stream has ended.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <optional>
#include <thread>

#include "flurry/mutex.h"
#include "ops/operations.h"
#include "stream_budget.h"

namespace flurry::grpc_api {

// Turns on gRPC's default health service and the reflection plugin for every server built after
// it (call it before grpc::ServerBuilder::BuildAndStart).
void enable_health_and_reflection();

// start() and shutdown() from the server's life cycle; the poll runs on a thread of its own.
class Health {
 public:
  // `ops` and `streams` must outlive this.
  Health(ops::Operations& ops, const StreamBudget& streams) : ops_(ops), streams_(streams) {}
  Health(const Health&) = delete;
  Health& operator=(const Health&) = delete;
  ~Health() { shutdown(); }

  // Sets the mirrored services of `server` (which must outlive this) from readiness now, then
  // every kHealthPoll.
  void start(grpc::Server& server) FLURRY_EXCLUDES(mu_);

  // Stops the poll and makes every service NOT_SERVING for good (Watch streams are told at
  // once). Idempotent; nothing to do for a server never started.
  void shutdown() FLURRY_EXCLUDES(mu_);

 private:
  void follow_readiness();
  void watch() FLURRY_EXCLUDES(mu_);

  ops::Operations& ops_;
  const StreamBudget& streams_;
  grpc::Server* server_ = nullptr;   // set by start(), before the poll starts
  std::optional<bool> serving_;      // what health says now (touched by one thread at a time)
  std::optional<bool> tso_serving_;  // likewise for flurry.v1.Tso
  std::thread watcher_;

  Mutex mu_;
  std::condition_variable cv_;
  bool shutting_down_ FLURRY_GUARDED_BY(mu_) = false;
};

}  // namespace flurry::grpc_api

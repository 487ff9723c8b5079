// The gRPC front end: the flurry.v1 services (proto/flurry/v1/flurry.proto) over the operations
// layer (flurry/ops/operations.h), grpc.health.v1 and server reflection. A thin adapter: it turns
// messages into the typed values of the operations layer (IdCount, SegmentTag, Encoding), calls
// Operations, and turns results and Status into messages, gRPC status codes and trailing metadata
// (`flurry-reason`, and `retry-after-ms` where ops::retry_advice says to retry, as HTTP's
// Retry-After; both again as google.rpc.ErrorInfo and RetryInfo in grpc-status-details-bin). It
// builds none of the operations.
//
// Threads: RPCs run on gRPC's callback threads with Blocking::kNever; an operation that would
// block (WOULD_BLOCK with a Deferral) is run again with Blocking::kAllowed on the pool the
// Deferral names (the same ops::Pools HTTP uses), and answered from there.
//
// Health: the overall service "" and "flurry.v1.Ids" mirror Operations::readiness(), polled
// every 200 ms (NOT_SERVING within a second of /readyz turning 503, SERVING again after it
// recovers); begin_shutdown() makes every service NOT_SERVING for good.
//
// This header includes nothing of gRPC: the server lives behind a pointer (src/grpc).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "flurry/clock.h"
#include "flurry/ops/deferral.h"
#include "flurry/ops/operations.h"
#include "flurry/server/grpc_options.h"
#include "flurry/server/prometheus.h"
#include "flurry/status.h"

namespace flurry::grpc_api {

class GrpcServer {
 public:
  // Listens on options.listen (which must be set) and starts serving. `operations`, `pools` and
  // `clock` must outlive the server; the service behind `operations` should be started (RPCs
  // before that answer UNAVAILABLE, and health says NOT_SERVING). UNAVAILABLE / IO naming the
  // address when it cannot listen there.
  [[nodiscard]] static Result<std::unique_ptr<GrpcServer>> start(ops::Operations& operations,
                                                                 ops::Pools& pools,
                                                                 const server::GrpcOptions& options,
                                                                 MonotonicClock& clock);
  ~GrpcServer();  // stop(0)
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // "127.0.0.1:7610": the address and the port listened on (the chosen one for port 0).
  [[nodiscard]] std::string local_address() const;

  // Every health service NOT_SERVING from now on (Watch streams are told at once), before a
  // graceful stop drains. Idempotent.
  void begin_shutdown();

  // begin_shutdown(), then stops accepting RPCs, lets those in flight finish for up to `drain`
  // and cancels the rest (a cancelled StreamRange issues no more IDs). Returns once every RPC is
  // done. Idempotent.
  void stop(std::chrono::milliseconds drain);

  // flurry_grpc_requests_total{method,code}, flurry_grpc_errors_total{method,reason},
  // flurry_grpc_request_duration_seconds{method} (histogram), flurry_grpc_stream_messages_total
  // {method} and flurry_grpc_ids_sent_total{method}.
  void write_metrics(server::PrometheusWriter& out) const;

  class Impl;  // src/grpc/grpc_server.cc

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flurry::grpc_api

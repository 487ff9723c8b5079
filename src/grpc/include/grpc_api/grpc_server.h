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
// Loading: the adapter is built as a module of its own (flurry_grpc.so, src/grpc), so that a
// server without gRPC never maps libgrpc, protobuf or Abseil. `flurry serve` loads it with
// dlopen() when grpc_listen is set (apps/flurry/grpc_module.h) and calls its one entry point,
// kGrpcModuleEntry (a GrpcModuleStart); everything else crosses the boundary through the virtual
// functions of GrpcServer. The module's references to flurry's own code bind to the executable's
// (which exports them, apps/flurry/exported.symbols), so both share one copy of it.
//
// This header includes nothing of gRPC: the server lives behind this interface (src/grpc).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "flurry/clock.h"
#include "flurry/status.h"
#include "grpc_options.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "service/prometheus.h"

namespace flurry::grpc_api {

class GrpcServer {
 public:
  // Listens on options.listen (which must be set) and starts serving. `operations`, `pools` and
  // `clock` must outlive the server; the service behind `operations` should be started (RPCs
  // before that answer UNAVAILABLE, and health says NOT_SERVING). UNAVAILABLE / IO naming the
  // address when it cannot listen there. Defined in the module: callers outside it go through
  // kGrpcModuleEntry.
  [[nodiscard]] static Result<std::unique_ptr<GrpcServer>> start(
      ops::Operations& operations, ops::Pools& pools, const grpc_api::GrpcOptions& options,
      MonotonicClock& clock);
  virtual ~GrpcServer() = default;  // stop(0)
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // "127.0.0.1:7610": the address and the port listened on (the chosen one for port 0).
  [[nodiscard]] virtual std::string local_address() const = 0;

  // Every health service NOT_SERVING from now on (Watch streams are told at once), before a
  // graceful stop drains. Idempotent.
  virtual void begin_shutdown() = 0;

  // begin_shutdown(), then stops accepting RPCs, lets those in flight finish for up to `drain`
  // and cancels the rest (a cancelled StreamRange issues no more IDs). Returns once every RPC is
  // done. Idempotent.
  virtual void stop(std::chrono::milliseconds drain) = 0;

  // flurry_grpc_requests_total{method,code}, flurry_grpc_errors_total{method,reason},
  // flurry_grpc_request_duration_seconds{method} (histogram), flurry_grpc_stream_messages_total
  // {method} and flurry_grpc_ids_sent_total{method}.
  virtual void write_metrics(service::PrometheusWriter& out) const = 0;

 protected:
  GrpcServer() = default;
};

// The module's one entry point: GrpcServer::start, and the flurry version the module was built
// from (a module of another build is refused before it is called).
using GrpcModuleStart = Result<std::unique_ptr<GrpcServer>> (*)(
    ops::Operations& operations, ops::Pools& pools, const grpc_api::GrpcOptions& options,
    MonotonicClock& clock);
struct GrpcModule {
  const char* version;  // FLURRY_VERSION of the module's build
  GrpcModuleStart start;
};
// The extern "C" symbol of the module: a `const GrpcModule`.
inline constexpr const char* kGrpcModuleEntry = "flurry_grpc_module_v1";

}  // namespace flurry::grpc_api

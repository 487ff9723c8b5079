// Running one call of the gRPC adapter, shared by every handler and stream: the operations layer
// and its pools, the options, the clock, admission by scope (kMethodScopes), the end of a call
// (to_grpc_status and the metrics), and the unary pattern (run with Blocking::kNever on gRPC's
// callback thread; when it would block, again with Blocking::kAllowed on the pool its Deferral
// names). Thread-safe: everything here is called from any of gRPC's and the pools' threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <array>
#include <cstdint>
#include <utility>

#include "call_metrics.h"
#include "flurry/clock.h"
#include "flurry/status.h"
#include "grpc_api/grpc_options.h"
#include "methods.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "stream_budget.h"

namespace flurry::grpc_api {

class Calls {
 public:
  // `operations`, `pools` and `clock` must outlive this.
  Calls(ops::Operations& operations, ops::Pools& pools, const grpc_api::GrpcOptions& options,
        MonotonicClock& clock);
  Calls(const Calls&) = delete;
  Calls& operator=(const Calls&) = delete;

  // The end of an RPC: the status with `flurry-reason` and `retry-after-ms` as trailing
  // metadata, and the metrics. Called exactly once per RPC, before its reactor finishes. A
  // NOT_LEADER (a call only the timestamp oracle's leader serves) goes out with the leader's
  // addresses (Operations::tso_leader, to_grpc_status), or as NO_LEADER when no leader is
  // known.
  grpc::Status answer(Method method, grpc::CallbackServerContext& ctx, const Status& status,
                      MonoTime started);

  void count_sent(Method method, std::uint64_t ids) { metrics_.count_sent(method, ids); }

  // Admits a call to `method` by the scope kMethodScopes gives it (ops::Authorizer::admit with
  // its `authorization` metadata): every RPC passes here before its operation runs (unary()
  // and refuse() call it; the streams at their start).
  Status admit(Method method, const grpc::CallbackServerContext& ctx, Blocking blocking,
               ops::Deferral& deferral);

  // Runs `op(Blocking, Deferral&) -> Status` for a unary RPC, admitted first (admit()): with
  // Blocking::kNever here; when it would block, again with Blocking::kAllowed on the pool its
  // Deferral names (skipped when the client gave up meanwhile, so nothing is issued for
  // nobody). `op` fills the response itself on success.
  template <typename Op>
  grpc::ServerUnaryReactor* unary(Method method, grpc::CallbackServerContext* ctx, Op run) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    const MonoTime started = clock_.now();
    ops::Deferral deferral;
    auto op = [this, method, ctx, run = std::move(run)](Blocking blocking,
                                                        ops::Deferral& d) mutable -> Status {
      if (Status st = admit(method, *ctx, blocking, d); !st.ok()) return st;
      return run(blocking, d);
    };
    Status status = op(Blocking::kNever, deferral);
    if (status.reason() != Reason::kWouldBlock) {
      reactor->Finish(answer(method, *ctx, status, started));
      return reactor;
    }
    pools_.post(deferral.pool, [this, method, ctx, reactor, started, deferral,
                                op = std::move(op)]() mutable {
      Status late = ctx->IsCancelled()
                        ? Status(StatusCode::kCancelled, "the client cancelled the call")
                        : op(Blocking::kAllowed, deferral);
      reactor->Finish(answer(method, *ctx, late, started));
    });
    return reactor;
  }

  // A unary RPC that failed while its message was read: the credential's refusal if it has
  // one (a caller without the scope learns nothing about its message), else `status`.
  grpc::ServerUnaryReactor* refuse(Method method, grpc::CallbackServerContext* ctx, Status status);

  // flurry_grpc_* (GrpcServer::write_metrics), with the listener's `connections_rejected`.
  void write_metrics(service::PrometheusWriter& out, std::uint64_t connections_rejected) const {
    metrics_.write(out, connections_rejected, stream_budget_);
  }

  // What the handlers and streams use: set once, at construction (the budget is thread-safe).
  ops::Operations& ops_;
  ops::Pools& pools_;
  const grpc_api::GrpcOptions options_;
  MonotonicClock& clock_;
  StreamBudget stream_budget_;

 private:
  CallMetrics metrics_;
  // Asked once: an open method (Ids.Next by default) costs one test of a bool per call.
  std::array<bool, kMethodNames.size()> needs_token_{};
};

}  // namespace flurry::grpc_api

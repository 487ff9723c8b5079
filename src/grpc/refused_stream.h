// A stream refused before anything was issued: by its credential (an unknown token's refusal
// answered after its delay, from the store pool) or by its request. Used by Ids.Stream and
// Ids.StreamRange.
#pragma once

#include <grpcpp/grpcpp.h>

#include <utility>

#include "calls.h"

namespace flurry::grpc_api {

template <typename Reactor>
class RefusedStream final : public Reactor {
 public:
  RefusedStream(Calls& calls, Method method, grpc::CallbackServerContext* ctx, Status st,
                ops::Deferral deferral = {}) {
    const MonoTime started = calls.clock_.now();
    if (st.reason() != Reason::kWouldBlock) {
      this->Finish(calls.answer(method, *ctx, st, started));
      return;
    }
    calls.pools_.post(deferral.pool, [this, &calls, method, ctx, started, deferral]() mutable {
      const Status late = calls.admit(method, *ctx, Blocking::kAllowed, deferral);
      this->Finish(calls.answer(method, *ctx, late, started));
    });
  }
  void OnDone() override { delete this; }
};

// A stream's credential, at its start (Calls::admit): nullptr when it is admitted, else the
// reactor that refuses it.
template <typename Reactor>
Reactor* refused_stream(Calls& calls, Method method, grpc::CallbackServerContext* ctx) {
  ops::Deferral deferral;
  Status st = calls.admit(method, *ctx, Blocking::kNever, deferral);
  if (st.ok()) return nullptr;
  return new RefusedStream<Reactor>(calls, method, ctx, std::move(st), std::move(deferral));
}

}  // namespace flurry::grpc_api

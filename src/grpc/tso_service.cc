// flurry.v1.Tso (services.h): Get, and Stream's reactor.
#include <utility>

#include "messages.h"
#include "refused_stream.h"
#include "services.h"

namespace flurry::grpc_api {
namespace {

using ops::Deferral;
using ops::IdCount;

// One Tso.Stream: read a request, take its grant, write the answer, then read the next. One
// step at a time (a client of the PD batching rule has one request in flight anyway), so that
// exactly one of a read, a grant or a write is outstanding and the protocol itself orders
// every touch of this object: no lock. The grant runs on gRPC's callback thread with
// Blocking::kNever and, when it would wait, on the pool its Deferral names. The first error
// ends the stream with that status; a client that closes its side ends it with OK.
class TsoStream final : public grpc::ServerBidiReactor<v1::TsoRequest, v1::TsoResponse> {
 public:
  TsoStream(Calls& calls, grpc::CallbackServerContext* ctx)
      : calls_(calls), ctx_(ctx), started_(calls.clock_.now()) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side (or went away), every answer written
      finish(OkStatus());
      return;
    }
    Result<IdCount> count = tso_count(calls_.ops_, request_.count());
    if (!count.ok()) {
      finish(count.status());
      return;
    }
    response_.Clear();
    Deferral deferral;
    Status st = issue_tso(calls_.ops_, *count, response_, Blocking::kNever, deferral);
    if (st.reason() == Reason::kWouldBlock) {
      calls_.pools_.post(deferral.pool, [this, count = *count, deferral]() mutable {
        const Status late =
            ctx_->IsCancelled()
                ? Status(StatusCode::kCancelled, "the client cancelled the stream")
                : issue_tso(calls_.ops_, count, response_, Blocking::kAllowed, deferral);
        after_issue(late);
      });
      return;
    }
    after_issue(st);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      finish(Status(StatusCode::kCancelled, "the stream broke while timestamps were sent"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  void after_issue(const Status& st) {
    if (!st.ok()) {
      finish(st);
      return;
    }
    calls_.count_sent(Method::kTsoStream, response_.count());
    StartWrite(&response_);
  }

  void finish(const Status& status) {
    Finish(calls_.answer(Method::kTsoStream, *ctx_, status, started_));
  }

  Calls& calls_;
  grpc::CallbackServerContext* ctx_;
  const MonoTime started_;
  v1::TsoRequest request_;    // the request being read
  v1::TsoResponse response_;  // the answer being taken or written
};

}  // namespace

grpc::ServerUnaryReactor* TsoService::Get(grpc::CallbackServerContext* ctx,
                                          const v1::TsoRequest* req, v1::TsoResponse* resp) {
  Result<IdCount> count = tso_count(calls_.ops_, req->count());
  if (!count.ok()) return calls_.refuse(Method::kTsoGet, ctx, count.status());
  return calls_.unary(Method::kTsoGet, ctx,
                      [this, resp, count = *count](Blocking blocking, Deferral& deferral) {
                        Status st = issue_tso(calls_.ops_, count, *resp, blocking, deferral);
                        if (st.ok()) calls_.count_sent(Method::kTsoGet, resp->count());
                        return st;
                      });
}

grpc::ServerBidiReactor<v1::TsoRequest, v1::TsoResponse>* TsoService::Stream(
    grpc::CallbackServerContext* ctx) {
  using Reactor = grpc::ServerBidiReactor<v1::TsoRequest, v1::TsoResponse>;
  if (Reactor* refused = refused_stream<Reactor>(calls_, Method::kTsoStream, ctx)) return refused;
  return new TsoStream(calls_, ctx);
}

}  // namespace flurry::grpc_api

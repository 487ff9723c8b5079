// The flurry.v1 services on gRPC's callback API, each method parsing its message once into the
// operations layer's typed values (messages.h) and running one operation through Calls: Ids
// (ids_service.cc), Segments (segments_service.cc), OrderNumbers (orders_service.cc), Tso
// (tso_service.cc).
// Thread-safe: gRPC calls them from its callback threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include "calls.h"
#include "flurry/v1/flurry.grpc.pb.h"

namespace flurry::grpc_api {

namespace v1 = ::flurry::v1;

class IdsService final : public v1::Ids::CallbackService {
 public:
  explicit IdsService(Calls& calls) : calls_(calls) {}
  grpc::ServerUnaryReactor* Next(grpc::CallbackServerContext* ctx, const v1::NextRequest* req,
                                 v1::NextResponse* resp) override;
  grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>* Stream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerWriteReactor<v1::IdChunk>* StreamRange(grpc::CallbackServerContext* ctx,
                                                     const v1::RangeRequest* req) override;
  grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* ctx, const v1::DecodeRequest* req,
                                   v1::DecodeResponse* resp) override;
  grpc::ServerUnaryReactor* Layout(grpc::CallbackServerContext* ctx, const v1::LayoutRequest* req,
                                   v1::LayoutResponse* resp) override;

 private:
  Calls& calls_;
};

class SegmentsService final : public v1::Segments::CallbackService {
 public:
  explicit SegmentsService(Calls& calls) : calls_(calls) {}
  grpc::ServerUnaryReactor* Next(grpc::CallbackServerContext* ctx,
                                 const v1::SegmentNextRequest* req,
                                 v1::SegmentNextResponse* resp) override;
  grpc::ServerUnaryReactor* Range(grpc::CallbackServerContext* ctx,
                                  const v1::SegmentRangeRequest* req,
                                  v1::SegmentRangeResponse* resp) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* ctx,
                                 const v1::SegmentListRequest* req,
                                 v1::SegmentListResponse* resp) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const v1::SegmentGetRequest* req,
                                v1::SegmentGetResponse* resp) override;
  grpc::ServerUnaryReactor* Create(grpc::CallbackServerContext* ctx,
                                   const v1::SegmentCreateRequest* req,
                                   v1::SegmentTag* resp) override;

 private:
  Calls& calls_;
};

class OrdersService final : public v1::OrderNumbers::CallbackService {
 public:
  explicit OrdersService(Calls& calls) : calls_(calls) {}
  grpc::ServerUnaryReactor* New(grpc::CallbackServerContext* ctx, const v1::OrderNewRequest* req,
                                v1::OrderNewResponse* resp) override;
  grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* ctx,
                                   const v1::OrderDecodeRequest* req,
                                   v1::OrderDecodeResponse* resp) override;

 private:
  Calls& calls_;
};

// The timestamp oracle (Operations::tso). Get is unary; Stream answers each request in order,
// one at a time, and ends with the first error (NOT_LEADER, NO_LEADER, a bad count, ...), the
// answers before it standing. NOT_LEADER carries the leader's addresses (Calls::answer).
class TsoService final : public v1::Tso::CallbackService {
 public:
  explicit TsoService(Calls& calls) : calls_(calls) {}
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const v1::TsoRequest* req,
                                v1::TsoResponse* resp) override;
  grpc::ServerBidiReactor<v1::TsoRequest, v1::TsoResponse>* Stream(
      grpc::CallbackServerContext* ctx) override;

 private:
  Calls& calls_;
};

}  // namespace flurry::grpc_api

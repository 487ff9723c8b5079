// flurry.v1.Segments (services.h).
#include <span>
#include <utility>
#include <vector>

#include "messages.h"
#include "services.h"

namespace flurry::grpc_api {

using ops::Deferral;
using ops::IdCount;

grpc::ServerUnaryReactor* SegmentsService::Next(grpc::CallbackServerContext* ctx,
                                                const v1::SegmentNextRequest* req,
                                                v1::SegmentNextResponse* resp) {
  Result<SegmentCall> call = segment_call(calls_.ops_, req->tag(), req->count(), "count");
  if (!call.ok()) return calls_.refuse(Method::kSegmentsNext, ctx, call.status());
  const IdCount n = call->count;
  if (Status st = check_response_size(n.value(), IdTextCodec::of(Encoding::kDecimal),
                                      calls_.options_.max_message_bytes);
      !st.ok()) {
    return calls_.refuse(Method::kSegmentsNext, ctx, st);
  }
  resp->mutable_ids()->Resize(static_cast<int>(n.value()), 0);
  return calls_.unary(
      Method::kSegmentsNext, ctx,
      [this, resp, t = std::move(call->tag), n](Blocking blocking, Deferral& deferral) {
        std::span<std::uint64_t> out(resp->mutable_ids()->mutable_data(), n.value());
        Status st = calls_.ops_.segment_ids(t, n, out, blocking, deferral);
        if (st.ok()) calls_.count_sent(Method::kSegmentsNext, n.value());
        return st;
      });
}

grpc::ServerUnaryReactor* SegmentsService::Range(grpc::CallbackServerContext* ctx,
                                                 const v1::SegmentRangeRequest* req,
                                                 v1::SegmentRangeResponse* resp) {
  Result<SegmentCall> call = segment_call(calls_.ops_, req->tag(), req->size(), "size");
  if (!call.ok()) return calls_.refuse(Method::kSegmentsRange, ctx, call.status());
  return calls_.unary(Method::kSegmentsRange, ctx,
                      [this, resp, t = std::move(call->tag), n = call->count](Blocking blocking,
                                                                              Deferral& deferral) {
                        Result<SegmentRange> r =
                            calls_.ops_.segment_range(t, n, blocking, deferral);
                        if (!r.ok()) return r.status();
                        resp->set_start(r->start);
                        resp->set_end(r->end);
                        resp->set_delta(r->delta);
                        calls_.count_sent(Method::kSegmentsRange, r->size());
                        return OkStatus();
                      });
}

grpc::ServerUnaryReactor* SegmentsService::List(grpc::CallbackServerContext* ctx,
                                                const v1::SegmentListRequest*,
                                                v1::SegmentListResponse* resp) {
  return calls_.unary(
      Method::kSegmentsList, ctx, [this, resp](Blocking blocking, Deferral& deferral) {
        Result<std::vector<SegmentTagInfo>> tags = calls_.ops_.segment_tags(blocking, deferral);
        if (!tags.ok()) return tags.status();
        for (const SegmentTagInfo& info : *tags) fill_tag(info, *resp->add_tags());
        return OkStatus();
      });
}

grpc::ServerUnaryReactor* SegmentsService::Get(grpc::CallbackServerContext* ctx,
                                               const v1::SegmentGetRequest* req,
                                               v1::SegmentGetResponse* resp) {
  Result<ops::SegmentTag> tag = tag_of(req->tag());
  if (!tag.ok()) return calls_.refuse(Method::kSegmentsGet, ctx, tag.status());
  return calls_.unary(
      Method::kSegmentsGet, ctx,
      [this, resp, t = std::move(tag).value()](Blocking blocking, Deferral& deferral) {
        Result<ops::SegmentTagReport> report = calls_.ops_.segment_tag(t, blocking, deferral);
        if (!report.ok()) return report.status();
        resp->set_tag(t.name());
        resp->set_served(report->served);
        resp->set_remaining(report->state.remaining);
        resp->set_ids_issued(report->state.ids_issued);
        if (report->stored) fill_tag(*report->stored, *resp->mutable_stored());
        return OkStatus();
      });
}

grpc::ServerUnaryReactor* SegmentsService::Create(grpc::CallbackServerContext* ctx,
                                                  const v1::SegmentCreateRequest* req,
                                                  v1::SegmentTag* resp) {
  SegmentTagSpec spec;
  spec.tag = req->tag();
  if (req->has_start()) spec.start = req->start();
  if (req->has_step()) spec.step = req->step();
  if (req->has_delta()) spec.delta = req->delta();
  if (req->has_remainder()) spec.remainder = req->remainder();
  spec.strict = req->strict();
  spec.description = req->description();
  return calls_.unary(Method::kSegmentsCreate, ctx,
                      [this, resp, spec = std::move(spec)](Blocking blocking, Deferral& deferral) {
                        Result<SegmentTagInfo> created =
                            calls_.ops_.create_segment_tag(spec, blocking, deferral);
                        if (!created.ok()) return created.status();
                        fill_tag(*created, *resp);
                        return OkStatus();
                      });
}

}  // namespace flurry::grpc_api

// flurry.v1.Ids (services.h): Next, Decode and Layout here; Stream and StreamRange start their
// reactors (id_stream.cc, range_stream.cc) once admitted.
#include <string>

#include "flurry/timefmt.h"
#include "id_stream.h"
#include "messages.h"
#include "range_stream.h"
#include "refused_stream.h"
#include "services.h"

namespace flurry::grpc_api {

using ops::Deferral;

grpc::ServerUnaryReactor* IdsService::Next(grpc::CallbackServerContext* ctx,
                                           const v1::NextRequest* req, v1::NextResponse* resp) {
  Result<NextCall> call = next_call(calls_.ops_, *req, calls_.options_.max_message_bytes);
  if (!call.ok()) return calls_.refuse(Method::kIdsNext, ctx, call.status());
  return calls_.unary(Method::kIdsNext, ctx,
                      [this, resp, call = *call](Blocking blocking, Deferral& deferral) {
                        Status st = issue_next(calls_.ops_, call, *resp, blocking, deferral);
                        if (st.ok()) calls_.count_sent(Method::kIdsNext, call.count.value());
                        return st;
                      });
}

grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>* IdsService::Stream(
    grpc::CallbackServerContext* ctx) {
  using Reactor = grpc::ServerBidiReactor<v1::NextRequest, v1::NextResponse>;
  if (Reactor* refused = refused_stream<Reactor>(calls_, Method::kIdsStream, ctx)) return refused;
  return new_id_stream(calls_, ctx);
}

grpc::ServerWriteReactor<v1::IdChunk>* IdsService::StreamRange(grpc::CallbackServerContext* ctx,
                                                               const v1::RangeRequest* req) {
  using Reactor = grpc::ServerWriteReactor<v1::IdChunk>;
  if (Reactor* refused = refused_stream<Reactor>(calls_, Method::kIdsStreamRange, ctx)) {
    return refused;
  }
  const std::uint64_t count = req->count();
  if (count == 0 || count > calls_.options_.max_range) {
    return new RefusedStream<Reactor>(
        calls_, Method::kIdsStreamRange, ctx,
        InvalidArgument("field \"count\": " + std::to_string(count) +
                        (count == 0 ? " is too small (at least 1)"
                                    : " is more than grpc_max_range (" +
                                          std::to_string(calls_.options_.max_range) +
                                          "); ask for fewer in each StreamRange")));
  }
  return new_range_stream(calls_, ctx, count);
}

grpc::ServerUnaryReactor* IdsService::Decode(grpc::CallbackServerContext* ctx,
                                             const v1::DecodeRequest* req,
                                             v1::DecodeResponse* resp) {
  Result<const IdTextCodec*> codec = codec_of(calls_.ops_, req->encoding());
  if (!codec.ok()) return calls_.refuse(Method::kIdsDecode, ctx, codec.status());
  return calls_.unary(Method::kIdsDecode, ctx,
                      [this, req, resp, codec = *codec](Blocking, Deferral&) {
                        Result<DecodedId> d = calls_.ops_.decode_id(req->id(), *codec);
                        if (!d.ok()) return d.status();
                        resp->set_id(d->id);
                        resp->set_time(format_time(d->time));
                        resp->set_unix_ms(d->unix_ms);
                        resp->set_ticks(d->parts.ticks);
                        resp->set_node(d->parts.node);
                        resp->set_seq(d->parts.seq);
                        for (const DecodedField& f : d->fields) {
                          v1::Field* field = resp->add_fields();
                          field->set_name(f.name);
                          field->set_value(f.value);
                          field->set_bits(static_cast<std::uint32_t>(f.bits));
                        }
                        resp->set_layout(calls_.ops_.layout().to_string());
                        return OkStatus();
                      });
}

grpc::ServerUnaryReactor* IdsService::Layout(grpc::CallbackServerContext* ctx,
                                             const v1::LayoutRequest*, v1::LayoutResponse* resp) {
  return calls_.unary(Method::kIdsLayout, ctx, [this, resp](Blocking, Deferral&) {
    const flurry::Layout& layout = calls_.ops_.layout();
    resp->set_layout(layout.to_string());
    for (const Field& f : layout.fields()) {
      v1::Field* field = resp->add_fields();
      field->set_name(f.name);
      field->set_bits(static_cast<std::uint32_t>(f.bits));
    }
    resp->set_epoch(format_time(layout.epoch()));
    resp->set_node(calls_.ops_.node());
    resp->set_max_batch(calls_.ops_.max_batch());
    return OkStatus();
  });
}

}  // namespace flurry::grpc_api

// flurry.v1.OrderNumbers (services.h).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "messages.h"
#include "services.h"

namespace flurry::grpc_api {

using ops::Deferral;
using ops::IdCount;

// An order number with its prefix, check character and separators is far below this.
constexpr std::uint64_t kMaxOrderNumberBytes = 128;

grpc::ServerUnaryReactor* OrdersService::New(grpc::CallbackServerContext* ctx,
                                             const v1::OrderNewRequest* req,
                                             v1::OrderNewResponse* resp) {
  Result<std::optional<ops::SegmentTag>> tag = optional_tag_of(req->tag());
  if (!tag.ok()) return calls_.refuse(Method::kOrderNumbersNew, ctx, tag.status());
  Result<IdCount> count = *tag ? segment_count(calls_.ops_, req->count(), "count")
                               : IdCount::of(req->count(), calls_.ops_.max_batch(), kCountField);
  if (!count.ok()) return calls_.refuse(Method::kOrderNumbersNew, ctx, count.status());
  if (count->value() * kMaxOrderNumberBytes > calls_.options_.max_message_bytes) {
    return calls_.refuse(
        Method::kOrderNumbersNew, ctx,
        InvalidArgument("field \"count\": " + std::to_string(count->value()) +
                        " order numbers may need more than grpc_max_message_bytes (" +
                        std::to_string(calls_.options_.max_message_bytes) + "); ask for fewer"));
  }
  struct Scratch {
    std::vector<std::uint64_t> ids;
    ops::OrderNumbers numbers;
  };
  auto scratch = std::make_shared<Scratch>();
  scratch->ids.resize(count->value());
  return calls_.unary(Method::kOrderNumbersNew, ctx,
                      [this, resp, scratch, tag = std::move(tag).value(), n = *count](
                          Blocking blocking, Deferral& deferral) {
                        Status st = calls_.ops_.new_order_numbers(
                            n, tag, scratch->ids, scratch->numbers, blocking, deferral);
                        if (!st.ok()) return st;
                        for (std::size_t i = 0; i < scratch->numbers.size(); ++i) {
                          resp->add_order_numbers(std::string(scratch->numbers[i]));
                        }
                        calls_.count_sent(Method::kOrderNumbersNew, n.value());
                        return st;
                      });
}

grpc::ServerUnaryReactor* OrdersService::Decode(grpc::CallbackServerContext* ctx,
                                                const v1::OrderDecodeRequest* req,
                                                v1::OrderDecodeResponse* resp) {
  Result<std::optional<ops::SegmentTag>> tag = optional_tag_of(req->tag());
  if (!tag.ok()) return calls_.refuse(Method::kOrderNumbersDecode, ctx, tag.status());
  return calls_.unary(
      Method::kOrderNumbersDecode, ctx,
      [this, ctx, req, resp, tag = std::move(tag).value()](Blocking blocking, Deferral& deferral) {
        ops::OrderNumberFault fault;
        Result<ops::DecodedOrderNumber> d =
            calls_.ops_.decode_order_number(req->order_number(), tag, fault, blocking, deferral);
        if (!d.ok()) {
          if (fault.kind != OrderDecodeError::Kind::kNone) {
            ctx->AddTrailingMetadata("flurry-order-fault", std::string(to_string(fault.kind)));
            if (fault.position > 0) {
              ctx->AddTrailingMetadata("flurry-order-fault-position",
                                       std::to_string(fault.position));
            }
          }
          return d.status();
        }
        resp->set_order_number(req->order_number());
        resp->set_key_version(static_cast<std::uint64_t>(d->key_version - '0'));
        resp->set_source(d->segment ? "segment" : "snowflake");
        resp->set_tag(d->tag);
        resp->set_id(d->id);
        return OkStatus();
      });
}

}  // namespace flurry::grpc_api

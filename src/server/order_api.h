// Internal: the order-number routes (docs/order-numbers.md, docs/operations.md "Order numbers"),
// without the transport, beside the Api of the snowflake routes (api.h), which owns this and
// hands them over:
//
//   GET /v1/order-numbers?count=N[&tag=T]     {"order_numbers":["...",...]}
//   GET /v1/order-numbers/{code}[?tag=T]      the decoded ID (Authorization: Bearer <admin token>)
//
// Issuing goes exactly the way of the ID routes: the snowflake source through the Api's
// issue_or_defer (a request that would block comes back `deferred` and Api::complete() finishes
// it), a tag through SegmentApi::take_or_defer (the segment pool). Without keys (no
// OrderFormats) both routes answer 501 saying how to configure keys. Key bytes are never
// written anywhere; the metrics show the key versions only.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "api.h"
#include "flurry/order_number.h"
#include "flurry/server/order_formats.h"
#include "flurry/server/prometheus.h"
#include "flurry/status.h"

namespace flurry::server {

class SegmentApi;

class OrderApi {
 public:
  // `api` issues snowflake IDs; `segments` (may be null: `tag=` is 404 and decoding is 403, as
  // no admin token exists) serves tags and holds the admin token; `formats` (may be null: order
  // numbers are off, 501). All must outlive this.
  OrderApi(Api& api, Service& service, SegmentApi* segments, OrderFormats* formats);
  OrderApi(const OrderApi&) = delete;
  OrderApi& operator=(const OrderApi&) = delete;

  // When `path` is one of the routes above: answers into `r` and `body` (possibly deferred, as
  // the ID routes are) and returns true; false, touching nothing, for any other path.
  bool handle(const ApiRequest& request, std::string_view path, std::string_view query,
              ApiResponse& r, OutBuf& body, ApiScratch& scratch, Blocking blocking);

  // The body of /v1/order-numbers for snowflake IDs just issued (also for a deferred request,
  // from Api::complete). Never fails for IDs of the layout; an encoding error becomes the error
  // response.
  void write_snowflake(std::span<const std::uint64_t> ids, ApiResponse& r, OutBuf& body);
  // The same for IDs taken from segment tag `tag` (SegmentApi's writer for Route::kOrderNumbers).
  [[nodiscard]] Status write_segment(std::string_view tag, std::span<const std::uint64_t> ids,
                                     ApiResponse& r, OutBuf& body);

  // flurry_order_numbers_issued_total{source}, flurry_order_decodes_total{result} and, with
  // keys, flurry_order_key_info{active,versions} 1.
  void write_metrics(PrometheusWriter& out) const;

  // Counts a decode answered elsewhere (a segment number, once the segment pool has compared its
  // ID with the tag's max_id) in flurry_order_decodes_total.
  void count_decode(bool ok) noexcept {
    (ok ? decodes_ok_ : decodes_error_).fetch_add(1, std::memory_order_relaxed);
  }

 private:
  void issue(Method method, std::string_view query, ApiResponse& r, OutBuf& body,
             ApiScratch& scratch, Blocking blocking);
  void decode(const ApiRequest& request, std::string_view raw_code, std::string_view query,
              ApiResponse& r, OutBuf& body, ApiScratch& scratch, Blocking blocking);
  // Encodes `ids` with `format` as {"order_numbers":[...]}; on error writes nothing.
  [[nodiscard]] static Status write_numbers(const OrderNumberFormat& format,
                                            std::span<const std::uint64_t> ids, ApiResponse& r,
                                            OutBuf& body);

  Api& api_;
  Service& service_;
  SegmentApi* segments_;
  OrderFormats* formats_;
  std::atomic<std::uint64_t> issued_snowflake_{0};
  std::atomic<std::uint64_t> issued_segment_{0};
  std::atomic<std::uint64_t> decodes_ok_{0};
  std::atomic<std::uint64_t> decodes_error_{0};
};

}  // namespace flurry::server

// Internal: the HTTP API without the transport. Takes a request (method, target, the
// Authorization header and the body), writes the response body into a buffer and says which
// status and headers go with it. Segment mode's routes are SegmentApi's (segment_api.h), the
// order-number routes OrderApi's (order_api.h). The
// connection code (http_server.cc) parses requests and writes responses; the unit tests
// (tests/unit/api_test.cc) call this alone, and the fuzz target covers its query parsing (query.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/decoded_id.h"
#include "flurry/generator.h"
#include "flurry/segment_store.h"
#include "flurry/server/metrics.h"
#include "flurry/server/order_formats.h"
#include "flurry/server/prometheus.h"
#include "flurry/server/service.h"
#include "flurry/status.h"
#include "query.h"
#include "text.h"

namespace flurry::server {

enum class Method { kGet, kHead, kPost, kOther };

// One request as the transport parsed it. The views must stay valid during Api::handle().
struct ApiRequest {
  Method method = Method::kGet;
  std::string_view target;
  // The Authorization header's value, empty when absent. A credential: never logged.
  std::string_view authorization;
  // The request body (the transport keeps it for POST only).
  std::string_view body;
};

enum class IdFormat { kJson, kNumber, kText };

// A validated request that issues IDs (/v1/ids, the Leaf get) and found that issuing would block.
struct PendingIssue {
  Route route = Route::kIds;
  std::uint64_t count = 1;
  IdFormat format = IdFormat::kJson;
  Encoding encoding = Encoding::kDecimal;
};

// A validated segment request that has to wait for a store: a tag whose buffers are both empty,
// a tag this node has not loaded yet, or a route that reads or writes the store itself (the tag
// list, one tag's state with its stored row, creating a tag). SegmentApi::complete() finishes it
// on a thread that may block.
struct PendingSegment {
  Route route = Route::kSegmentIds;
  std::string tag;
  std::uint64_t count = 1;  // ids: how many; range: its size
  SegmentTagSpec spec;      // POST /v1/segments: the tag to create
  // When the request was handed over plus segment_max_wait: a request still queued then is
  // answered 503 at once (the pool is backed up behind a slow store), never left to hang.
  MonoTime deadline{};
  // GET /v1/order-numbers/{code}?tag=: the body to answer once the decoded ID (`count`) is
  // proven below the tag's stored max_id (SegmentApi::answer_if_issued).
  std::string answer;
  // Not OK: a wrong admin token, answered with this error once `deadline` is reached
  // (SegmentApi::admit), so that guessing is slow without holding an I/O thread.
  Status refusal;
};

struct ApiResponse {
  int status = 200;
  std::string_view content_type = "application/json";
  bool retry_after = false;       // Retry-After: 1
  bool allow = false;             // Allow: GET, HEAD (with allow_post: GET, HEAD, POST)
  bool allow_post = false;        // the route also takes POST (POST /v1/segments)
  bool www_authenticate = false;  // WWW-Authenticate: Bearer (401)
  bool close = false;             // close the connection after this response
  // HEAD of a route whose body only exists once IDs are issued: nothing was issued and no body
  // was written, so Content-Length is left out (RFC 9110 section 9.3.2).
  bool omit_content_length = false;
  // Only with Blocking::kNever: issuing would have blocked. Nothing was issued and no body was
  // written; call Service::issue(..., Blocking::kAllowed) where blocking is fine, then
  // Api::complete() with `pending`.
  bool deferred = false;
  PendingIssue pending;
  // Only with Blocking::kNever, for segment routes: the request must wait for a store. Nothing
  // was issued and no body was written; call Api::complete_segment() with `segment` on a thread
  // that may block (the segment pool, not the generator's).
  bool deferred_segment = false;
  PendingSegment segment;
  Route route = Route::kOther;
};

// Per-thread scratch space, reused across requests.
struct ApiScratch {
  std::vector<std::uint64_t> ids;
  QueryScratch query;  // percent-decoded parameters and path segments
  // Set by the transport while earlier requests wait for the blocking pool: with
  // Blocking::kNever, ID requests are then deferred without trying, so that they queue behind
  // the waiting ones instead of taking the rate budget from them (throttling stays fair).
  bool defer_issue = false;
};

// The HTTP side of a library Status: the status code (also the metrics label), and whether
// Retry-After: 1, Allow: GET, HEAD and WWW-Authenticate: Bearer go with it. By code, refined by
// reason where HTTP says more: INVALID_ARGUMENT and OUT_OF_RANGE 400; UNAUTHENTICATED 401 (with
// WWW-Authenticate); PERMISSION_DENIED 403; NOT_FOUND 404; ALREADY_EXISTS 409; UNIMPLEMENTED 405
// (METHOD_NOT_ALLOWED, with Allow), 417 (EXPECTATION_FAILED) or 501; RESOURCE_EXHAUSTED 413
// (BODY_TOO_LARGE), 431 (HEADER_TOO_LARGE) or 503 with Retry-After; UNAVAILABLE, ABORTED,
// DEADLINE_EXCEEDED and CANCELLED 503 with Retry-After; FAILED_PRECONDITION 503 when the node
// cannot serve but nothing is broken (TIME_EXHAUSTED, CLOCK_BEFORE_EPOCH, LEASE_LOST,
// REGISTRY_REGRESSED), else 500; anything else 500. Api::error() is its one user.
struct HttpStatus {
  int status = 500;
  bool retry_after = false;
  bool allow = false;
  bool www_authenticate = false;
};
[[nodiscard]] HttpStatus http_status(const Status& status) noexcept;

class SegmentApi;
class OrderApi;

// "OK", "Created", "Bad Request", ...
[[nodiscard]] std::string_view reason_phrase(int status) noexcept;

// The count parameter of the routes that issue IDs: a whole number from 1 to `max` (400 saying
// what is wrong otherwise).
[[nodiscard]] Result<std::uint64_t> count_param(std::string_view v, std::uint64_t max);

// The members of a decoded ID as /v1/ids/{id} answers them, without the braces: "id", "layout",
// "time", "unix_ms", "ticks", "node", "seq", ["clock"], "fields", "encodings".
void write_decoded_id(const Layout& layout, const DecodedId& d, OutBuf& body);

class Api {
 public:
  // `service` must be started. The layout is read once here; the node on every request (a lost
  // lease can move the service to another node ID).
  // `segments` (may be null: segment routes are then 404) serves segment mode's routes and
  // metrics; it must outlive the Api.
  // `orders` (may be null: order numbers are off, their routes answer 501) holds the
  // order-number formats (order_api.h); it must outlive the Api. With `segments`, the Api
  // registers itself as the writer of segment order numbers (SegmentApi::set_order_writer).
  explicit Api(Service& service, SegmentApi* segments = nullptr, OrderFormats* orders = nullptr);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Appended to /metrics, e.g. the transport's connection gauges.
  void set_extra_metrics(std::function<void(PrometheusWriter&)> extra) {
    extra_ = std::move(extra);
  }

  // Handles one request: appends the body to `body` and fills `response`. For HEAD the body is
  // written too (the caller sends only its length), except on the routes that issue IDs: there
  // HEAD validates the parameters exactly as GET does (the same 4xx) and, when they are fine,
  // answers 200 with GET's headers, no body and omit_content_length, issuing nothing. Never
  // throws: an internal failure becomes a 500 with nothing issued. With Blocking::kNever a
  // request that would have to wait for the generator comes back `deferred` (see ApiResponse).
  void handle(const ApiRequest& request, ApiResponse& response, OutBuf& body, ApiScratch& scratch,
              Blocking blocking = Blocking::kAllowed) noexcept;
  // handle() for a request without Authorization header and body.
  void handle(Method method, std::string_view target, ApiResponse& response, OutBuf& body,
              ApiScratch& scratch, Blocking blocking = Blocking::kAllowed) noexcept {
    handle(ApiRequest{method, target, {}, {}}, response, body, scratch, blocking);
  }

  // Finishes a deferred segment request (ApiResponse::deferred_segment) on a thread that may
  // block: writes the response as handle() would have. Never throws.
  void complete_segment(const PendingSegment& pending, ApiResponse& response,
                        OutBuf& body) noexcept;

  // Finishes a deferred request: `status` is what Service::issue returned for `ids` (exactly
  // pending.count of them when OK). Writes the response as handle() would have. Never throws.
  void complete(const PendingIssue& pending, std::span<const std::uint64_t> ids,
                const Status& status, ApiResponse& response, OutBuf& body) noexcept;

  // The one way a failure becomes a response, for the API and the transport's framing errors
  // alike: fills the status, Retry-After and Allow of `response` from http_status() and writes
  // {"error":{"code":"UNAVAILABLE","reason":"CLOCK_BEHIND","message":"..."}} (code: the
  // canonical code name; reason only where it says more than the code, i.e. not NONE or
  // BAD_INPUT). `status` must not be OK (that is reported as INTERNAL). `extra`, when given, is
  // appended inside the error object as more JSON members (",\"kind\":\"check\"" from the
  // order-number decode).
  static void error(const Status& status, ApiResponse& response, OutBuf& body,
                    std::string_view extra = {});

 private:
  friend class OrderApi;  // issues snowflake IDs through issue_or_defer

  void route(const ApiRequest& request, ApiResponse& r, OutBuf& body, ApiScratch& scratch,
             Blocking blocking);
  // The routes without parameters: /v1/layout, /healthz, /readyz, /metrics.
  void simple_route(std::string_view path, std::string_view query, ApiResponse& r, OutBuf& body,
                    ApiScratch& scratch);
  void ids(Method method, std::string_view query, ApiResponse& r, OutBuf& body, ApiScratch& scratch,
           Blocking blocking);
  // The count, format and encoding of /v1/ids into `pending`.
  [[nodiscard]] Status parse_ids(std::string_view query, ApiScratch& scratch,
                                 PendingIssue& pending) const;
  void decode(std::string_view raw_id, std::string_view query, ApiResponse& r, OutBuf& body,
              ApiScratch& scratch);
  void leaf_get(Method method, std::string_view raw_key, std::string_view query, ApiResponse& r,
                OutBuf& body, ApiScratch& scratch, Blocking blocking);
  // Issues `ids` for `pending` and returns true, or returns false having filled `r`: deferred
  // (Blocking::kNever and the request would wait, or earlier ones wait: scratch.defer_issue)
  // or an error response.
  bool issue_or_defer(const PendingIssue& pending, std::span<std::uint64_t> ids, Blocking blocking,
                      const ApiScratch& scratch, ApiResponse& r, OutBuf& body);
  // The body of a successful /v1/ids or Leaf get.
  static void write_ids(const PendingIssue& p, std::span<const std::uint64_t> ids, ApiResponse& r,
                        OutBuf& body);
  // Runs the body of handle()/complete() with the catch-all that turns a failure into a 500.
  template <typename F>
  static void guarded(ApiResponse& r, OutBuf& body, F&& f) noexcept;
  void leaf_decode(std::string_view query, ApiResponse& r, OutBuf& body, ApiScratch& scratch);
  void layout(OutBuf& body) const;
  void readyz(ApiResponse& r, OutBuf& body);
  void metrics(ApiResponse& r, OutBuf& body);

  Service& service_;
  SegmentApi* segments_ = nullptr;
  std::unique_ptr<OrderApi> orders_;
  std::string layout_json_;
  std::function<void(PrometheusWriter&)> extra_;
};

}  // namespace flurry::server

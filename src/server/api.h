// Internal: the HTTP API without the transport. Takes a method and a request target, writes the
// response body into a buffer and says which status and headers go with it. The connection code
// (http_server.cc) parses requests and writes responses; the unit tests (tests/unit/api_test.cc)
// call this alone, and the fuzz target covers its query parsing (query.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/codec.h"
#include "flurry/generator.h"
#include "flurry/server/metrics.h"
#include "flurry/server/prometheus.h"
#include "flurry/server/service.h"
#include "flurry/status.h"
#include "query.h"
#include "text.h"

namespace flurry::server {

enum class Method { kGet, kHead, kOther };

enum class IdFormat { kJson, kNumber, kText };

// A validated request that issues IDs (/v1/ids, the Leaf get) and found that issuing would block.
struct PendingIssue {
  Route route = Route::kIds;
  std::uint64_t count = 1;
  IdFormat format = IdFormat::kJson;
  Encoding encoding = Encoding::kDecimal;
};

struct ApiResponse {
  int status = 200;
  std::string_view content_type = "application/json";
  bool retry_after = false;  // Retry-After: 1
  bool allow = false;        // Allow: GET, HEAD
  bool close = false;        // close the connection after this response
  // HEAD of a route whose body only exists once IDs are issued: nothing was issued and no body
  // was written, so Content-Length is left out (RFC 9110 section 9.3.2).
  bool omit_content_length = false;
  // Only with Blocking::kNever: issuing would have blocked. Nothing was issued and no body was
  // written; call Service::issue(..., Blocking::kAllowed) where blocking is fine, then
  // Api::complete() with `pending`.
  bool deferred = false;
  PendingIssue pending;
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
// Retry-After: 1 and Allow: GET, HEAD go with it. By code, refined by reason where HTTP says
// more: INVALID_ARGUMENT and OUT_OF_RANGE 400; NOT_FOUND 404; UNIMPLEMENTED 405
// (METHOD_NOT_ALLOWED, with Allow), 417 (EXPECTATION_FAILED) or 501; RESOURCE_EXHAUSTED 413
// (BODY_TOO_LARGE), 431 (HEADER_TOO_LARGE) or 503 with Retry-After; UNAVAILABLE, ABORTED,
// DEADLINE_EXCEEDED and CANCELLED 503 with Retry-After; FAILED_PRECONDITION 503 when the node
// cannot serve but nothing is broken (TIME_EXHAUSTED, CLOCK_BEFORE_EPOCH, LEASE_LOST,
// REGISTRY_REGRESSED), else 500; anything else 500. Api::error() is its one user.
struct HttpStatus {
  int status = 500;
  bool retry_after = false;
  bool allow = false;
};
[[nodiscard]] HttpStatus http_status(const Status& status) noexcept;

// "OK", "Bad Request", ...
[[nodiscard]] std::string_view reason_phrase(int status) noexcept;

class Api {
 public:
  // `service` must be started. The layout is read once here; the node on every request (a lost
  // lease can move the service to another node ID).
  explicit Api(Service& service);

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
  void handle(Method method, std::string_view target, ApiResponse& response, OutBuf& body,
              ApiScratch& scratch, Blocking blocking = Blocking::kAllowed) noexcept;

  // Finishes a deferred request: `status` is what Service::issue returned for `ids` (exactly
  // pending.count of them when OK). Writes the response as handle() would have. Never throws.
  void complete(const PendingIssue& pending, std::span<const std::uint64_t> ids,
                const Status& status, ApiResponse& response, OutBuf& body) noexcept;

  // The one way a failure becomes a response, for the API and the transport's framing errors
  // alike: fills the status, Retry-After and Allow of `response` from http_status() and writes
  // {"error":{"code":"UNAVAILABLE","reason":"CLOCK_BEHIND","message":"..."}} (code: the
  // canonical code name; reason only where it says more than the code, i.e. not NONE or
  // BAD_INPUT). `status` must not be OK (that is reported as INTERNAL).
  static void error(const Status& status, ApiResponse& response, OutBuf& body);

 private:
  void route(Method method, std::string_view target, ApiResponse& r, OutBuf& body,
             ApiScratch& scratch, Blocking blocking);
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
  std::string layout_json_;
  std::function<void(PrometheusWriter&)> extra_;
};

}  // namespace flurry::server

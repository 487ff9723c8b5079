// Internal: the HTTP adapter over the operations layer (flurry/ops/operations.h), without the
// transport. A route table ({route, methods, path pattern, handler}, routes.h) dispatches a
// request (method, target, the Authorization header and the body); its handler parses the
// parameters once into typed values, calls one operation and writes the JSON (json_views.h)
// into a buffer, saying which status and headers go with it. The connection code
// (http_server.cc) parses requests and writes responses; the unit tests (tests/unit/api_test.cc
// and beside it) call this alone, and the fuzz target covers its query parsing (query.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/decoded_id.h"
#include "flurry/generator.h"
#include "flurry/layout.h"
#include "flurry/status.h"
#include "http/http_metrics.h"
#include "json_writer.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "query.h"
#include "service/prometheus.h"
#include "text.h"

namespace flurry::http {

enum class Method { kGet, kHead, kPost, kOther };

// One request as the transport parsed it. The views must stay valid during Api::handle().
struct ApiRequest {
  Method method = Method::kGet;
  std::string_view target;
  // The Authorization header's value, empty when absent. A credential: never logged.
  std::string_view authorization;
  // The request body (the transport keeps it for POST only).
  std::string_view body;
  // The client's address without the port ("" when unknown): the token brake counts wrong
  // tokens per client (ops::GuessBrake). Initialized, so that requests built without it need not
  // name it.
  std::string_view peer = {};
};

struct RouteCall;  // routes.h

// The rest of a deferred request (ApiResponse::resume): the operation over the request the route
// already parsed, routed and admitted, and the response it writes. Run with Api::resume().
using DeferredCall = std::function<void(RouteCall& call)>;

// A response header beyond the ones ApiResponse has flags for.
struct HttpHeader {
  std::string_view name;   // "Location", "Content-Security-Policy", ...
  std::string_view value;  // no CR or LF
};

// The most bytes ApiResponse::headers may take in all, written as "name: value\r\n" each.
inline constexpr std::size_t kMaxExtraHeaderBytes = 512;

struct ApiResponse {
  int status = 200;
  std::string_view content_type = "application/json";
  // Cache-Control's value: API answers are never cached; the console's static files are
  // revalidated ("no-cache").
  std::string_view cache_control = "no-store";
  // More headers, in order (a 302's Location, the console's Content-Security-Policy): views of
  // storage that outlives the response (constants), at most kMaxExtraHeaderBytes in all; the
  // transport leaves out the ones past that limit.
  std::span<const HttpHeader> headers;
  // A Location header made for this response (a 307 to the timestamp oracle's leader, whose
  // address is known only once the operation answered): written before `headers` and counted in
  // the same kMaxExtraHeaderBytes. Empty: none.
  std::string location;
  bool retry_after = false;       // Retry-After: 1
  bool allow = false;             // Allow: GET, HEAD (with allow_post: GET, HEAD, POST)
  bool allow_post = false;        // the route also takes POST (POST /v1/segments)
  bool www_authenticate = false;  // WWW-Authenticate: Bearer (401)
  bool close = false;             // close the connection after this response
  // HEAD of a route whose body only exists once IDs are issued: nothing was issued and no body
  // was written, so Content-Length is left out (RFC 9110 section 9.3.2).
  bool omit_content_length = false;
  // Only with Blocking::kNever: the operation would have blocked (flurry/ops/deferral.h).
  // Nothing was issued and no body was written; `resume` holds the rest of the request (a
  // closure over its typed values, which needs none of the request's text): run it with
  // Api::resume() on the pool `deferral` names.
  bool deferred = false;
  ops::Deferral deferral;
  DeferredCall resume;
  // With `deferred`: the request's path and query (copied, as the request's buffers are reused)
  // and scheme, for a continuation that redirects to the same target elsewhere (a 307 to the
  // timestamp oracle's leader). Api::resume hands them back as the RouteCall's path and query.
  std::string target;
  std::string_view scheme = "http";
  Route route = Route::kOther;
};

// Per-thread scratch space, reused across requests.
struct ApiScratch {
  std::vector<std::uint64_t> ids;
  QueryScratch query;         // percent-decoded parameters and path segments
  ops::OrderNumbers numbers;  // order numbers being written
};

// The HTTP side of a library Status: the status code (also the metrics label), and whether
// Retry-After: 1, Allow: GET, HEAD and WWW-Authenticate: Bearer go with it. By code, refined by
// reason where HTTP says more: INVALID_ARGUMENT and OUT_OF_RANGE 400; UNAUTHENTICATED 401 (with
// WWW-Authenticate); PERMISSION_DENIED 403; NOT_FOUND 404; ALREADY_EXISTS 409; UNIMPLEMENTED 405
// (METHOD_NOT_ALLOWED, with Allow), 417 (EXPECTATION_FAILED) or 501; RESOURCE_EXHAUSTED 413
// (BODY_TOO_LARGE), 431 (HEADER_TOO_LARGE) or 503; UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED and
// CANCELLED 503; FAILED_PRECONDITION 503 when the node cannot serve but nothing is broken
// (TIME_EXHAUSTED, CLOCK_BEFORE_EPOCH, LEASE_LOST, REGISTRY_REGRESSED), else 500; anything else
// 500. Retry-After comes from ops::retry_advice (Status::retryable(), the one retry
// classification; gRPC reads it too), so CANCELLED's 503 has none. Api::error() is its one user.
struct HttpStatus {
  int status = 500;
  bool retry_after = false;
  bool allow = false;
  bool www_authenticate = false;
};
[[nodiscard]] HttpStatus http_status(const Status& status) noexcept;

// "OK", "Created", "Bad Request", ...
[[nodiscard]] std::string_view reason_phrase(int status) noexcept;

// The members of a decoded ID as /v1/ids/{id} answers them, into the object `w` has open: "id",
// "layout", "time", "unix_ms", "ticks", "node", "seq", ["clock"], "fields", "encodings".
void write_decoded_id(const Layout& layout, const DecodedId& d, JsonWriter& w);

class RouteTable;

class Api {
 public:
  // The routes of docs/operations.md over `ops` (which must outlive the Api): the snowflake
  // routes always, segment mode's when ops.segments_served() (404 otherwise), the order-number
  // routes always (501 without keys).
  explicit Api(ops::Operations& ops);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Appended to /metrics, e.g. the transport's connection gauges.
  void set_extra_metrics(std::function<void(service::PrometheusWriter&)> extra);

  // Whether the transport serves HTTPS: the scheme of the Location of a redirect to the timestamp
  // oracle's leader (RouteCall::scheme). Before the first handle().
  void set_https(bool https) noexcept { scheme_ = https ? "https" : "http"; }

  // Handles one request: appends the body to `body` and fills `response`. For HEAD the body is
  // written too (the caller sends only its length), except on the routes that issue IDs: there
  // HEAD validates the parameters exactly as GET does (the same 4xx) and, when they are fine,
  // answers 200 with GET's headers, no body and omit_content_length, issuing nothing. Never
  // throws: an internal failure becomes a 500 with nothing issued. With Blocking::kNever a
  // request that would wait comes back `deferred` (see ApiResponse); the transport then runs
  // its resume with resume(), on the pool its deferral names.
  void handle(const ApiRequest& request, ApiResponse& response, OutBuf& body, ApiScratch& scratch,
              Blocking blocking = Blocking::kAllowed) noexcept;
  // handle() for a request without Authorization header and body.
  void handle(Method method, std::string_view target, ApiResponse& response, OutBuf& body,
              ApiScratch& scratch, Blocking blocking = Blocking::kAllowed) noexcept {
    handle(ApiRequest{method, target, {}, {}}, response, body, scratch, blocking);
  }

  // Finishes a request handle() deferred: runs `deferred.resume` with Blocking::kAllowed and
  // `deferred.deferral`, allowed to block (on the pool the deferral names, never an I/O
  // thread), filling `response` and appending to `body` as handle() does. `method` is the
  // request's (HEAD writes no body); nothing else of the request is needed, or read: it is not
  // parsed, routed or admitted again. Never throws. Thread-safe (as the operations are).
  static void resume(const ApiResponse& deferred, Method method, ApiResponse& response,
                     OutBuf& body, ApiScratch& scratch) noexcept;

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
  std::unique_ptr<RouteTable> routes_;
  std::string_view scheme_ = "http";  // a constant
};

}  // namespace flurry::http

// Internal: the HTTP route table (api.h) and what a route's handler gets. Each group of routes
// (id_routes.cc, segment_routes.cc, order_routes.cc) adds its entries over the operations layer;
// none knows another, and none holds state beyond what it precomputes.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "service/prometheus.h"

namespace flurry::http {

inline constexpr std::string_view kJsonType = "application/json";
inline constexpr std::string_view kTextType = "text/plain; charset=utf-8";
inline constexpr std::string_view kHtmlType = "text/html; charset=utf-8";
inline constexpr std::string_view kPrometheusType = "text/plain; version=0.0.4; charset=utf-8";

// The most {name} segments a pattern has.
inline constexpr std::size_t kMaxPathParams = 2;

// One request on its way through a handler.
struct RouteCall {
  const ApiRequest& request;
  std::string_view path;   // the target's path, before '?'
  std::string_view query;  // after '?', without it
  // The {name} segments of the pattern, in order, as they are in the path (not yet decoded).
  std::array<std::string_view, kMaxPathParams> params{};
  ApiResponse& response;
  OutBuf& body;
  ApiScratch& scratch;
  Blocking blocking;
  ops::Deferral& deferral;
  // "http" or "https": how this server is reached (Api::set_https), for redirects.
  std::string_view scheme = "http";

  [[nodiscard]] bool head() const noexcept { return request.method == Method::kHead; }
  // Answers `status`: a WOULD_BLOCK under Blocking::kNever defers the request (ApiResponse),
  // anything else is the error response (Api::error, with `extra`).
  void fail(const Status& status, std::string_view extra = {});
  // Runs `op(RouteCall&)`: the operation over the typed values the handler parsed, and the
  // response it writes, with this call's blocking and deferral. `op` captures those values by
  // value and reads nothing of the request's text (target, path, query, params, Authorization,
  // body): when the operation defers (Blocking::kNever, RouteCall::fail with WOULD_BLOCK), `op`
  // itself becomes the response's resume (ApiResponse), which the transport runs on the pool
  // with Blocking::kAllowed, after the request's buffers were reused: the request is not parsed,
  // routed or admitted again. No allocation unless it defers.
  template <typename Op>
  void run(Op&& op) {
    op(*this);
    if (response.deferred) response.resume = DeferredCall(std::forward<Op>(op));
  }
  // HEAD of a route that issues IDs, its parameters checked: GET's headers, no body, nothing
  // issued.
  void head_only(std::string_view content_type);
  // For the routes that take no parameters: true when the query is empty (or only '&'s), else
  // answers 400 naming the parameter and `route` (the pattern; the path when empty) and returns
  // false.
  [[nodiscard]] bool no_query(std::string_view route = {});
};

// Which methods a route takes; any other is 405 with Allow.
enum class Methods { kGetHead, kGetHeadPost, kAny };

using Handler = std::function<void(RouteCall&)>;

using ops::Scope;

// The scope a route needs (flurry/server/tokens.h): for GET and HEAD, and for POST where the
// route takes it. Scope::kNone: no token, ever (health, readiness, metrics).
struct Access {
  ops::Scope get = ops::Scope::kNone;
  ops::Scope post = ops::Scope::kNone;
};

class RouteTable {
 public:
  // `authorizer` (which must outlive the table) admits every call whose route needs a scope.
  explicit RouteTable(ops::Authorizer& authorizer) : authorizer_(authorizer) {}

  // `pattern`: a path of literal segments and {name} segments (one path segment each, possibly
  // empty), e.g. "/v1/segments/{tag}/ids"; a last segment "{...}" matches one or more
  // segments. The first route that matches a path serves it. `access`: the scope each method
  // needs, checked before the handler runs: the one place a route's credential is looked at.
  void add(Route route, Methods methods, std::string_view pattern, Access access, Handler handler);

  // Dispatches `call` by its path: 404 when no route matches, 405 when the route does not take
  // the method, the authorizer's refusal (401, 403, or a deferral for an unknown token's
  // delay) when the method's scope needs a token the call does not carry, else the handler. A path
  // that is exactly one of the literal patterns (/v1/ids, /healthz, ...) is found by comparing it
  // with those alone, in the order they were added
  // (/v1/ids first); only other paths go through the segment-by-segment match of every pattern.
  void dispatch(RouteCall& call) const;

  // Appended to /metrics.
  std::function<void(service::PrometheusWriter&)> extra_metrics;

 private:
  struct Entry {
    Route route;
    Methods methods;
    std::vector<std::string> literals;  // per segment; empty for a {name} segment
    std::vector<bool> is_param;
    bool rest = false;  // ends in {...}
    Access access;
    // Whether GET/HEAD and POST need a token: asked once, when the route is added, so that an
    // open route (GET /v1/ids by default) costs one test of a bool.
    bool get_needs_token = false;
    bool post_needs_token = false;
    Handler handler;
  };
  [[nodiscard]] static bool match(const Entry& entry, std::string_view path,
                                  std::array<std::string_view, kMaxPathParams>& params) noexcept;

  // Runs `entry` for `call`: 405 when it does not take the method, the authorizer's refusal
  // when it needs a token the call does not carry, else its handler.
  void serve(const Entry& entry, RouteCall& call) const;

  ops::Authorizer& authorizer_;
  std::vector<Entry> entries_;
  // The patterns without {name} segments that no earlier pattern matches, as whole paths, with
  // their entry's index: what dispatch() compares a path with first.
  struct Literal {
    std::string path;
    std::size_t entry;
  };
  std::vector<Literal> literals_;
};

// The snowflake routes: /v1/ids, /v1/ids/{id}, /v1/layout, the Leaf routes, /healthz, /readyz,
// /metrics.
void add_id_routes(RouteTable& table, ops::Operations& ops);
// Segment mode's routes (docs/segments.md): the tag list and creation, a tag's state, its IDs
// and ranges, the Leaf get and /segments (a redirect to the console's Tags section).
void add_segment_routes(RouteTable& table, ops::Operations& ops);
// The order-number routes: /v1/order-numbers and /v1/order-numbers/{code}.
void add_order_routes(RouteTable& table, ops::Operations& ops);
// The console (console_routes.cc): its read routes /v1/nodes, /v1/status, /v1/events, and its
// page, script and style sheet (without a token: they carry no data).
void add_console_routes(RouteTable& table, ops::Operations& ops);

// The timestamp oracle's routes: /v1/tso and /readyz/tso (tso_routes.cc).
void add_tso_routes(RouteTable& table, ops::Operations& ops);
// The "tso" member of /healthz's object (`,"tso":{"role":...,"term":N,"leader":{...}}`) on a
// server with the oracle; nothing without it.
void write_tso_health(const ops::Operations& ops, OutBuf& body);

// Answers `status`, the failure of a route only the timestamp oracle's leader serves (/v1/tso,
// strict segment tags). NOT_LEADER with the leader's HTTP address known (Operations::tso_leader,
// read now): 307 Temporary Redirect, Location `<scheme>://<leader http><same path and query>`,
// the error body with "leader":{"http":..,"grpc":..} and no Retry-After. The same body as a 503
// with Retry-After when the leader serves no HTTP or the Location would not fit the headers.
// NOT_LEADER with no leader known, and NO_LEADER: 503 NO_LEADER with Retry-After. Anything else:
// RouteCall::fail (a WOULD_BLOCK defers).
void fail_leader_only(RouteCall& call, const ops::Operations& ops, const Status& status);

// A path segment percent-decoded and checked as a segment tag ("the tag in the path").
[[nodiscard]] Result<ops::SegmentTag> tag_in_path(std::string_view raw, QueryScratch& scratch);

}  // namespace flurry::http

#include "api.h"

#include <algorithm>
#include <array>
#include <exception>
#include <utility>

#include "ops/retry.h"
#include "routes.h"

namespace flurry::http {
namespace {

// How HTTP's refusals name the token (the operations layer names no header).
constexpr ops::CredentialWords kHttpCredential{"Authorization: Bearer <token>",
                                               "the Authorization header"};

}  // namespace

HttpStatus http_status(const Status& status) noexcept {
  // Retry-After wherever the operations layer says a retry helps.
  const bool retry = ops::retry_advice(status).retry;
  switch (status.code()) {
    case StatusCode::kOk:
      return {200, false, false};
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return {400, retry, false};
    case StatusCode::kUnauthenticated:
      return {401, retry, false, true};
    case StatusCode::kPermissionDenied:
      return {403, retry, false};
    case StatusCode::kNotFound:
      return {404, retry, false};
    case StatusCode::kAlreadyExists:
      return {409, retry, false};
    case StatusCode::kUnimplemented:
      switch (status.reason()) {
        case Reason::kMethodNotAllowed:
          return {405, retry, true};
        case Reason::kExpectationFailed:
          return {417, retry, false};
        default:
          return {501, retry, false};
      }
    case StatusCode::kResourceExhausted:
      switch (status.reason()) {
        case Reason::kBodyTooLarge:
          return {413, retry, false};
        case Reason::kHeaderTooLarge:
          return {431, retry, false};
        default:
          return {503, retry, false};
      }
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
      return {503, retry, false};
    case StatusCode::kFailedPrecondition:
      // The node cannot serve (and retrying here will not help), but nothing is broken.
      switch (status.reason()) {
        case Reason::kTimeExhausted:
        case Reason::kClockBeforeEpoch:
        case Reason::kLeaseLost:
        case Reason::kRegistryRegressed:
          return {503, retry, false};
        default:
          return {500, retry, false};
      }
    default:
      return {500, retry, false};
  }
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 302:
      return "Found";
    case 307:
      return "Temporary Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

// --- The route table -----------------------------------------------------------------------

void RouteCall::fail(const Status& status, std::string_view extra) {
  if (blocking == Blocking::kNever && status.reason() == Reason::kWouldBlock) {
    response.deferred = true;
    response.deferral = deferral;
    // For a continuation that redirects (fail_leader_only): the request's buffers are reused.
    response.target.assign(path);
    if (!query.empty()) {
      response.target.push_back('?');
      response.target.append(query);
    }
    response.scheme = scheme;
    return;
  }
  Api::error(status, response, body, extra);
}

void RouteCall::head_only(std::string_view content_type) {
  response.content_type = content_type;
  response.omit_content_length = true;
}

bool RouteCall::no_query(std::string_view route) {
  QueryParams q;
  if (Status st = parse_query(query, route.empty() ? path : route, {}, q, scratch.query);
      !st.ok()) {
    fail(st);
    return false;
  }
  return true;
}

void RouteTable::add(Route route, Methods methods, std::string_view pattern, Access access,
                     Handler handler) {
  Entry entry{route,
              methods,
              {},
              {},
              false,
              access,
              authorizer_.needs_token(access.get),
              authorizer_.needs_token(access.post),
              std::move(handler)};
  std::string_view rest = pattern.substr(1);  // after the leading '/'
  for (;;) {
    const std::size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment == "{...}") {
      entry.rest = true;
    } else {
      const bool param = segment.starts_with('{');
      entry.is_param.push_back(param);
      entry.literals.emplace_back(param ? std::string_view() : segment);
    }
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  const bool literal = !entry.rest && std::none_of(entry.is_param.begin(), entry.is_param.end(),
                                                   [](bool param) { return param; });
  // Shadowed by an earlier pattern (the first match serves): left to the segment match.
  const bool shadowed = std::any_of(entries_.begin(), entries_.end(), [&](const Entry& earlier) {
    std::array<std::string_view, kMaxPathParams> ignored{};
    return match(earlier, pattern, ignored);
  });
  if (literal && !shadowed) literals_.push_back(Literal{std::string(pattern), entries_.size()});
  entries_.push_back(std::move(entry));
}

bool RouteTable::match(const Entry& entry, std::string_view path,
                       std::array<std::string_view, kMaxPathParams>& params) noexcept {
  if (!path.starts_with('/')) return false;
  std::string_view rest = path.substr(1);
  std::size_t param = 0;
  const std::size_t n = entry.literals.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t slash = rest.find('/');
    const bool last = i + 1 == n;
    // The last segment of a pattern without {...} must end the path.
    if (last && !entry.rest && slash != std::string_view::npos) return false;
    if (!last && slash == std::string_view::npos) return false;
    const std::string_view segment = rest.substr(0, slash);
    if (entry.is_param[i]) {
      if (param < kMaxPathParams) params[param++] = segment;
    } else if (segment != entry.literals[i]) {
      return false;
    }
    if (last) return !entry.rest || slash != std::string_view::npos;
    rest.remove_prefix(slash + 1);
  }
  return false;
}

void RouteTable::serve(const Entry& entry, RouteCall& call) const {
  call.response.route = entry.route;
  const Method method = call.request.method;
  const bool get_or_head = method == Method::kGet || method == Method::kHead;
  if (entry.methods == Methods::kGetHead && !get_or_head) {
    Api::error(Status(Reason::kMethodNotAllowed, "only GET and HEAD are allowed here"),
               call.response, call.body);
    return;
  }
  if (entry.methods == Methods::kGetHeadPost && !get_or_head && method != Method::kPost) {
    Api::error(Status(Reason::kMethodNotAllowed, "only GET, HEAD and POST are allowed here"),
               call.response, call.body);
    call.response.allow_post = true;
    return;
  }
  // The credential first: a caller without the scope learns nothing about the rest of its
  // request.
  const bool post = method == Method::kPost;
  if (post ? entry.post_needs_token : entry.get_needs_token) {
    const ops::Scope scope = post ? entry.access.post : entry.access.get;
    if (Status st = authorizer_.admit(call.request.authorization, scope, call.blocking,
                                      call.deferral, call.request.peer, kHttpCredential);
        !st.ok()) {
      call.fail(st);
      if (call.response.deferred) {
        // An unknown token, refused after a delay on the store pool: the refusal decided here
        // (in the deferral) is answered when the delay is over; the credential is not looked at
        // again.
        call.response.resume = [this, scope](RouteCall& c) {
          c.fail(authorizer_.admit({}, scope, c.blocking, c.deferral, {}));
        };
      }
      return;
    }
  }
  entry.handler(call);
}

void RouteTable::dispatch(RouteCall& call) const {
  for (const Literal& literal : literals_) {
    if (call.path == literal.path) {
      serve(entries_[literal.entry], call);
      return;
    }
  }
  for (const Entry& entry : entries_) {
    if (!match(entry, call.path, call.params)) continue;
    serve(entry, call);
    return;
  }
  call.response.route = Route::kOther;
  Api::error(Status(StatusCode::kNotFound, "no such route: " + quote(call.path)), call.response,
             call.body);
}

// --- Api -----------------------------------------------------------------------------------

Api::Api(ops::Operations& ops) : routes_(std::make_unique<RouteTable>(ops.authorizer())) {
  // Segment mode's paths and the order numbers' do not overlap the snowflake routes; the
  // snowflake routes come first, the fast path's first of all.
  add_id_routes(*routes_, ops);
  if (ops.segments_served()) add_segment_routes(*routes_, ops);
  add_order_routes(*routes_, ops);
  add_console_routes(*routes_, ops);
  add_tso_routes(*routes_, ops);
}

Api::~Api() = default;

void Api::set_extra_metrics(std::function<void(service::PrometheusWriter&)> extra) {
  routes_->extra_metrics = std::move(extra);
}

void Api::error(const Status& status, ApiResponse& r, OutBuf& body, std::string_view extra) {
  if (status.ok()) {
    error(Status(StatusCode::kInternal, "internal error: a failure reported with an OK status"), r,
          body);
    return;
  }
  const HttpStatus h = http_status(status);
  r.status = h.status;
  r.retry_after = h.retry_after;
  r.allow = h.allow;
  r.www_authenticate = h.www_authenticate;
  r.content_type = kJsonType;
  body.append("{\"error\":{\"code\":");
  body.append_json_string(to_string(status.code()));
  // The reason only where it says more than the code (CLOCK_BEHIND, LEASE_EXPIRING, ...).
  if (status.reason() != Reason::kNone && status.reason() != Reason::kBadInput) {
    body.append(",\"reason\":");
    body.append_json_string(to_string(status.reason()));
  }
  body.append(",\"message\":");
  body.append_json_string(status.message());
  if (!extra.empty()) body.append(extra);  // an empty view may hold a null pointer
  body.append("}}\n");
}

namespace {

// Runs `f` with the catch-all that turns a failure into a 500, nothing issued.
template <typename F>
void guarded(ApiResponse& r, OutBuf& body, F&& f) noexcept {
  const std::size_t start = body.size();
  try {
    f();
  } catch (const std::exception& e) {
    try {
      body.resize(start);
      const Route route = r.route;
      r = ApiResponse{};
      r.route = route;
      r.close = true;
      Api::error(Status(StatusCode::kInternal, std::string("internal error: ") + e.what()), r,
                 body);
    } catch (...) {
      body.resize(start);
      r.status = 500;
      r.close = true;
      r.deferred = false;
    }
  } catch (...) {
    body.resize(start);
    const Route route = r.route;
    r = ApiResponse{};
    r.route = route;
    r.status = 500;
    r.close = true;
  }
}

}  // namespace

void Api::handle(const ApiRequest& request, ApiResponse& r, OutBuf& body, ApiScratch& scratch,
                 Blocking blocking) noexcept {
  // Fresh for each request: a deferral holds what the authorizer decided for this one.
  ops::Deferral deferral;
  guarded(r, body, [&] {
    std::string_view target = request.target;
    // Absolute form (http://host/path) is allowed by HTTP/1.1; use its path.
    if (target.starts_with("http://") || target.starts_with("https://")) {
      const std::size_t slash = target.find('/', target.find("//") + 2);
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
    r.route = Route::kOther;
    if (target.empty() || target.front() != '/') {
      error(InvalidArgument("the request target must be a path starting with '/'"), r, body);
      return;
    }
    const std::size_t qmark = target.find('?');
    RouteCall call{request,
                   target.substr(0, qmark),
                   qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1),
                   {},
                   r,
                   body,
                   scratch,
                   blocking,
                   deferral,
                   scheme_};
    routes_->dispatch(call);
    if (r.deferred && !r.resume) {
      // A handler deferred outside RouteCall::run: there is nothing to run on the pool.
      r.deferred = false;
      error(Status(StatusCode::kInternal, "internal error: deferred without a continuation"), r,
            body);
    }
  });
}

void Api::resume(const ApiResponse& deferred, Method method, ApiResponse& r, OutBuf& body,
                 ApiScratch& scratch) noexcept {
  r.route = deferred.route;
  guarded(r, body, [&] {
    if (!deferred.resume) {
      error(Status(StatusCode::kInternal, "internal error: no deferred call to resume"), r, body);
      return;
    }
    // The request's text is gone: the continuation holds the typed values it needs (and the
    // target kept for a redirect, fail_leader_only).
    const ApiRequest request{method, {}, {}, {}, {}};
    ops::Deferral deferral = deferred.deferral;
    const std::string_view target = deferred.target;
    const std::size_t qmark = target.find('?');
    RouteCall call{request,
                   target.substr(0, qmark),
                   qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1),
                   {},
                   r,
                   body,
                   scratch,
                   Blocking::kAllowed,
                   deferral,
                   deferred.scheme};
    deferred.resume(call);
  });
}

Result<ops::SegmentTag> tag_in_path(std::string_view raw, QueryScratch& scratch) {
  Result<std::string_view> text = path_segment(raw, scratch);
  if (!text.ok()) return text.status();
  return ops::SegmentTag::of(*text, "the tag in the path");
}

}  // namespace flurry::http

#include "api.h"

#include <charconv>
#include <chrono>
#include <cstring>
#include <exception>
#include <span>

#include "flurry/codec.h"
#include "flurry/decoded_id.h"
#include "flurry/timefmt.h"
#include "order_api.h"
#include "segment_api.h"

namespace flurry::server {
namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

Result<Encoding> encoding_param(const QueryParams& q, std::size_t i) {
  if (!q.present[i]) return Encoding::kDecimal;
  Result<Encoding> e = parse_encoding(q.value[i]);
  if (!e.ok()) {
    return InvalidArgument("parameter \"encoding\": " + quote(q.value[i]) + " is not " +
                           encoding_names());
  }
  return e;
}

}  // namespace

Result<std::uint64_t> count_param(std::string_view v, std::uint64_t max) {
  const auto range = [max] { return "a whole number from 1 to " + std::to_string(max); };
  if (v.empty()) return InvalidArgument("parameter \"count\" is empty; expected " + range());
  const internal::ParsedUint n = internal::parse_uint(v, max);
  if (n.error == internal::UintError::kNotDigits) {
    return InvalidArgument("parameter \"count\": " + quote(v) + " is not " + range());
  }
  if (n.error == internal::UintError::kTooLarge) {
    return InvalidArgument("parameter \"count\": " + (v.size() <= 20 ? std::string(v) : quote(v)) +
                           " is more than max_batch (" + std::to_string(max) + ")");
  }
  if (n.value == 0) return InvalidArgument("parameter \"count\": 0 is too small (at least 1)");
  return n.value;
}

namespace {

Result<IdFormat> format_param(std::string_view v) {
  if (v == "json") return IdFormat::kJson;
  if (v == "number") return IdFormat::kNumber;
  if (v == "text") return IdFormat::kText;
  return InvalidArgument("parameter \"format\": " + quote(v) + " is not json, number or text");
}

// The route of a path; `rest` is the path segment after the prefix of the routes that take one
// (/v1/ids/{id}, /api/snowflake/get/{key}).
Route match_route(std::string_view path, std::string_view& rest) noexcept {
  constexpr std::string_view kIdPrefix = "/v1/ids/";
  constexpr std::string_view kLeafPrefix = "/api/snowflake/get/";
  const auto segment_after = [&](std::string_view prefix) {
    if (!path.starts_with(prefix) || path.find('/', prefix.size()) != std::string_view::npos) {
      return false;
    }
    rest = path.substr(prefix.size());
    return true;
  };
  if (path == "/v1/ids") return Route::kIds;
  if (segment_after(kIdPrefix)) return Route::kIdDecode;
  if (path == "/v1/layout") return Route::kLayout;
  if (segment_after(kLeafPrefix)) return Route::kLeafGet;
  if (path == "/decodeSnowflakeId") return Route::kLeafDecode;
  if (path == "/healthz") return Route::kHealthz;
  if (path == "/readyz") return Route::kReadyz;
  if (path == "/metrics") return Route::kMetrics;
  return Route::kOther;
}

Status no_route(std::string_view path) {
  return Status(StatusCode::kNotFound, "no such route: " + quote(path));
}

std::string_view kind_name(FieldKind kind) noexcept {
  switch (kind) {
    case FieldKind::kTime:
      return "time";
    case FieldKind::kClock:
      return "clock";
    case FieldKind::kNode:
      return "node";
    case FieldKind::kSeq:
      return "seq";
  }
  return "node";
}

std::int64_t unix_ms(TimePoint t) {
  return std::chrono::floor<std::chrono::milliseconds>(t).time_since_epoch().count();
}

}  // namespace

HttpStatus http_status(const Status& status) noexcept {
  switch (status.code()) {
    case StatusCode::kOk:
      return {200, false, false};
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return {400, false, false};
    case StatusCode::kUnauthenticated:
      return {401, false, false, true};
    case StatusCode::kPermissionDenied:
      return {403, false, false};
    case StatusCode::kNotFound:
      return {404, false, false};
    case StatusCode::kAlreadyExists:
      return {409, false, false};
    case StatusCode::kUnimplemented:
      switch (status.reason()) {
        case Reason::kMethodNotAllowed:
          return {405, false, true};
        case Reason::kExpectationFailed:
          return {417, false, false};
        default:
          return {501, false, false};
      }
    case StatusCode::kResourceExhausted:
      switch (status.reason()) {
        case Reason::kBodyTooLarge:
          return {413, false, false};
        case Reason::kHeaderTooLarge:
          return {431, false, false};
        default:
          return {503, true, false};
      }
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
      return {503, true, false};
    case StatusCode::kFailedPrecondition:
      // The node cannot serve (and retrying here will not help), but nothing is broken.
      switch (status.reason()) {
        case Reason::kTimeExhausted:
        case Reason::kClockBeforeEpoch:
        case Reason::kLeaseLost:
        case Reason::kRegistryRegressed:
          return {503, false, false};
        default:
          return {500, false, false};
      }
    default:
      return {500, false, false};
  }
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
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

Api::~Api() = default;

Api::Api(Service& service, SegmentApi* segments, OrderFormats* orders)
    : service_(service),
      segments_(segments),
      orders_(std::make_unique<OrderApi>(*this, service, segments, orders)) {
  if (segments_ != nullptr) {
    OrderApi* writer = orders_.get();
    segments_->set_order_writer(
        [writer](std::string_view tag, std::span<const std::uint64_t> ids, ApiResponse& r,
                 OutBuf& body) { return writer->write_segment(tag, ids, r, body); });
    segments_->set_decode_counter([writer](bool ok) { writer->count_decode(ok); });
  }
  const Layout& layout = service.layout();
  OutBuf b;
  b.append("{\"text\":");
  b.append_json_string(layout.to_string());
  b.append(",\"preset\":");
  if (layout.preset_name().empty()) {
    b.append("null");
  } else {
    b.append_json_string(layout.preset_name());
  }
  b.append(",\"bits\":");
  b.append_uint(static_cast<std::uint64_t>(layout.total_bits()));
  b.append(",\"fields\":[");
  bool first = true;
  for (const Field& f : layout.fields()) {
    if (!first) b.push(',');
    first = false;
    b.append("{\"name\":");
    b.append_json_string(f.name);
    b.append(",\"bits\":");
    b.append_uint(static_cast<std::uint64_t>(f.bits));
    b.append(",\"shift\":");
    b.append_uint(static_cast<std::uint64_t>(f.shift));
    b.append(",\"kind\":\"");
    b.append(kind_name(f.kind));
    b.append("\"}");
  }
  b.append("],\"epoch\":");
  b.append_json_string(format_time(layout.epoch()));
  b.append(",\"epoch_unix_ms\":");
  b.append_int(unix_ms(layout.epoch()));
  b.append(",\"unit_ms\":");
  b.append_double(std::chrono::duration<double, std::milli>(layout.unit()).count());
  b.append(",\"end\":");
  if (layout.end() == TimePoint::max()) {
    b.append("null");
  } else {
    b.append_json_string(format_time(layout.end()));
  }
  b.append(",\"rate_limit_per_second\":");
  b.append_double(layout.rate_limit_per_second());
  b.append(",\"node_count\":");
  b.append_uint(layout.node_count());
  b.append(",\"clock_generations\":");
  b.append_uint(layout.clock_generations());
  b.append(",\"node\":");
  b.append_uint(service.node());
  b.append(",\"max_batch\":");
  b.append_uint(service.max_batch());
  b.append("}\n");
  layout_json_.assign(b.view());
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
  r.content_type = kJson;
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

template <typename F>
void Api::guarded(ApiResponse& r, OutBuf& body, F&& f) noexcept {
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
      error(Status(StatusCode::kInternal, std::string("internal error: ") + e.what()), r, body);
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

void Api::handle(const ApiRequest& request, ApiResponse& r, OutBuf& body, ApiScratch& scratch,
                 Blocking blocking) noexcept {
  guarded(r, body, [&] { route(request, r, body, scratch, blocking); });
}

void Api::complete_segment(const PendingSegment& pending, ApiResponse& r, OutBuf& body) noexcept {
  r = ApiResponse{};
  r.route = pending.route;
  guarded(r, body, [&] {
    if (segments_ == nullptr) {
      error(Status(StatusCode::kInternal, "internal error: segment mode is not served here"), r,
            body);
      return;
    }
    segments_->complete(pending, r, body);
  });
}

void Api::complete(const PendingIssue& pending, std::span<const std::uint64_t> ids,
                   const Status& status, ApiResponse& r, OutBuf& body) noexcept {
  r = ApiResponse{};
  r.route = pending.route;
  guarded(r, body, [&] {
    if (!status.ok()) {
      error(status, r, body);
    } else if (ids.size() != pending.count) {
      r.close = true;
      error(Status(StatusCode::kInternal,
                   "internal error: the IDs of a deferred request went missing"),
            r, body);
    } else if (pending.route == Route::kOrderNumbers) {
      orders_->write_snowflake(ids, r, body);
    } else {
      write_ids(pending, ids, r, body);
    }
  });
}

void Api::route(const ApiRequest& request, ApiResponse& r, OutBuf& body, ApiScratch& scratch,
                Blocking blocking) {
  const Method method = request.method;
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
  const std::string_view path = target.substr(0, qmark);
  const std::string_view query =
      qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);

  if (segments_ != nullptr &&
      segments_->handle(request, path, query, r, body, scratch.query, blocking)) {
    return;
  }
  if (orders_->handle(request, path, query, r, body, scratch, blocking)) return;
  std::string_view rest;
  r.route = match_route(path, rest);
  if (r.route == Route::kOther) {
    error(no_route(path), r, body);
    return;
  }
  if (method != Method::kGet && method != Method::kHead) {
    error(Status(Reason::kMethodNotAllowed, "only GET and HEAD are allowed here"), r, body);
    return;
  }
  switch (r.route) {
    case Route::kIds:
      ids(method, query, r, body, scratch, blocking);
      return;
    case Route::kIdDecode:
      decode(rest, query, r, body, scratch);
      return;
    case Route::kLeafGet:
      leaf_get(method, rest, query, r, body, scratch, blocking);
      return;
    case Route::kLeafDecode:
      leaf_decode(query, r, body, scratch);
      return;
    default:
      simple_route(path, query, r, body, scratch);
      return;
  }
}

void Api::simple_route(std::string_view path, std::string_view query, ApiResponse& r, OutBuf& body,
                       ApiScratch& scratch) {
  QueryParams q;
  if (Status st = parse_query(query, path, {}, q, scratch.query); !st.ok()) {
    error(st, r, body);
    return;
  }
  switch (r.route) {
    case Route::kLayout:
      layout(body);
      return;
    case Route::kHealthz:
      body.append("{\"status\":\"ok\"}\n");
      return;
    case Route::kReadyz:
      readyz(r, body);
      return;
    case Route::kMetrics:
      metrics(r, body);
      return;
    default:
      error(no_route(path), r, body);
      return;
  }
}

void Api::layout(OutBuf& body) const {
  // The node ID changes when a lost lease is replaced: write the current one.
  constexpr std::string_view kNode = ",\"node\":";
  const std::string_view json = layout_json_;
  const std::size_t at = json.rfind(kNode);
  if (at == std::string_view::npos) {
    body.append(json);
    return;
  }
  const std::size_t value = at + kNode.size();
  const std::size_t end = json.find(',', value);
  body.append(json.substr(0, value));
  body.append_uint(service_.node());
  body.append(json.substr(end == std::string_view::npos ? json.size() : end));
}

void Api::ids(Method method, std::string_view query, ApiResponse& r, OutBuf& body,
              ApiScratch& scratch, Blocking blocking) {
  PendingIssue pending{Route::kIds, 1, IdFormat::kJson, Encoding::kDecimal};
  if (Status st = parse_ids(query, scratch, pending); !st.ok()) {
    error(st, r, body);
    return;
  }
  if (method == Method::kHead) {
    // GET's status and headers, without issuing (and burning) the IDs of a body never sent.
    r.content_type = pending.format == IdFormat::kText ? kText : kJson;
    r.omit_content_length = true;
    return;
  }
  const std::uint64_t count = pending.count;
  if (scratch.ids.size() < count) scratch.ids.resize(count);
  const std::span<std::uint64_t> ids(scratch.ids.data(), count);
  if (issue_or_defer(pending, ids, blocking, scratch, r, body)) write_ids(pending, ids, r, body);
}

Status Api::parse_ids(std::string_view query, ApiScratch& scratch, PendingIssue& pending) const {
  static constexpr std::array<std::string_view, 3> kParams = {"count", "format", "encoding"};
  QueryParams q;
  if (Status st = parse_query(query, "/v1/ids", kParams, q, scratch.query); !st.ok()) return st;
  if (q.present[0]) {
    Result<std::uint64_t> count = count_param(q.value[0], service_.max_batch());
    if (!count.ok()) return count.status();
    pending.count = *count;
  }
  if (q.present[1]) {
    Result<IdFormat> format = format_param(q.value[1]);
    if (!format.ok()) return format.status();
    pending.format = *format;
  }
  Result<Encoding> encoding = encoding_param(q, 2);
  if (!encoding.ok()) return encoding.status();
  pending.encoding = *encoding;
  if (pending.format == IdFormat::kNumber && pending.encoding != Encoding::kDecimal) {
    return InvalidArgument(
        "format=number writes JSON numbers, which are decimal; it cannot be combined with "
        "encoding=" +
        std::string(to_string(pending.encoding)));
  }
  return OkStatus();
}

bool Api::issue_or_defer(const PendingIssue& pending, std::span<std::uint64_t> ids,
                         Blocking blocking, const ApiScratch& scratch, ApiResponse& r,
                         OutBuf& body) {
  const bool queue_behind = blocking == Blocking::kNever && scratch.defer_issue;
  const Status st = queue_behind
                        ? Status(Reason::kWouldBlock, "earlier requests wait for the generator")
                        : service_.issue(ids, blocking);
  if (st.ok()) return true;
  if (blocking == Blocking::kNever && st.reason() == Reason::kWouldBlock) {
    r.deferred = true;
    r.pending = pending;
  } else {
    error(st, r, body);
  }
  return false;
}

void Api::write_ids(const PendingIssue& p, std::span<const std::uint64_t> ids, ApiResponse& r,
                    OutBuf& body) {
  if (p.route == Route::kLeafGet) {
    r.content_type = kText;
    for (std::uint64_t id : ids) body.append_uint(id);
    return;
  }
  const std::size_t count = ids.size();
  if (count == 0) {
    r.content_type = p.format == IdFormat::kText ? kText : kJson;
    if (p.format != IdFormat::kText) body.append("{\"ids\":[]}\n");
    return;
  }
  // Written by hand: at most kMaxEncodedIdLength characters and 3 punctuation bytes an ID, plus
  // the wrapper.
  constexpr std::size_t kPerId = kMaxEncodedIdLength + 3;
  char* const start = body.tail(count * kPerId + 16);
  char* p_out = start;
  const auto put = [&p_out](std::string_view s) {
    std::memcpy(p_out, s.data(), s.size());
    p_out += s.size();
  };
  const auto put_id = [&p_out, enc = p.encoding](std::uint64_t id) {
    p_out = write_id(p_out, id, enc);
  };
  if (p.format == IdFormat::kText) {
    r.content_type = kText;
    for (std::uint64_t id : ids) {
      put_id(id);
      *p_out++ = '\n';
    }
  } else {
    r.content_type = kJson;
    put("{\"ids\":[");
    if (p.format == IdFormat::kNumber) {
      for (std::uint64_t id : ids) {
        p_out = std::to_chars(p_out, p_out + 20, id).ptr;
        *p_out++ = ',';
      }
    } else {
      for (std::uint64_t id : ids) {
        *p_out++ = '"';
        put_id(id);
        *p_out++ = '"';
        *p_out++ = ',';
      }
    }
    p_out[-1] = ']';  // count >= 1: replaces the last comma
    put("}\n");
  }
  body.commit(static_cast<std::size_t>(p_out - start));
}

void Api::decode(std::string_view raw_id, std::string_view query, ApiResponse& r, OutBuf& body,
                 ApiScratch& scratch) {
  static constexpr std::array<std::string_view, 1> kParams = {"encoding"};
  QueryParams q;
  if (Status st = parse_query(query, "/v1/ids/{id}", kParams, q, scratch.query); !st.ok()) {
    error(st, r, body);
    return;
  }
  Result<Encoding> encoding = encoding_param(q, 0);
  if (!encoding.ok()) {
    error(encoding.status(), r, body);
    return;
  }
  Result<std::string_view> text = path_segment(raw_id, scratch.query);
  if (!text.ok()) {
    error(text.status(), r, body);
    return;
  }
  if (text->empty()) {
    error(InvalidArgument("the ID in the path is empty (GET /v1/ids/{id})"), r, body);
    return;
  }
  const Layout& layout = service_.layout();
  Result<flurry::DecodedId> d = decode_id(layout, *text, *encoding);
  if (!d.ok()) {
    error(d.status(), r, body);
    return;
  }
  body.push('{');
  write_decoded_id(layout, *d, body);
  body.append("}\n");
}

void write_decoded_id(const Layout& layout, const DecodedId& d, OutBuf& body) {
  body.append("\"id\":\"");
  body.append_uint(d.id);
  body.append("\",\"layout\":");
  body.append_json_string(layout.to_string());
  body.append(",\"time\":");
  body.append_json_string(format_time(d.time));
  body.append(",\"unix_ms\":");
  body.append_int(d.unix_ms);
  body.append(",\"ticks\":");
  body.append_uint(d.parts.ticks);
  body.append(",\"node\":");
  body.append_uint(d.parts.node);
  body.append(",\"seq\":");
  body.append_uint(d.parts.seq);
  if (d.has_clock) {
    body.append(",\"clock\":");
    body.append_uint(d.parts.clock);
  }
  body.append(",\"fields\":{");
  bool first = true;
  for (const DecodedField& f : d.fields) {
    if (!first) body.push(',');
    first = false;
    body.append_json_string(f.name);
    body.push(':');
    body.append_uint(f.value);
  }
  body.append("},\"encodings\":{");
  first = true;
  for (const EncodedId& e : d.encodings) {
    if (!first) body.push(',');
    first = false;
    body.push('"');
    body.append(e.name);
    body.append("\":\"");
    body.append(e.text);
    body.push('"');
  }
  body.push('}');
}

void Api::leaf_get(Method method, std::string_view raw_key, std::string_view query, ApiResponse& r,
                   OutBuf& body, ApiScratch& scratch, Blocking blocking) {
  QueryParams q;
  if (Status st = parse_query(query, "/api/snowflake/get/{key}", {}, q, scratch.query); !st.ok()) {
    error(st, r, body);
    return;
  }
  Result<std::string_view> key = path_segment(raw_key, scratch.query);
  if (!key.ok()) {
    error(key.status(), r, body);
    return;
  }
  if (key->empty()) {
    error(InvalidArgument("the key in the path is empty (GET /api/snowflake/get/{key})"), r, body);
    return;
  }
  const PendingIssue pending{Route::kLeafGet, 1, IdFormat::kText, Encoding::kDecimal};
  if (method == Method::kHead) {
    r.content_type = kText;
    r.omit_content_length = true;
    return;
  }
  std::uint64_t id = 0;
  const std::span<std::uint64_t> ids(&id, 1);
  if (issue_or_defer(pending, ids, blocking, scratch, r, body)) write_ids(pending, ids, r, body);
}

void Api::leaf_decode(std::string_view query, ApiResponse& r, OutBuf& body, ApiScratch& scratch) {
  static constexpr std::array<std::string_view, 1> kParams = {"snowflakeId"};
  QueryParams q;
  if (Status st = parse_query(query, "/decodeSnowflakeId", kParams, q, scratch.query); !st.ok()) {
    error(st, r, body);
    return;
  }
  if (!q.present[0]) {
    error(InvalidArgument("parameter \"snowflakeId\" is missing"), r, body);
    return;
  }
  if (q.value[0].empty()) {
    error(InvalidArgument("parameter \"snowflakeId\" is empty"), r, body);
    return;
  }
  Result<flurry::DecodedId> d = decode_id(service_.layout(), q.value[0], Encoding::kDecimal);
  if (!d.ok()) {
    error(d.status(), r, body);
    return;
  }
  body.append("{\"timestamp\":\"");
  body.append_int(d->unix_ms);
  body.append("\",\"workerId\":\"");
  body.append_uint(d->parts.node);
  body.append("\",\"sequenceId\":\"");
  body.append_uint(d->parts.seq);
  body.append("\"}\n");
}

void Api::readyz(ApiResponse& r, OutBuf& body) {
  const Status ready = service_.readiness();
  if (ready.ok()) {
    body.append("{\"ready\":true,\"node\":");
    body.append_uint(service_.node());
    body.append("}\n");
    return;
  }
  r.status = 503;
  body.append("{\"ready\":false,\"node\":");
  body.append_uint(service_.node());
  body.append(",\"reason\":");
  body.append_json_string(ready.reason() != Reason::kNone ? to_string(ready.reason())
                                                          : to_string(ready.code()));
  body.append(",\"message\":");
  body.append_json_string(ready.message());
  body.append("}\n");
}

void Api::metrics(ApiResponse& r, OutBuf& body) {
  r.content_type = kPrometheus;
  std::string text;
  text.reserve(8192);
  PrometheusWriter writer(text);
  service_.write_metrics(writer);
  if (segments_ != nullptr) segments_->write_metrics(writer);
  orders_->write_metrics(writer);
  if (extra_) extra_(writer);
  body.append(text);
}

}  // namespace flurry::server

#include "api.h"

#include <charconv>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <span>

#include "flurry/codec.h"
#include "flurry/timefmt.h"

namespace flurry::server {
namespace {

// One ID taken apart.
struct DecodedId {
  std::uint64_t id = 0;
  IdParts parts;
  TimePoint time;
  std::int64_t unix_ms = 0;
};

Result<DecodedId> decode_id_text(const Layout& layout, std::string_view text, Encoding encoding) {
  Result<std::uint64_t> id = decode_id(text, encoding);
  if (!id.ok()) return id.status();
  Result<IdParts> parts = layout.decompose(*id);
  if (!parts.ok()) return parts.status();  // says why this layout cannot have produced it
  DecodedId d;
  d.id = *id;
  d.parts = *parts;
  d.time = layout.time_of(parts->ticks);
  d.unix_ms = std::chrono::floor<std::chrono::milliseconds>(d.time).time_since_epoch().count();
  return d;
}

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

constexpr std::size_t kMaxParams = 4;

struct QueryParams {
  std::array<std::string_view, kMaxParams> value{};
  std::array<bool, kMaxParams> present{};
};

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool needs_decoding(std::string_view s) noexcept {
  return s.find_first_of("%+") != std::string_view::npos;
}

// Percent-decodes `in` into `out` ('+' stands for a space, as in forms). False on a bad escape.
bool percent_decode(std::string_view in, std::string& out, bool plus_is_space) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi << 4 | lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return true;
}

std::string list_names(std::span<const std::string_view> names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

// Splits the query string into the allowed parameters. Errors name the parameter: unknown,
// repeated, or badly percent-encoded.
Status parse_query(std::string_view query, std::string_view route,
                   std::span<const std::string_view> allowed, QueryParams& params,
                   ApiScratch& scratch) {
  std::size_t pos = 0;
  while (pos <= query.size()) {
    std::size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view part = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (part.empty()) continue;
    const std::size_t eq = part.find('=');
    const std::string_view raw_key = part.substr(0, eq);
    const std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    std::string_view key = raw_key;
    if (needs_decoding(raw_key)) {
      if (!percent_decode(raw_key, scratch.key, true)) {
        return InvalidArgument("bad percent-encoding in the query string: " + quote(raw_key));
      }
      key = scratch.key;
    }
    std::size_t index = allowed.size();
    for (std::size_t i = 0; i < allowed.size(); ++i) {
      if (allowed[i] == key) {
        index = i;
        break;
      }
    }
    if (index == allowed.size()) {
      if (allowed.empty()) {
        return InvalidArgument("unknown parameter " + quote(key) + " (" + std::string(route) +
                               " takes no parameters)");
      }
      return InvalidArgument("unknown parameter " + quote(key) + " (" + std::string(route) +
                             " takes " + list_names(allowed) + ")");
    }
    if (params.present[index]) {
      return InvalidArgument("parameter " + quote(key) + " is given more than once");
    }
    params.present[index] = true;
    if (needs_decoding(raw_value)) {
      if (!percent_decode(raw_value, scratch.decoded[index], true)) {
        return InvalidArgument("parameter " + quote(key) + ": bad percent-encoding in " +
                               quote(raw_value));
      }
      params.value[index] = scratch.decoded[index];
    } else {
      params.value[index] = raw_value;
    }
  }
  return OkStatus();
}

Result<Encoding> encoding_param(const QueryParams& q, std::size_t i) {
  if (!q.present[i]) return Encoding::kDecimal;
  Result<Encoding> e = parse_encoding(q.value[i]);
  if (!e.ok()) {
    return InvalidArgument("parameter \"encoding\": " + quote(q.value[i]) +
                           " is not dec, hex, base32 or base62");
  }
  return e;
}

// A path segment after a route prefix: percent-decoded ('+' stays a plus), no '/' inside.
// nullopt with `status` set on a bad escape.
std::optional<std::string_view> path_segment(std::string_view raw, std::string& storage,
                                             Status& status) {
  if (raw.find('%') == std::string_view::npos) return raw;
  if (!percent_decode(raw, storage, false)) {
    status = InvalidArgument("bad percent-encoding in the path: " + quote(raw));
    return std::nullopt;
  }
  return std::string_view(storage);
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
      return {200, false};
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return {400, false};
    case StatusCode::kNotFound:
      return {404, false};
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
    case StatusCode::kAborted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
      return {503, true};
    case StatusCode::kFailedPrecondition:
      // The node cannot serve (and retrying here will not help), but nothing is broken.
      switch (status.reason()) {
        case Reason::kTimeExhausted:
        case Reason::kClockBeforeEpoch:
        case Reason::kLeaseLost:
        case Reason::kSuspended:
        case Reason::kShutDown:
          return {503, false};
        default:
          return {500, false};
      }
    default:
      return {500, false};
  }
}

std::string_view reason_phrase(int status) noexcept {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

Api::Api(Service& service) : service_(service) {
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

void Api::error(int status, std::string_view code, std::string_view message, ApiResponse& r,
                OutBuf& body) {
  r.status = status;
  r.content_type = kJson;
  body.append("{\"error\":{\"code\":");
  body.append_json_string(code);
  body.append(",\"message\":");
  body.append_json_string(message);
  body.append("}}\n");
}

void Api::error(const Status& status, ApiResponse& r, OutBuf& body) {
  const HttpStatus h = http_status(status);
  r.status = h.status;
  r.retry_after = h.retry_after;
  r.content_type = kJson;
  body.append("{\"error\":{\"code\":");
  body.append_json_string(to_string(status.code()));
  // The reason only where it says more than the code (CLOCK_BEHIND, LEASE_LOST, ...).
  if (status.reason() != Reason::kNone && status.reason() != Reason::kBadInput) {
    body.append(",\"reason\":");
    body.append_json_string(to_string(status.reason()));
  }
  body.append(",\"message\":");
  body.append_json_string(status.message());
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
      error(500, "INTERNAL", std::string("internal error: ") + e.what(), r, body);
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

void Api::handle(Method method, std::string_view target, ApiResponse& r, OutBuf& body,
                 ApiScratch& scratch, Blocking blocking) noexcept {
  guarded(r, body, [&] { route(method, target, r, body, scratch, blocking); });
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
      error(500, "INTERNAL", "internal error: the IDs of a deferred request went missing", r, body);
    } else {
      write_ids(pending, ids, r, body);
    }
  });
}

void Api::route(Method method, std::string_view target, ApiResponse& r, OutBuf& body,
                ApiScratch& scratch, Blocking blocking) {
  // Absolute form (http://host/path) is allowed by HTTP/1.1; use its path.
  if (target.starts_with("http://") || target.starts_with("https://")) {
    const std::size_t slash = target.find('/', target.find("//") + 2);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target.front() != '/') {
    r.route = Route::kOther;
    error(400, "INVALID_ARGUMENT", "the request target must be a path starting with '/'", r, body);
    return;
  }
  const std::size_t qmark = target.find('?');
  const std::string_view path = target.substr(0, qmark);
  const std::string_view query =
      qmark == std::string_view::npos ? std::string_view() : target.substr(qmark + 1);

  std::string_view rest;
  if (path == "/v1/ids") {
    r.route = Route::kIds;
  } else if (path.starts_with("/v1/ids/") && path.find('/', 8) == std::string_view::npos) {
    r.route = Route::kIdDecode;
    rest = path.substr(8);
  } else if (path == "/v1/layout") {
    r.route = Route::kLayout;
  } else if (path.starts_with("/api/snowflake/get/") &&
             path.find('/', 19) == std::string_view::npos) {
    r.route = Route::kLeafGet;
    rest = path.substr(19);
  } else if (path == "/decodeSnowflakeId") {
    r.route = Route::kLeafDecode;
  } else if (path == "/healthz") {
    r.route = Route::kHealthz;
  } else if (path == "/readyz") {
    r.route = Route::kReadyz;
  } else if (path == "/metrics") {
    r.route = Route::kMetrics;
  } else {
    r.route = Route::kOther;
    error(404, "NOT_FOUND", "no such route: " + quote(path), r, body);
    return;
  }
  if (method == Method::kOther) {
    r.allow = true;
    error(405, "METHOD_NOT_ALLOWED", "only GET and HEAD are allowed here", r, body);
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
      break;
  }
  // The routes without parameters.
  QueryParams q;
  if (Status st = parse_query(query, path, {}, q, scratch); !st.ok()) {
    error(st, r, body);
    return;
  }
  switch (r.route) {
    case Route::kLayout: {
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
      return;
    }
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
      error(404, "NOT_FOUND", "no such route: " + quote(path), r, body);
      return;
  }
}

void Api::ids(Method method, std::string_view query, ApiResponse& r, OutBuf& body,
              ApiScratch& scratch, Blocking blocking) {
  static constexpr std::array<std::string_view, 3> kParams = {"count", "format", "encoding"};
  QueryParams q;
  if (Status st = parse_query(query, "/v1/ids", kParams, q, scratch); !st.ok()) {
    error(st, r, body);
    return;
  }
  const std::uint64_t max = service_.max_batch();
  std::uint64_t count = 1;
  if (q.present[0]) {
    const std::string_view v = q.value[0];
    const std::string range = "a whole number from 1 to " + std::to_string(max);
    if (v.empty()) {
      error(400, "INVALID_ARGUMENT", "parameter \"count\" is empty; expected " + range, r, body);
      return;
    }
    bool digits = true;
    for (char c : v) digits = digits && c >= '0' && c <= '9';
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (!digits || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
      error(400, "INVALID_ARGUMENT", "parameter \"count\": " + quote(v) + " is not " + range, r,
            body);
      return;
    }
    if (ec == std::errc::result_out_of_range || n > max) {
      error(400, "INVALID_ARGUMENT",
            "parameter \"count\": " + (v.size() <= 20 ? std::string(v) : quote(v)) +
                " is more than max_batch (" + std::to_string(max) + ")",
            r, body);
      return;
    }
    if (n == 0) {
      error(400, "INVALID_ARGUMENT", "parameter \"count\": 0 is too small (at least 1)", r, body);
      return;
    }
    count = n;
  }
  IdFormat format = IdFormat::kJson;
  if (q.present[1]) {
    const std::string_view v = q.value[1];
    if (v == "json") {
      format = IdFormat::kJson;
    } else if (v == "number") {
      format = IdFormat::kNumber;
    } else if (v == "text") {
      format = IdFormat::kText;
    } else {
      error(400, "INVALID_ARGUMENT",
            "parameter \"format\": " + quote(v) + " is not json, number or text", r, body);
      return;
    }
  }
  Result<Encoding> encoding = encoding_param(q, 2);
  if (!encoding.ok()) {
    error(encoding.status(), r, body);
    return;
  }
  if (format == IdFormat::kNumber && *encoding != Encoding::kDecimal) {
    error(400, "INVALID_ARGUMENT",
          "format=number writes JSON numbers, which are decimal; it cannot be combined with "
          "encoding=" +
              std::string(to_string(*encoding)),
          r, body);
    return;
  }

  const PendingIssue pending{Route::kIds, count, format, *encoding};
  if (method == Method::kHead) {
    // GET's status and headers, without issuing (and burning) the IDs of a body never sent.
    r.content_type = format == IdFormat::kText ? kText : kJson;
    r.omit_content_length = true;
    return;
  }
  if (scratch.ids.size() < count) scratch.ids.resize(count);
  const std::span<std::uint64_t> ids(scratch.ids.data(), count);
  if (issue_or_defer(pending, ids, blocking, scratch, r, body)) write_ids(pending, ids, r, body);
}

bool Api::issue_or_defer(const PendingIssue& pending, std::span<std::uint64_t> ids,
                         Blocking blocking, const ApiScratch& scratch, ApiResponse& r,
                         OutBuf& body) {
  const bool queue_behind = blocking == Blocking::kNever && scratch.defer_issue;
  const Status st = queue_behind ? Status(StatusCode::kUnavailable, Reason::kWouldBlock,
                                          "earlier requests wait for the generator")
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
  if (Status st = parse_query(query, "/v1/ids/{id}", kParams, q, scratch); !st.ok()) {
    error(st, r, body);
    return;
  }
  Result<Encoding> encoding = encoding_param(q, 0);
  if (!encoding.ok()) {
    error(encoding.status(), r, body);
    return;
  }
  Status seg_status;
  const std::optional<std::string_view> text = path_segment(raw_id, scratch.path, seg_status);
  if (!text) {
    error(seg_status, r, body);
    return;
  }
  if (text->empty()) {
    error(400, "INVALID_ARGUMENT", "the ID in the path is empty (GET /v1/ids/{id})", r, body);
    return;
  }
  Result<DecodedId> d = decode_id_text(service_.layout(), *text, *encoding);
  if (!d.ok()) {
    error(d.status(), r, body);
    return;
  }
  const Layout& layout = service_.layout();
  body.append("{\"id\":\"");
  body.append_uint(d->id);
  body.append("\",\"layout\":");
  body.append_json_string(layout.to_string());
  body.append(",\"time\":");
  body.append_json_string(format_time(d->time));
  body.append(",\"unix_ms\":");
  body.append_int(d->unix_ms);
  body.append(",\"ticks\":");
  body.append_uint(d->parts.ticks);
  body.append(",\"node\":");
  body.append_uint(d->parts.node);
  body.append(",\"seq\":");
  body.append_uint(d->parts.seq);
  if (layout.clock_field() != nullptr) {
    body.append(",\"clock\":");
    body.append_uint(d->parts.clock);
  }
  body.append(",\"fields\":{");
  bool first = true;
  for (const Field& f : layout.fields()) {
    if (!first) body.push(',');
    first = false;
    body.append_json_string(f.name);
    body.push(':');
    body.append_uint(layout.field_value(d->id, f));
  }
  body.append("},\"encodings\":{");
  constexpr std::array<Encoding, 4> kEncodings = {Encoding::kDecimal, Encoding::kHex,
                                                  Encoding::kBase32, Encoding::kBase62};
  first = true;
  for (Encoding e : kEncodings) {
    if (!first) body.push(',');
    first = false;
    body.push('"');
    body.append(to_string(e));
    body.append("\":\"");
    body.append(encode_id(d->id, e));
    body.push('"');
  }
  body.append("}}\n");
}

void Api::leaf_get(Method method, std::string_view raw_key, std::string_view query, ApiResponse& r,
                   OutBuf& body, ApiScratch& scratch, Blocking blocking) {
  QueryParams q;
  if (Status st = parse_query(query, "/api/snowflake/get/{key}", {}, q, scratch); !st.ok()) {
    error(st, r, body);
    return;
  }
  Status seg_status;
  const std::optional<std::string_view> key = path_segment(raw_key, scratch.path, seg_status);
  if (!key) {
    error(seg_status, r, body);
    return;
  }
  if (key->empty()) {
    error(400, "INVALID_ARGUMENT", "the key in the path is empty (GET /api/snowflake/get/{key})", r,
          body);
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
  if (Status st = parse_query(query, "/decodeSnowflakeId", kParams, q, scratch); !st.ok()) {
    error(st, r, body);
    return;
  }
  if (!q.present[0]) {
    error(400, "INVALID_ARGUMENT", "parameter \"snowflakeId\" is missing", r, body);
    return;
  }
  if (q.value[0].empty()) {
    error(400, "INVALID_ARGUMENT", "parameter \"snowflakeId\" is empty", r, body);
    return;
  }
  Result<DecodedId> d = decode_id_text(service_.layout(), q.value[0], Encoding::kDecimal);
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
  if (extra_) extra_(writer);
  body.append(text);
}

}  // namespace flurry::server

#include "segment_api.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <span>
#include <vector>

#include "flurry/timefmt.h"
#include "segment_body.h"
#include "segments_page.h"
#include "text.h"

namespace flurry::server {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kText = "text/plain; charset=utf-8";
constexpr std::string_view kHtml = "text/html; charset=utf-8";

constexpr std::string_view kListPath = "/v1/segments";
constexpr std::string_view kTagPrefix = "/v1/segments/";
constexpr std::string_view kLeafPrefix = "/api/segment/get/";
constexpr std::string_view kPagePath = "/segments";

constexpr AdminAction kCreateAction = {
    "creating tags over HTTP", "creating a tag",
    "create the tag with `flurry segment create` against the store"};

// How long a deferred request may wait for a thread of the segment pool, at least: below this a
// short segment_max_wait_ms would turn an ordinary queue into 503s.
constexpr milliseconds kMinQueueWait{1000};

// A whole number from 1 to `max` in parameter `name`.
Result<std::uint64_t> positive_param(std::string_view name, std::string_view v, std::uint64_t max) {
  const std::string param = "parameter \"" + std::string(name) + "\"";
  const auto range = [max] { return "a whole number from 1 to " + std::to_string(max); };
  if (v.empty()) return InvalidArgument(param + " is empty; expected " + range());
  const internal::ParsedUint n = internal::parse_uint(v, max);
  if (n.error == internal::UintError::kNotDigits) {
    return InvalidArgument(param + ": " + quote(v) + " is not " + range());
  }
  if (n.error == internal::UintError::kTooLarge) {
    return InvalidArgument(param + ": " + (v.size() <= 20 ? std::string(v) : quote(v)) +
                           " is more than max_batch (" + std::to_string(max) + ")");
  }
  if (n.value == 0) return InvalidArgument(param + ": 0 is too small (at least 1)");
  return n.value;
}

// The one optional numeric parameter of the ids and range routes; 1 when absent.
Result<std::uint64_t> one_param(std::string_view query, std::string_view route,
                                std::string_view name, std::uint64_t max, QueryScratch& scratch) {
  const std::array<std::string_view, 1> allowed = {name};
  QueryParams q;
  if (Status st = parse_query(query, route, allowed, q, scratch); !st.ok()) return st;
  if (!q.present[0]) return std::uint64_t{1};
  return positive_param(name, q.value[0], max);
}

// The tag of a path segment, percent-decoded and checked: 400 saying what is wrong.
Result<std::string_view> tag_of(std::string_view raw, QueryScratch& scratch) {
  Result<std::string_view> tag = path_segment(raw, scratch);
  if (!tag.ok()) return tag.status();
  if (Status st = check_segment_tag(*tag); !st.ok()) {
    return InvalidArgument("the tag in the path is not a valid tag name: " + st.message());
  }
  return tag;
}

Status not_allowed(bool post_too) {
  return Status(Reason::kMethodNotAllowed, post_too ? "only GET, HEAD and POST are allowed here"
                                                    : "only GET and HEAD are allowed here");
}

bool same_token(std::string_view presented, std::string_view expected) noexcept {
  // Constant time in the expected token's length, whatever is presented.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    diff = static_cast<unsigned char>(diff | (p ^ expected[i]));
  }
  return diff == 0;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

void append_id(OutBuf& body, std::uint64_t id) {
  body.push('"');
  body.append_uint(id);
  body.push('"');
}

void append_time_ms(OutBuf& body, std::int64_t unix_ms) {
  body.append_json_string(format_time(TimePoint(milliseconds(unix_ms))));
}

// A tag as the store keeps it (the list's entries, "stored", the 201 of a creation).
void write_row(const SegmentTagInfo& t, OutBuf& body) {
  body.append("{\"tag\":");
  body.append_json_string(t.tag);
  body.append(",\"max_id\":");
  append_id(body, t.max_id);
  body.append(",\"step\":");
  body.append_uint(t.step);
  body.append(",\"delta\":");
  body.append_uint(t.delta);
  body.append(",\"remainder\":");
  body.append_uint(t.remainder);
  body.append(",\"description\":");
  body.append_json_string(t.description);
  body.append(",\"update_time\":");
  append_time_ms(body, t.update_time_unix_ms);
  body.push('}');
}

void write_buffer(const std::optional<SegmentBufferInfo>& b, OutBuf& body) {
  if (!b) {
    body.append("null");
    return;
  }
  body.append("{\"start\":");
  append_id(body, b->start);
  body.append(",\"end\":");
  append_id(body, b->end);
  body.append(",\"delta\":");
  body.append_uint(b->delta);
  body.append(",\"remainder\":");
  body.append_uint(b->remainder);
  body.append(",\"size\":");
  body.append_uint(b->size);
  body.append(",\"remaining\":");
  body.append_uint(b->remaining);
  body.append(",\"step\":");
  body.append_uint(b->step);
  body.append(",\"store\":");
  body.append_json_string(b->store);
  body.append(",\"fetched_at\":");
  append_time_ms(body, b->fetched_unix_ms);
  body.append(",\"fetch_ms\":");
  body.append_double(std::chrono::duration<double, std::milli>(b->fetch_duration).count());
  body.push('}');
}

void write_ids(std::span<const std::uint64_t> ids, ApiResponse& r, OutBuf& body) {
  r.content_type = kJson;
  body.append("{\"ids\":[");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) body.push(',');
    append_id(body, ids[i]);
  }
  body.append("]}\n");
}

void write_range(const SegmentRange& range, ApiResponse& r, OutBuf& body) {
  r.content_type = kJson;
  body.append("{\"start\":");
  append_id(body, range.start);
  body.append(",\"end\":");
  append_id(body, range.end);
  body.append(",\"delta\":");
  body.append_uint(range.delta);
  body.append("}\n");
}

void write_leaf(std::uint64_t id, ApiResponse& r, OutBuf& body) {
  r.content_type = kText;
  body.append_uint(id);
}

// The IDs buffer of a thread: requests of up to max_batch IDs reuse it.
std::vector<std::uint64_t>& id_buffer(std::size_t n) {
  thread_local std::vector<std::uint64_t> ids;
  if (ids.size() < n) ids.resize(n);
  return ids;
}

void append_html_escaped(std::string& out, std::string_view text) {
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
}

// The page with the node's stores in its header (HTML-escaped; describe() holds no password).
std::string render_page(const std::vector<std::string>& stores) {
  constexpr std::string_view kSlot = "<!--FLURRY_SEGMENT_STORES-->";
  const std::string_view page = segments_page();
  const std::size_t at = page.find(kSlot);
  if (at == std::string_view::npos) return std::string(page);
  std::string out(page.substr(0, at));
  for (const std::string& store : stores) {
    out += "<code>";
    append_html_escaped(out, store);
    out += "</code>";
  }
  out += page.substr(at + kSlot.size());
  return out;
}

}  // namespace

SegmentApi::SegmentApi(SegmentService& segments, std::string admin_token, MonotonicClock& clock)
    : segments_(segments),
      admin_token_(std::move(admin_token)),
      clock_(clock),
      page_(render_page(segments.store_names())) {}

bool SegmentApi::handle(const ApiRequest& request, std::string_view path, std::string_view query,
                        ApiResponse& r, OutBuf& body, QueryScratch& scratch, Blocking blocking) {
  const Method method = request.method;
  const bool get_or_head = method == Method::kGet || method == Method::kHead;
  if (path == kPagePath) {
    r.route = Route::kSegmentsPage;
    QueryParams q;
    if (!get_or_head) {
      Api::error(not_allowed(false), r, body);
    } else if (Status st = parse_query(query, kPagePath, {}, q, scratch); !st.ok()) {
      Api::error(st, r, body);
    } else {
      r.content_type = kHtml;
      body.append(page_);
    }
    return true;
  }
  if (path == kListPath) {
    r.route = Route::kSegmentList;
    if (method == Method::kPost) {
      create(request, query, r, body, scratch, blocking);
      return true;
    }
    if (!get_or_head) {
      Api::error(not_allowed(true), r, body);
      r.allow_post = true;
      return true;
    }
    QueryParams q;
    if (Status st = parse_query(query, kListPath, {}, q, scratch); !st.ok()) {
      Api::error(st, r, body);
    } else if (blocking == Blocking::kNever) {
      defer(PendingSegment{Route::kSegmentList, {}, 0, {}, {}, {}, {}}, r);
    } else {
      list(r, body);
    }
    return true;
  }
  if (path.starts_with(kLeafPrefix) &&
      path.find('/', kLeafPrefix.size()) == std::string_view::npos) {
    r.route = Route::kSegmentLeafGet;
    if (!get_or_head) {
      Api::error(not_allowed(false), r, body);
      return true;
    }
    take_request(method, Route::kSegmentLeafGet, path.substr(kLeafPrefix.size()), query, r, body,
                 scratch, blocking);
    return true;
  }
  if (!path.starts_with(kTagPrefix)) return false;
  // /v1/segments/{tag}, /v1/segments/{tag}/ids, /v1/segments/{tag}/range.
  const std::string_view rest = path.substr(kTagPrefix.size());
  const std::size_t slash = rest.find('/');
  const std::string_view raw_tag = rest.substr(0, slash);
  const std::string_view what =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (slash == std::string_view::npos) {
    r.route = Route::kSegmentTag;
  } else if (what == "ids") {
    r.route = Route::kSegmentIds;
  } else if (what == "range") {
    r.route = Route::kSegmentRange;
  } else {
    r.route = Route::kOther;
    Api::error(Status(StatusCode::kNotFound,
                      "no such route: " + quote(path) +
                          " (a tag's routes are /v1/segments/{tag}, /v1/segments/{tag}/ids and "
                          "/v1/segments/{tag}/range)"),
               r, body);
    return true;
  }
  if (!get_or_head) {
    Api::error(not_allowed(false), r, body);
    return true;
  }
  if (r.route == Route::kSegmentIds || r.route == Route::kSegmentRange) {
    take_request(method, r.route, raw_tag, query, r, body, scratch, blocking);
    return true;
  }
  QueryParams q;
  if (Status st = parse_query(query, "/v1/segments/{tag}", {}, q, scratch); !st.ok()) {
    Api::error(st, r, body);
    return true;
  }
  Result<std::string_view> tag = tag_of(raw_tag, scratch);
  if (!tag.ok()) {
    Api::error(tag.status(), r, body);
  } else if (blocking == Blocking::kNever) {
    defer(PendingSegment{Route::kSegmentTag, std::string(*tag), 0, {}, {}, {}, {}}, r);
  } else {
    tag_state(std::string(*tag), r, body);
  }
  return true;
}

void SegmentApi::take_request(Method method, Route route, std::string_view raw_tag,
                              std::string_view query, ApiResponse& r, OutBuf& body,
                              QueryScratch& scratch, Blocking blocking) {
  // The route's one parameter: /ids?count=N, /range?size=N; the Leaf get takes none.
  std::uint64_t n = 1;
  if (route == Route::kSegmentLeafGet) {
    QueryParams q;
    if (Status st = parse_query(query, "/api/segment/get/{tag}", {}, q, scratch); !st.ok()) {
      Api::error(st, r, body);
      return;
    }
  } else {
    const bool ids = route == Route::kSegmentIds;
    Result<std::uint64_t> param =
        one_param(query, ids ? "/v1/segments/{tag}/ids" : "/v1/segments/{tag}/range",
                  ids ? "count" : "size", segments_.options().max_batch, scratch);
    if (!param.ok()) {
      Api::error(param.status(), r, body);
      return;
    }
    n = *param;
  }
  Result<std::string_view> tag = tag_of(raw_tag, scratch);
  if (!tag.ok()) {
    Api::error(tag.status(), r, body);
    return;
  }
  if (method == Method::kHead) {
    r.content_type = route == Route::kSegmentLeafGet ? kText : kJson;
    r.omit_content_length = true;
    return;
  }
  take_or_defer(route, *tag, n, r, body, blocking);
}

void SegmentApi::take_or_defer(Route route, std::string_view tag, std::uint64_t n, ApiResponse& r,
                               OutBuf& body, Blocking blocking) {
  const Status st = take(route, tag, n, blocking, r, body);
  if (st.ok()) return;
  if (blocking == Blocking::kNever && st.reason() == Reason::kWouldBlock) {
    defer(PendingSegment{route, std::string(tag), n, {}, {}, {}, {}}, r);
  } else {
    Api::error(st, r, body);
  }
}

Status SegmentApi::take(Route route, std::string_view tag, std::uint64_t n, Blocking blocking,
                        ApiResponse& r, OutBuf& body) {
  if (route == Route::kSegmentRange) {
    Result<SegmentRange> got = segments_.range(tag, n, blocking);
    if (!got.ok()) return got.status();
    write_range(*got, r, body);
    return OkStatus();
  }
  std::vector<std::uint64_t>& buffer = id_buffer(n);
  const std::span<std::uint64_t> out(buffer.data(), n);
  if (Status st = segments_.next(tag, out, blocking); !st.ok()) return st;
  if (route == Route::kOrderNumbers) {
    if (!order_writer_) {
      return Status(StatusCode::kInternal, "internal error: no order-number writer is set");
    }
    return order_writer_(tag, out, r, body);
  }
  if (route == Route::kSegmentLeafGet) {
    write_leaf(out[0], r, body);
  } else {
    write_ids(out, r, body);
  }
  return OkStatus();
}

Status SegmentApi::authorize(std::string_view authorization, const AdminAction& action,
                             bool& wrong_token) {
  wrong_token = false;
  if (admin_token_.empty()) {
    return Status(StatusCode::kPermissionDenied,
                  std::string(action.plural) +
                      " is disabled on this server: set admin_token_file "
                      "(FLURRY_ADMIN_TOKEN_FILE, --admin-token-file) to a file holding a token and "
                      "send it as Authorization: Bearer <token>, or " +
                      std::string(action.alternative));
  }
  authorization = trim(authorization);
  if (authorization.empty()) {
    return Status(StatusCode::kUnauthenticated,
                  std::string(action.singular) +
                      " needs the admin token: send Authorization: Bearer <token>");
  }
  const std::size_t space = authorization.find_first_of(" \t");
  const std::string_view scheme = authorization.substr(0, space);
  const std::string_view token =
      space == std::string_view::npos ? std::string_view() : trim(authorization.substr(space));
  if (!iequals(scheme, "Bearer") || token.empty()) {
    return Status(StatusCode::kUnauthenticated,
                  "the Authorization header must be Bearer <token> with the admin token");
  }
  // One comparison at a time while a wrong token is being answered: a guess that finds the gate
  // closed is refused without being compared, so no number of connections guesses faster than
  // one per kFailedTokenDelay, and no answer tells a wrong token sooner than that.
  bool open = false;
  if (!comparing_.compare_exchange_strong(open, true, std::memory_order_acq_rel)) {
    return Status(StatusCode::kUnavailable,
                  "a wrong admin token was presented a moment ago and is still being answered; "
                  "retry in a second");
  }
  if (!same_token(token, admin_token_)) {
    // The gate stays closed until the delayed refusal is answered (refuse_after_delay).
    wrong_token = true;
    return Status(StatusCode::kPermissionDenied, "the admin token is not the right one");
  }
  comparing_.store(false, std::memory_order_release);
  return OkStatus();
}

bool SegmentApi::admit(std::string_view authorization, const AdminAction& action, ApiResponse& r,
                       OutBuf& body, Blocking blocking) {
  bool wrong_token = false;
  Status st = authorize(authorization, action, wrong_token);
  if (st.ok()) return true;
  if (!wrong_token) {
    Api::error(st, r, body);
    return false;
  }
  PendingSegment pending;
  pending.route = r.route;
  pending.refusal = std::move(st);
  pending.deadline = clock_.now() + kFailedTokenDelay;
  if (blocking == Blocking::kAllowed) {
    complete(pending, r, body);
  } else {
    // Waiting is for the segment pool, never for an I/O thread.
    r.deferred_segment = true;
    r.segment = std::move(pending);
  }
  return false;
}

void SegmentApi::refuse_after_delay(const PendingSegment& p, ApiResponse& r, OutBuf& body) {
  clock_.wait_until(p.deadline, {});
  comparing_.store(false, std::memory_order_release);
  Api::error(p.refusal, r, body);
}

void SegmentApi::create(const ApiRequest& request, std::string_view query, ApiResponse& r,
                        OutBuf& body, QueryScratch& scratch, Blocking blocking) {
  QueryParams q;
  if (Status st = parse_query(query, kListPath, {}, q, scratch); !st.ok()) {
    Api::error(st, r, body);
    return;
  }
  if (!admit(request.authorization, kCreateAction, r, body, blocking)) return;
  Result<SegmentTagSpec> spec = parse_segment_tag_body(request.body);
  if (!spec.ok()) {
    Api::error(spec.status(), r, body);
    return;
  }
  if (Status st = check_segment_tag_spec(*spec); !st.ok()) {
    Api::error(st, r, body);
    return;
  }
  if (blocking == Blocking::kAllowed) {
    create_tag(*spec, r, body);
    return;
  }
  // Creating writes every store: never on an I/O thread.
  PendingSegment pending{Route::kSegmentList, spec->tag, 0, std::move(spec).value(), {}, {}, {}};
  defer(std::move(pending), r);
}

MonoTime SegmentApi::queue_deadline() const {
  return clock_.now() + std::max(milliseconds(segments_.options().max_wait), kMinQueueWait);
}

void SegmentApi::defer(PendingSegment pending, ApiResponse& r) const {
  pending.deadline = queue_deadline();
  r.deferred_segment = true;
  r.segment = std::move(pending);
}

void SegmentApi::complete(const PendingSegment& p, ApiResponse& r, OutBuf& body) {
  r.route = p.route;
  if (!p.refusal.ok()) {
    refuse_after_delay(p, r, body);
    return;
  }
  // Waited in the pool's queue past the deadline: only what memory holds now, else 503.
  const bool late = clock_.now() > p.deadline;
  const Blocking blocking = late ? Blocking::kNever : Blocking::kAllowed;
  const auto busy = [&] {
    Api::error(Status(StatusCode::kUnavailable,
                      "segment requests wait for a slow or unavailable store, and this one "
                      "waited its turn longer than segment_max_wait_ms allows"),
               r, body);
  };
  const auto answer = [&](const Status& st) {
    if (late && st.reason() == Reason::kWouldBlock) {
      busy();
    } else {
      Api::error(st, r, body);
    }
  };
  if (p.route == Route::kSegmentIds || p.route == Route::kSegmentRange ||
      p.route == Route::kSegmentLeafGet || p.route == Route::kOrderNumbers) {
    if (Status st = take(p.route, p.tag, p.count, blocking, r, body); !st.ok()) answer(st);
    return;
  }
  if (late) {
    busy();
  } else if (p.route == Route::kOrderDecode) {
    check_issued(p, r, body);
  } else if (p.route == Route::kSegmentTag) {
    tag_state(p.tag, r, body);
  } else if (!p.spec.tag.empty()) {
    create_tag(p.spec, r, body);
  } else {
    list(r, body);
  }
}

void SegmentApi::answer_if_issued(std::string_view tag, std::uint64_t id, std::string answer,
                                  ApiResponse& r, OutBuf& body, Blocking blocking) {
  PendingSegment pending;
  pending.route = Route::kOrderDecode;
  pending.tag = std::string(tag);
  pending.count = id;
  pending.answer = std::move(answer);
  if (blocking == Blocking::kAllowed) {
    check_issued(pending, r, body);
  } else {
    defer(std::move(pending), r);
  }
}

void SegmentApi::check_issued(const PendingSegment& p, ApiResponse& r, OutBuf& body) {
  r.route = Route::kOrderDecode;
  Result<std::uint64_t> max_id = segments_.stored_max_id(p.tag);
  const bool issued = max_id.ok() && p.count < *max_id;
  if (decode_counter_) decode_counter_(issued);
  if (!max_id.ok()) {
    Api::error(max_id.status(), r, body);
    return;
  }
  // max_id is where the tag's next range starts: every ID handed out is below it.
  if (!issued) {
    Api::error(InvalidArgument("the order number decodes to ID " + std::to_string(p.count) +
                               " of segment tag " + quote(p.tag) +
                               ", which no server has handed out (the tag's max_id is " +
                               std::to_string(*max_id) +
                               "): a forged or mistyped number, or another source's"),
               r, body, ",\"kind\":\"no_such_id\",\"position\":0");
    return;
  }
  r.content_type = kJson;
  body.append(p.answer);
}

void SegmentApi::list(ApiResponse& r, OutBuf& body) {
  Result<std::vector<SegmentTagInfo>> tags = segments_.list_tags();
  if (!tags.ok()) {
    Api::error(tags.status(), r, body);
    return;
  }
  r.content_type = kJson;
  body.append("{\"tags\":[");
  for (std::size_t i = 0; i < tags->size(); ++i) {
    if (i > 0) body.push(',');
    write_row((*tags)[i], body);
  }
  body.append("]}\n");
}

void SegmentApi::tag_state(const std::string& tag, ApiResponse& r, OutBuf& body) {
  Result<SegmentTagState> state = segments_.inspect(tag);
  // One store read for this tag (never the whole list), and none for a tag known to be unknown.
  Result<SegmentTagInfo> row = segments_.stored_tag(tag);
  std::optional<SegmentTagInfo> stored;
  if (row.ok()) {
    stored = std::move(row).value();
  } else if (!state.ok()) {
    // Neither the stores nor memory know the tag: the stores' error says why (404 when none has
    // it).
    Api::error(row.status(), r, body);
    return;
  }
  // A tag served here while the stores cannot be read is shown from memory, "stored": null.
  SegmentTagState s;
  if (state.ok()) {
    s = std::move(state).value();
  } else {
    s.tag = tag;
    s.step = stored->step;
    s.base_step = stored->step;
  }
  r.content_type = kJson;
  body.append("{\"tag\":");
  body.append_json_string(s.tag);
  body.append(",\"served\":");
  body.append(state.ok() ? "true" : "false");
  body.append(",\"step\":");
  body.append_uint(s.step);
  body.append(",\"base_step\":");
  body.append_uint(s.base_step);
  body.append(",\"remaining\":");
  body.append_uint(s.remaining);
  body.append(",\"fetching\":");
  body.append(s.fetching ? "true" : "false");
  body.append(",\"ids_issued\":");
  body.append_uint(s.ids_issued);
  body.append(",\"ids_skipped\":");
  body.append_uint(s.ids_skipped);
  body.append(",\"ranges_fetched\":");
  body.append_uint(s.ranges_fetched);
  body.append(",\"store_errors\":");
  body.append_uint(s.store_errors);
  body.append(",\"waits\":");
  body.append_uint(s.waits);
  body.append(",\"unavailable\":");
  body.append_uint(s.unavailable);
  body.append(",\"last_error\":");
  body.append_json_string(s.last_error);
  body.append(",\"current\":");
  write_buffer(s.current, body);
  body.append(",\"next\":");
  write_buffer(s.next, body);
  body.append(",\"stored\":");
  if (stored) {
    write_row(*stored, body);
  } else {
    body.append("null");
  }
  body.append("}\n");
}

void SegmentApi::create_tag(const SegmentTagSpec& spec, ApiResponse& r, OutBuf& body) {
  if (Status st = segments_.create_tag(spec); !st.ok()) {
    Api::error(st, r, body);
    return;
  }
  r.status = 201;
  r.content_type = kJson;
  if (Result<SegmentTagInfo> t = segments_.stored_tag(spec.tag); t.ok()) {
    write_row(*t, body);
    body.push('\n');
    return;
  }
  // Created, but the stores could not be read back just now: the row as it was written.
  SegmentTagInfo row;
  row.tag = spec.tag;
  row.max_id = spec.start;
  row.step = spec.step;
  row.description = spec.description;
  row.delta = segments_.store_names().size() > 1 ? segments_.store_names().size() : spec.delta;
  row.remainder = segments_.store_names().size() > 1 ? 0 : spec.remainder;
  row.update_time_unix_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  write_row(row, body);
  body.push('\n');
}

void SegmentApi::write_metrics(PrometheusWriter& out) const {
  const std::vector<SegmentTagState> tags = segments_.inspect_all();
  using Type = PrometheusWriter::Type;
  const auto each = [&](std::string_view name, Type type, std::string_view help, auto value) {
    out.family(name, type, help);
    for (const SegmentTagState& t : tags) out.sample(name, value(t), {{"tag", t.tag}});
  };
  each("flurry_segment_ids_issued_total", Type::kCounter, "Segment IDs handed out, by tag.",
       [](const SegmentTagState& t) { return t.ids_issued; });
  each("flurry_segment_ids_skipped_total", Type::kCounter,
       "Segment IDs never handed out: ends of ranges too short for a range request.",
       [](const SegmentTagState& t) { return t.ids_skipped; });
  each("flurry_segment_ranges_fetched_total", Type::kCounter, "Ranges fetched from the stores.",
       [](const SegmentTagState& t) { return t.ranges_fetched; });
  each("flurry_segment_store_errors_total", Type::kCounter, "Failed range fetches.",
       [](const SegmentTagState& t) { return t.store_errors; });
  each("flurry_segment_waits_total", Type::kCounter,
       "Requests that found both buffers of the tag empty and waited.",
       [](const SegmentTagState& t) { return t.waits; });
  each("flurry_segment_unavailable_total", Type::kCounter,
       "Requests answered UNAVAILABLE after waiting segment_max_wait_ms.",
       [](const SegmentTagState& t) { return t.unavailable; });
  each("flurry_segment_store_regressed_total", Type::kCounter,
       "Ranges refused because a store was below what it had handed this host (STORE_REGRESSED).",
       [](const SegmentTagState& t) { return t.store_regressed; });
  each("flurry_segment_remaining", Type::kGauge, "IDs left in both buffers of the tag.",
       [](const SegmentTagState& t) { return static_cast<double>(t.remaining); });
  each("flurry_segment_step", Type::kGauge, "The step the tag's next fetch asks for.",
       [](const SegmentTagState& t) { return static_cast<double>(t.step); });
  const SegmentService::LookupCounts lookups = segments_.lookup_counts();
  out.family("flurry_segment_tag_lookup_reads_total", Type::kCounter,
             "Store reads made to look segment tags up (first use, tag pages).");
  out.sample("flurry_segment_tag_lookup_reads_total", lookups.store_reads, {});
  out.family("flurry_segment_unknown_tag_hits_total", Type::kCounter,
             "Lookups of tags no store has, answered from memory (unknown_tag_ttl).");
  out.sample("flurry_segment_unknown_tag_hits_total", lookups.unknown_hits, {});
  out.family("flurry_segment_fetch_seconds", Type::kSummary,
             "Time the stores took to hand out a range.");
  for (const SegmentTagState& t : tags) {
    out.sample("flurry_segment_fetch_seconds_sum",
               std::chrono::duration<double>(t.fetch_time_total).count(), {{"tag", t.tag}});
    out.sample("flurry_segment_fetch_seconds_count", t.ranges_fetched, {{"tag", t.tag}});
  }
}

}  // namespace flurry::server

#include "order_api.h"

#include <array>
#include <memory>
#include <string>

#include "flurry/decoded_id.h"
#include "flurry/segment_store.h"
#include "segment_api.h"

namespace flurry::server {
namespace {

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kIssuePath = "/v1/order-numbers";
constexpr std::string_view kDecodePrefix = "/v1/order-numbers/";

constexpr AdminAction kDecodeAction = {"decoding order numbers over HTTP",
                                       "decoding an order number",
                                       "decode it with `flurry order decode --key-file FILE`"};

Status not_configured() {
  return Status(StatusCode::kUnimplemented,
                "order numbers are off on this server: no keys are configured. Set "
                "order_key_file (FLURRY_ORDER_KEY_FILE, --order-key-file) to a key file, or the "
                "environment variable FLURRY_ORDER_KEYS, and restart (see docs/order-numbers.md)");
}

// The tag parameter, checked as a segment tag name.
Result<std::string_view> tag_param(std::string_view value) {
  if (Status st = check_segment_tag(value); !st.ok()) {
    return InvalidArgument("parameter \"tag\" is not a valid tag name: " + st.message());
  }
  return value;
}

}  // namespace

OrderApi::OrderApi(Api& api, Service& service, SegmentApi* segments, OrderFormats* formats)
    : api_(api), service_(service), segments_(segments), formats_(formats) {}

bool OrderApi::handle(const ApiRequest& request, std::string_view path, std::string_view query,
                      ApiResponse& r, OutBuf& body, ApiScratch& scratch, Blocking blocking) {
  const bool issue_route = path == kIssuePath;
  const bool decode_route = path.starts_with(kDecodePrefix) &&
                            path.find('/', kDecodePrefix.size()) == std::string_view::npos;
  if (!issue_route && !decode_route) return false;
  r.route = issue_route ? Route::kOrderNumbers : Route::kOrderDecode;
  if (request.method != Method::kGet && request.method != Method::kHead) {
    Api::error(Status(Reason::kMethodNotAllowed, "only GET and HEAD are allowed here"), r, body);
  } else if (formats_ == nullptr) {
    Api::error(not_configured(), r, body);
  } else if (issue_route) {
    issue(request.method, query, r, body, scratch, blocking);
  } else {
    decode(request, path.substr(kDecodePrefix.size()), query, r, body, scratch, blocking);
  }
  return true;
}

void OrderApi::issue(Method method, std::string_view query, ApiResponse& r, OutBuf& body,
                     ApiScratch& scratch, Blocking blocking) {
  static constexpr std::array<std::string_view, 2> kParams = {"count", "tag"};
  QueryParams q;
  if (Status st = parse_query(query, kIssuePath, kParams, q, scratch.query); !st.ok()) {
    Api::error(st, r, body);
    return;
  }
  std::uint64_t count = 1;
  if (q.present[0]) {
    Result<std::uint64_t> n = count_param(q.value[0], service_.max_batch());
    if (!n.ok()) {
      Api::error(n.status(), r, body);
      return;
    }
    count = *n;
  }
  const bool tagged = q.present[1];
  if (tagged) {
    Result<std::string_view> tag = tag_param(q.value[1]);
    if (!tag.ok()) {
      Api::error(tag.status(), r, body);
      return;
    }
    if (segments_ == nullptr) {
      Api::error(Status(StatusCode::kNotFound, "segment mode is not served here"), r, body);
      return;
    }
    if (formats_->settings().dated()) {
      // Checked before anything is taken, for HEAD too.
      Api::error(formats_->segment(*tag).status(), r, body);
      return;
    }
  }
  if (method == Method::kHead) {
    r.content_type = kJson;
    r.omit_content_length = true;
    return;
  }
  if (tagged) {
    segments_->take_or_defer(Route::kOrderNumbers, q.value[1], count, r, body, blocking);
    return;
  }
  const PendingIssue pending{Route::kOrderNumbers, count, IdFormat::kJson, Encoding::kDecimal};
  if (scratch.ids.size() < count) scratch.ids.resize(count);
  const std::span<std::uint64_t> ids(scratch.ids.data(), count);
  if (api_.issue_or_defer(pending, ids, blocking, scratch, r, body)) write_snowflake(ids, r, body);
}

Status OrderApi::write_numbers(const OrderNumberFormat& format, std::span<const std::uint64_t> ids,
                               ApiResponse& r, OutBuf& body) {
  const std::size_t start = body.size();
  const std::size_t length = format.length();
  r.content_type = kJson;
  body.append("{\"order_numbers\":[");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    char* out = body.tail(length + 3);
    std::size_t used = 0;
    if (i > 0) out[used++] = ',';
    out[used++] = '"';
    Result<std::size_t> n = format.encode_to(ids[i], std::span<char>(out + used, length));
    if (!n.ok()) {
      body.resize(start);
      return n.status();
    }
    used += *n;
    out[used++] = '"';
    body.commit(used);
  }
  body.append("]}\n");
  return OkStatus();
}

void OrderApi::write_snowflake(std::span<const std::uint64_t> ids, ApiResponse& r, OutBuf& body) {
  if (formats_ == nullptr) {
    Api::error(not_configured(), r, body);
    return;
  }
  if (Status st = write_numbers(formats_->snowflake(), ids, r, body); !st.ok()) {
    Api::error(st, r, body);
    return;
  }
  issued_snowflake_.fetch_add(ids.size(), std::memory_order_relaxed);
}

Status OrderApi::write_segment(std::string_view tag, std::span<const std::uint64_t> ids,
                               ApiResponse& r, OutBuf& body) {
  if (formats_ == nullptr) return not_configured();
  Result<std::shared_ptr<const OrderNumberFormat>> format = formats_->segment(tag);
  if (!format.ok()) return format.status();
  if (Status st = write_numbers(**format, ids, r, body); !st.ok()) return st;
  issued_segment_.fetch_add(ids.size(), std::memory_order_relaxed);
  return OkStatus();
}

void OrderApi::decode(const ApiRequest& request, std::string_view raw_code, std::string_view query,
                      ApiResponse& r, OutBuf& body, ApiScratch& scratch, Blocking blocking) {
  static constexpr std::array<std::string_view, 1> kParams = {"tag"};
  QueryParams q;
  if (Status st = parse_query(query, "/v1/order-numbers/{code}", kParams, q, scratch.query);
      !st.ok()) {
    Api::error(st, r, body);
    return;
  }
  if (segments_ == nullptr) {
    Api::error(Status(StatusCode::kPermissionDenied,
                      "decoding order numbers over HTTP is disabled on this server: no admin "
                      "token is configured"),
               r, body);
    return;
  }
  if (!segments_->admit(request.authorization, kDecodeAction, r, body, blocking)) return;
  Result<std::string_view> code = path_segment(raw_code, scratch.query);
  if (!code.ok()) {
    Api::error(code.status(), r, body);
    return;
  }
  if (code->empty()) {
    Api::error(InvalidArgument("the order number in the path is empty (GET "
                               "/v1/order-numbers/{code})"),
               r, body);
    return;
  }
  std::shared_ptr<const OrderNumberFormat> tag_format;
  if (q.present[0]) {
    Result<std::string_view> tag = tag_param(q.value[0]);
    Result<std::shared_ptr<const OrderNumberFormat>> f =
        tag.ok() ? formats_->segment(*tag)
                 : Result<std::shared_ptr<const OrderNumberFormat>>(tag.status());
    if (!f.ok()) {
      Api::error(f.status(), r, body);
      return;
    }
    tag_format = std::move(f).value();
  }
  const OrderNumberFormat& format = tag_format ? *tag_format : formats_->snowflake();
  OrderDecodeError why;
  Result<std::uint64_t> id = format.decode(*code, &why);
  if (!id.ok()) {
    decodes_error_.fetch_add(1, std::memory_order_relaxed);
    std::string extra = ",\"kind\":\"" + std::string(to_string(why.kind)) +
                        "\",\"position\":" + std::to_string(why.position);
    // Without ?tag= a number is a snowflake number, never a guess between sources.
    const bool hint = !tag_format && segments_ != nullptr;
    Api::error(hint ? InvalidArgument(id.status().message() +
                                      " (this server also serves segment tags: a tag's order "
                                      "number decodes only with ?tag=TAG)")
                    : id.status(),
               r, body, extra);
    return;
  }
  Result<DecodedId> decoded =
      tag_format ? Result<DecodedId>(DecodedId{}) : decode_id(formats_->layout(), *id);
  if (!decoded.ok()) {
    Api::error(decoded.status(), r, body);
    return;
  }
  r.content_type = kJson;
  const std::size_t start = body.size();
  body.append("{\"order_number\":");
  body.append_json_string(*code);
  body.append(",\"key_version\":\"");
  if (tag_format) {
    body.push(formats_->key_version(*code, q.value[0]));
    body.append("\",\"source\":\"segment\",\"tag\":");
    body.append_json_string(q.value[0]);
    body.append(",\"id\":\"");
    body.append_uint(*id);
    body.append("\"}\n");
    // Answered only for an ID the tag has handed out: the stores say how far that is.
    std::string answer(body.view().substr(start));
    body.resize(start);
    segments_->answer_if_issued(q.value[0], *id, std::move(answer), r, body, blocking);
    return;
  }
  decodes_ok_.fetch_add(1, std::memory_order_relaxed);
  body.push(formats_->key_version(*code));
  body.append("\",\"source\":\"snowflake\",");
  write_decoded_id(formats_->layout(), *decoded, body);
  body.append("}\n");
}

void OrderApi::write_metrics(PrometheusWriter& out) const {
  using Type = PrometheusWriter::Type;
  out.family("flurry_order_numbers_issued_total", Type::kCounter,
             "Order numbers handed out, by source.");
  out.sample("flurry_order_numbers_issued_total", issued_snowflake_.load(std::memory_order_relaxed),
             {{"source", "snowflake"}});
  out.sample("flurry_order_numbers_issued_total", issued_segment_.load(std::memory_order_relaxed),
             {{"source", "segment"}});
  out.family("flurry_order_decodes_total", Type::kCounter,
             "Order numbers decoded over HTTP, by result.");
  out.sample("flurry_order_decodes_total", decodes_ok_.load(std::memory_order_relaxed),
             {{"result", "ok"}});
  out.sample("flurry_order_decodes_total", decodes_error_.load(std::memory_order_relaxed),
             {{"result", "error"}});
  if (formats_ == nullptr) return;
  out.family("flurry_order_key_info", Type::kGauge,
             "The order-number key versions (never key bytes); always 1.");
  const std::string active(1, formats_->active());
  out.sample("flurry_order_key_info", 1.0,
             {{"active", active}, {"versions", formats_->versions()}});
}

}  // namespace flurry::server

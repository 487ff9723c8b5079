// The snowflake routes (docs/operations.md "Routes") over the operations layer.
#include <array>
#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "flurry/codec.h"
#include "flurry/wide_id.h"
#include "json_views.h"
#include "routes.h"

namespace flurry::http {
namespace {

// The parameters of /v1/ids, parsed once.
struct IdsRequest {
  ops::IdCount count = ops::IdCount::one();
  IdListFormat format = IdListFormat::kJson;
  const IdTextCodec* encoding = nullptr;  // one of ops::Operations::id_codecs(): lives as long
};

// The codec of parameter `encoding` (decimal when absent). Unknown names, and uuidv7 or ulid on a
// layout that cannot carry them, are INVALID_ARGUMENT with the reason.
Result<const IdTextCodec*> encoding_param(const ops::Operations& ops, const QueryParams& q,
                                          std::size_t i) {
  const IdTextCodecs& codecs = ops.id_codecs();
  if (!q.present[i]) return codecs.get(Encoding::kDecimal);
  Result<IdEncoding> encoding = parse_id_encoding(q.value[i]);
  if (!encoding.ok()) {
    return InvalidArgument("parameter \"encoding\": " + quote(q.value[i]) + " is not " +
                           id_encoding_names());
  }
  Result<const IdTextCodec*> codec = codecs.get(*encoding);
  if (!codec.ok()) return InvalidArgument("parameter \"encoding\": " + codec.status().message());
  return codec;
}

Result<IdListFormat> format_param(std::string_view v) {
  if (v == "json") return IdListFormat::kJson;
  if (v == "number") return IdListFormat::kNumber;
  if (v == "text") return IdListFormat::kText;
  return InvalidArgument("parameter \"format\": " + quote(v) + " is not json, number or text");
}

Result<IdsRequest> parse_ids(const ops::Operations& ops, std::string_view query,
                             QueryScratch& scratch) {
  const std::uint64_t max_batch = ops.max_batch();
  static constexpr std::array<std::string_view, 3> kParams = {"count", "format", "encoding"};
  QueryParams q;
  if (Status st = parse_query(query, "/v1/ids", kParams, q, scratch); !st.ok()) return st;
  IdsRequest request;
  if (q.present[0]) {
    Result<ops::IdCount> count = ops::IdCount::parse(q.value[0], max_batch, {"parameter", "count"});
    if (!count.ok()) return count.status();
    request.count = *count;
  }
  if (q.present[1]) {
    Result<IdListFormat> format = format_param(q.value[1]);
    if (!format.ok()) return format.status();
    request.format = *format;
  }
  Result<const IdTextCodec*> encoding = encoding_param(ops, q, 2);
  if (!encoding.ok()) return encoding.status();
  request.encoding = *encoding;
  if (request.format == IdListFormat::kNumber &&
      request.encoding->encoding() != IdEncoding(Encoding::kDecimal)) {
    return InvalidArgument(
        "format=number writes JSON numbers, which are decimal; it cannot be combined with "
        "encoding=" +
        std::string(request.encoding->encoding().name()));
  }
  return request;
}

void ids(ops::Operations& ops, RouteCall& call) {
  Result<IdsRequest> request = parse_ids(ops, call.query, call.scratch.query);
  if (!request.ok()) {
    call.fail(request.status());
    return;
  }
  if (call.head()) {
    // GET's status and headers, without issuing (and burning) the IDs of a body never sent.
    call.head_only(request->format == IdListFormat::kText ? kTextType : kJsonType);
    return;
  }
  call.run([&ops, request = *request](RouteCall& c) {
    const std::uint64_t count = request.count.value();
    std::vector<std::uint64_t>& buffer = c.scratch.ids;
    if (buffer.size() < count) buffer.resize(count);
    const std::span<std::uint64_t> out(buffer.data(), count);
    if (Status st = ops.next_ids(request.count, out, c.blocking, c.deferral); !st.ok()) {
      c.fail(st);
      return;
    }
    c.response.content_type = write_id_list(request.format, *request.encoding, out, c.body);
  });
}

void decode(ops::Operations& ops, RouteCall& call) {
  static constexpr std::array<std::string_view, 1> kParams = {"encoding"};
  QueryParams q;
  if (Status st = parse_query(call.query, "/v1/ids/{id}", kParams, q, call.scratch.query);
      !st.ok()) {
    call.fail(st);
    return;
  }
  // encoding=auto: whichever encoding the text is an ID in (Operations::decode_id_any).
  const bool any = q.present[0] && q.value[0] == "auto";
  Result<const IdTextCodec*> encoding =
      any ? ops.id_codecs().get(Encoding::kDecimal) : encoding_param(ops, q, 0);
  if (!encoding.ok()) {
    call.fail(encoding.status());
    return;
  }
  Result<std::string_view> text = path_segment(call.params[0], call.scratch.query);
  if (!text.ok()) {
    call.fail(text.status());
    return;
  }
  if (text->empty()) {
    call.fail(InvalidArgument("the ID in the path is empty (GET /v1/ids/{id})"));
    return;
  }
  if (any) {
    Result<ops::AnyEncodingId> found = ops.decode_id_any(*text);
    if (!found.ok()) {
      call.fail(found.status());
      return;
    }
    JsonWriter w(call.body);
    w.begin_object();
    write_decoded_id(ops.layout(), found->decoded, w);
    w.field("encoding", found->encoding.name());
    w.key("also_valid_in").begin_array();
    for (const auto& also : found->also_valid_in) w.value(also.name());
    w.end_array().end_object();
    call.body.push('\n');
    return;
  }
  Result<DecodedId> d = ops.decode_id(*text, **encoding);
  if (!d.ok()) {
    call.fail(d.status());
    return;
  }
  JsonWriter w(call.body);
  w.begin_object();
  write_decoded_id(ops.layout(), *d, w);
  w.end_object();
  call.body.push('\n');
}

void leaf_get(ops::Operations& ops, RouteCall& call) {
  QueryParams q;
  if (Status st = parse_query(call.query, "/api/snowflake/get/{key}", {}, q, call.scratch.query);
      !st.ok()) {
    call.fail(st);
    return;
  }
  Result<std::string_view> key = path_segment(call.params[0], call.scratch.query);
  if (!key.ok()) {
    call.fail(key.status());
    return;
  }
  if (key->empty()) {
    call.fail(InvalidArgument("the key in the path is empty (GET /api/snowflake/get/{key})"));
    return;
  }
  if (call.head()) {
    call.head_only(kTextType);
    return;
  }
  call.run([&ops](RouteCall& c) {
    std::uint64_t id = 0;
    if (Status st = ops.next_ids(ops::IdCount::one(), std::span(&id, 1), c.blocking, c.deferral);
        !st.ok()) {
      c.fail(st);
      return;
    }
    c.response.content_type = kTextType;
    c.body.append_uint(id);
  });
}

void leaf_decode(ops::Operations& ops, RouteCall& call) {
  static constexpr std::array<std::string_view, 1> kParams = {"snowflakeId"};
  QueryParams q;
  if (Status st = parse_query(call.query, "/decodeSnowflakeId", kParams, q, call.scratch.query);
      !st.ok()) {
    call.fail(st);
    return;
  }
  if (!q.present[0]) {
    call.fail(InvalidArgument("parameter \"snowflakeId\" is missing"));
    return;
  }
  if (q.value[0].empty()) {
    call.fail(InvalidArgument("parameter \"snowflakeId\" is empty"));
    return;
  }
  Result<DecodedId> d = ops.decode_id(q.value[0], Encoding::kDecimal);
  if (!d.ok()) {
    call.fail(d.status());
    return;
  }
  OutBuf& body = call.body;
  body.append("{\"timestamp\":\"");
  body.append_int(d->unix_ms);
  body.append("\",\"workerId\":\"");
  body.append_uint(d->parts.node);
  body.append("\",\"sequenceId\":\"");
  body.append_uint(d->parts.seq);
  body.append("\"}\n");
}

void readyz(ops::Operations& ops, RouteCall& call) {
  OutBuf& body = call.body;
  const Status ready = ops.readiness();
  if (ready.ok()) {
    body.append("{\"ready\":true,\"node\":");
    body.append_uint(ops.node());
    body.append("}\n");
    return;
  }
  call.response.status = 503;
  body.append("{\"ready\":false,\"node\":");
  body.append_uint(ops.node());
  body.append(",\"reason\":");
  body.append_json_string(ready.reason() != Reason::kNone ? to_string(ready.reason())
                                                          : to_string(ready.code()));
  body.append(",\"message\":");
  body.append_json_string(ready.message());
  body.append("}\n");
}

}  // namespace

void add_id_routes(RouteTable& table, ops::Operations& ops) {
  auto layout = std::make_shared<const LayoutJson>(ops.layout());
  const RouteTable* const self = &table;
  table.add(Route::kIds, Methods::kGetHead, "/v1/ids", {ops::Scope::kIds},
            [&ops](RouteCall& c) { ids(ops, c); });
  table.add(Route::kIdDecode, Methods::kGetHead, "/v1/ids/{id}", {ops::Scope::kRead},
            [&ops](RouteCall& c) { decode(ops, c); });
  table.add(Route::kLayout, Methods::kGetHead, "/v1/layout", {ops::Scope::kRead},
            [&ops, layout](RouteCall& c) {
              if (c.no_query()) layout->write(ops.node(), ops.max_batch(), c.body);
            });
  table.add(Route::kLeafGet, Methods::kGetHead, "/api/snowflake/get/{key}", {ops::Scope::kIds},
            [&ops](RouteCall& c) { leaf_get(ops, c); });
  table.add(Route::kLeafDecode, Methods::kGetHead, "/decodeSnowflakeId", {ops::Scope::kRead},
            [&ops](RouteCall& c) { leaf_decode(ops, c); });
  table.add(Route::kHealthz, Methods::kGetHead, "/healthz", {ops::Scope::kNone},
            [&ops](RouteCall& c) {
              if (!c.no_query()) return;
              c.body.append("{\"status\":\"ok\"");
              write_tso_health(ops, c.body);
              c.body.append("}\n");
            });
  table.add(Route::kReadyz, Methods::kGetHead, "/readyz", {ops::Scope::kNone},
            [&ops](RouteCall& c) {
              if (c.no_query()) readyz(ops, c);
            });
  table.add(Route::kMetrics, Methods::kGetHead, "/metrics", {ops::Scope::kNone},
            [&ops, self](RouteCall& c) {
              if (!c.no_query()) return;
              c.response.content_type = kPrometheusType;
              std::string text;
              text.reserve(8192);
              service::PrometheusWriter writer(text);
              ops.write_metrics(writer);
              if (self->extra_metrics) self->extra_metrics(writer);
              c.body.append(text);
            });
}

}  // namespace flurry::http

// The order-number routes (docs/order-numbers.md, docs/operations.md "Order numbers") over the
// operations layer:
//
//   GET /v1/order-numbers?count=N[&tag=T]     {"order_numbers":["...",...]}
//   GET /v1/order-numbers/{code}[?tag=T]      the decoded ID (a token with scope orders:decode)
//
// Without keys both routes answer 501 saying how to configure keys. Key bytes are never written
// anywhere.
#include <array>
#include <cstring>
#include <optional>
#include <span>
#include <string>

#include "routes.h"

namespace flurry::http {
namespace {

constexpr std::string_view kIssuePath = "/v1/order-numbers";

// The tag parameter, checked as a segment tag name; empty when absent.
Result<std::optional<ops::SegmentTag>> tag_param(const QueryParams& q, std::size_t i) {
  if (!q.present[i]) return std::optional<ops::SegmentTag>();
  Result<ops::SegmentTag> tag = ops::SegmentTag::of(q.value[i], "parameter \"tag\"");
  if (!tag.ok()) return tag.status();
  return std::optional<ops::SegmentTag>(std::move(tag).value());
}

void issue(ops::Operations& ops, RouteCall& call) {
  if (Status st = ops.check_order_numbers(std::nullopt); !st.ok()) {
    call.fail(st);  // no keys: 501 before anything else
    return;
  }
  static constexpr std::array<std::string_view, 2> kParams = {"count", "tag"};
  QueryParams q;
  if (Status st = parse_query(call.query, kIssuePath, kParams, q, call.scratch.query); !st.ok()) {
    call.fail(st);
    return;
  }
  ops::IdCount count = ops::IdCount::one();
  if (q.present[0]) {
    Result<ops::IdCount> n =
        ops::IdCount::parse(q.value[0], ops.max_batch(), {"parameter", "count"});
    if (!n.ok()) {
      call.fail(n.status());
      return;
    }
    count = *n;
  }
  Result<std::optional<ops::SegmentTag>> tag = tag_param(q, 1);
  if (!tag.ok()) {
    call.fail(tag.status());
    return;
  }
  // Checked before anything is taken, for HEAD too.
  if (Status st = ops.check_order_numbers(*tag); !st.ok()) {
    call.fail(st);
    return;
  }
  if (call.head()) {
    call.head_only(kJsonType);
    return;
  }
  call.run([&ops, count, tag = std::move(tag).value()](RouteCall& c) {
    std::vector<std::uint64_t>& ids = c.scratch.ids;
    if (ids.size() < count.value()) ids.resize(count.value());
    ops::OrderNumbers& numbers = c.scratch.numbers;
    if (Status st = ops.new_order_numbers(count, tag, ids, numbers, c.blocking, c.deferral);
        !st.ok()) {
      c.fail(st);
      return;
    }
    OutBuf& body = c.body;
    c.response.content_type = kJsonType;
    body.append("{\"order_numbers\":[");
    for (std::size_t i = 0; i < numbers.size(); ++i) {
      const std::string_view number = numbers[i];
      char* out = body.tail(number.size() + 3);
      std::size_t used = 0;
      if (i > 0) out[used++] = ',';
      out[used++] = '"';
      std::memcpy(out + used, number.data(), number.size());
      used += number.size();
      out[used++] = '"';
      body.commit(used);
    }
    body.append("]}\n");
  });
}

void decode_order(ops::Operations& ops, RouteCall& call) {
  if (Status st = ops.check_order_numbers(std::nullopt); !st.ok()) {
    call.fail(st);
    return;
  }
  static constexpr std::array<std::string_view, 1> kParams = {"tag"};
  QueryParams q;
  if (Status st =
          parse_query(call.query, "/v1/order-numbers/{code}", kParams, q, call.scratch.query);
      !st.ok()) {
    call.fail(st);
    return;
  }
  Result<std::string_view> code = path_segment(call.params[0], call.scratch.query);
  if (!code.ok()) {
    call.fail(code.status());
    return;
  }
  if (code->empty()) {
    call.fail(
        InvalidArgument("the order number in the path is empty (GET "
                        "/v1/order-numbers/{code})"));
    return;
  }
  Result<std::optional<ops::SegmentTag>> tag = tag_param(q, 0);
  if (!tag.ok()) {
    call.fail(tag.status());
    return;
  }
  // The code is copied: the closure outlives the request's text when it is deferred.
  call.run([&ops, code = std::string(*code), tag = std::move(tag).value()](RouteCall& c) {
    ops::OrderNumberFault fault;
    Result<ops::DecodedOrderNumber> decoded =
        ops.decode_order_number(code, tag, fault, c.blocking, c.deferral);
    if (!decoded.ok()) {
      if (fault.kind == OrderDecodeError::Kind::kNone) {
        c.fail(decoded.status());
        return;
      }
      const std::string extra = ",\"kind\":\"" + std::string(to_string(fault.kind)) +
                                "\",\"position\":" + std::to_string(fault.position);
      c.fail(decoded.status(), extra);
      return;
    }
    c.response.content_type = kJsonType;
    JsonWriter w(c.body);
    w.begin_object();
    w.field("order_number", code);
    w.field("key_version", std::string_view(&decoded->key_version, 1));
    if (decoded->segment) {
      w.field("source", "segment");
      w.field("tag", decoded->tag);
      w.key("id").id_string(decoded->id);
    } else {
      w.field("source", "snowflake");
      write_decoded_id(ops.layout(), decoded->decoded, w);
    }
    w.end_object();
    c.body.push('\n');
  });
}

}  // namespace

void add_order_routes(RouteTable& table, ops::Operations& ops) {
  table.add(Route::kOrderNumbers, Methods::kGetHead, "/v1/order-numbers", {ops::Scope::kIds},
            [&ops](RouteCall& c) { issue(ops, c); });
  table.add(Route::kOrderDecode, Methods::kGetHead, "/v1/order-numbers/{code}",
            {ops::Scope::kOrdersDecode}, [&ops](RouteCall& c) { decode_order(ops, c); });
}

}  // namespace flurry::http

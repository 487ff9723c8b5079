// Segment mode's HTTP routes (docs/segments.md, docs/operations.md "Segment mode") over the
// operations layer:
//
//   GET  /v1/segments/{tag}/ids?count=N    {"ids":["1","2"]}
//   GET  /v1/segments/{tag}/range?size=N   {"start":"1001","end":"2001","delta":1}
//   GET  /api/segment/get/{tag}            the ID as decimal text (Meituan Leaf's route)
//   GET  /v1/segments                      {"tags":[row, ...]}, from the stores
//   POST /v1/segments                      creates a tag (a token with scope admin)
//   GET  /v1/segments/{tag}                the node's buffers and counters, and the stored row
//   GET  /segments                         302 to /console#tags (where the monitoring page moved)
//
// With Blocking::kNever IDs come from a tag's buffers or not at all: the operations layer
// defers to the store pool a request that would wait and every one that reads or writes a store.
#include <array>
#include <span>
#include <string>
#include <vector>

#include "flurry/codec.h"
#include "flurry/wide_id.h"
#include "json_views.h"
#include "routes.h"
#include "segment_body.h"

namespace flurry::http {
namespace {

constexpr std::string_view kListPath = "/v1/segments";

// The one optional numeric parameter `name` of the ids and range routes; 1 when absent.
Result<ops::IdCount> one_param(RouteCall& call, std::string_view route, std::string_view name,
                               std::uint64_t max) {
  const std::array<std::string_view, 1> allowed = {name};
  QueryParams q;
  if (Status st = parse_query(call.query, route, allowed, q, call.scratch.query); !st.ok()) {
    return st;
  }
  if (!q.present[0]) return ops::IdCount::one();
  return ops::IdCount::parse(q.value[0], max, {"parameter", name});
}

void append_id(OutBuf& body, std::uint64_t id) {
  body.push('"');
  body.append_uint(id);
  body.push('"');
}

// /v1/segments/{tag}/ids and the Leaf get: `count` IDs of the tag in the path.
void take_ids(ops::Operations& ops, RouteCall& call, Result<ops::IdCount> count, bool leaf) {
  if (!count.ok()) {
    call.fail(count.status());
    return;
  }
  Result<ops::SegmentTag> tag = tag_in_path(call.params[0], call.scratch.query);
  if (!tag.ok()) {
    call.fail(tag.status());
    return;
  }
  if (call.head()) {
    call.head_only(leaf ? kTextType : kJsonType);
    return;
  }
  call.run([&ops, tag = std::move(tag).value(), n = *count, leaf](RouteCall& c) {
    std::vector<std::uint64_t>& buffer = c.scratch.ids;
    if (buffer.size() < n.value()) buffer.resize(n.value());
    const std::span<std::uint64_t> out(buffer.data(), n.value());
    if (Status st = ops.segment_ids(tag, n, out, c.blocking, c.deferral); !st.ok()) {
      fail_leader_only(c, ops, st);  // a strict tag on a follower: 307 to the oracle's leader
      return;
    }
    OutBuf& body = c.body;
    if (leaf) {
      c.response.content_type = kTextType;
      body.append_uint(out[0]);
      return;
    }
    // The writer of /v1/ids: a segment's IDs are consecutive, the case it is fastest at.
    static const IdTextCodec kDecimal = IdTextCodec::of(Encoding::kDecimal);
    c.response.content_type = write_id_list(IdListFormat::kJson, kDecimal, out, body);
  });
}

void take_range(ops::Operations& ops, RouteCall& call) {
  Result<ops::IdCount> size =
      one_param(call, "/v1/segments/{tag}/range", "size", ops.segment_max_batch());
  if (!size.ok()) {
    call.fail(size.status());
    return;
  }
  Result<ops::SegmentTag> tag = tag_in_path(call.params[0], call.scratch.query);
  if (!tag.ok()) {
    call.fail(tag.status());
    return;
  }
  if (call.head()) {
    call.head_only(kJsonType);
    return;
  }
  call.run([&ops, tag = std::move(tag).value(), n = *size](RouteCall& c) {
    Result<SegmentRange> range = ops.segment_range(tag, n, c.blocking, c.deferral);
    if (!range.ok()) {
      fail_leader_only(c, ops, range.status());  // as take_ids
      return;
    }
    OutBuf& body = c.body;
    c.response.content_type = kJsonType;
    body.append("{\"start\":");
    append_id(body, range->start);
    body.append(",\"end\":");
    append_id(body, range->end);
    body.append(",\"delta\":");
    body.append_uint(range->delta);
    body.append("}\n");
  });
}

void list(ops::Operations& ops, RouteCall& call) {
  if (!call.no_query(kListPath)) return;
  call.run([&ops](RouteCall& c) {
    Result<std::vector<SegmentTagInfo>> tags = ops.segment_tags(c.blocking, c.deferral);
    if (!tags.ok()) {
      c.fail(tags.status());
      return;
    }
    c.response.content_type = kJsonType;
    JsonWriter w(c.body);
    w.begin_object().key("tags").begin_array();
    for (const SegmentTagInfo& row : *tags) write_segment_row(row, w);
    w.end_array().end_object();
    c.body.push('\n');
  });
}

void create(ops::Operations& ops, RouteCall& call) {
  if (!call.no_query(kListPath)) return;
  Result<SegmentTagSpec> spec = parse_segment_tag_body(call.request.body);
  if (!spec.ok()) {
    call.fail(spec.status());
    return;
  }
  call.run([&ops, spec = std::move(spec).value()](RouteCall& c) {
    Result<SegmentTagInfo> row = ops.create_segment_tag(spec, c.blocking, c.deferral);
    if (!row.ok()) {
      c.fail(row.status());
      return;
    }
    c.response.status = 201;
    c.response.content_type = kJsonType;
    JsonWriter w(c.body);
    write_segment_row(*row, w);
    c.body.push('\n');
  });
}

void tag_state(ops::Operations& ops, RouteCall& call) {
  if (!call.no_query("/v1/segments/{tag}")) return;
  Result<ops::SegmentTag> tag = tag_in_path(call.params[0], call.scratch.query);
  if (!tag.ok()) {
    call.fail(tag.status());
    return;
  }
  call.run([&ops, tag = std::move(tag).value()](RouteCall& c) {
    Result<ops::SegmentTagReport> report = ops.segment_tag(tag, c.blocking, c.deferral);
    if (!report.ok()) {
      c.fail(report.status());
      return;
    }
    c.response.content_type = kJsonType;
    write_segment_report(*report, c.body);
  });
}

}  // namespace

void add_segment_routes(RouteTable& table, ops::Operations& ops) {
  table.add(Route::kSegmentList, Methods::kGetHeadPost, "/v1/segments",
            {ops::Scope::kRead, ops::Scope::kAdmin}, [&ops](RouteCall& c) {
              if (c.request.method == Method::kPost) {
                create(ops, c);
              } else {
                list(ops, c);
              }
            });
  table.add(Route::kSegmentTag, Methods::kGetHead, "/v1/segments/{tag}", {ops::Scope::kRead},
            [&ops](RouteCall& c) { tag_state(ops, c); });
  table.add(Route::kSegmentIds, Methods::kGetHead, "/v1/segments/{tag}/ids", {ops::Scope::kIds},
            [&ops](RouteCall& c) {
              take_ids(ops, c,
                       one_param(c, "/v1/segments/{tag}/ids", "count", ops.segment_max_batch()),
                       false);
            });
  table.add(Route::kSegmentRange, Methods::kGetHead, "/v1/segments/{tag}/range", {ops::Scope::kIds},
            [&ops](RouteCall& c) { take_range(ops, c); });
  table.add(
      Route::kOther, Methods::kAny, "/v1/segments/{tag}/{...}", {ops::Scope::kNone},
      [](RouteCall& c) {
        c.fail(Status(StatusCode::kNotFound,
                      "no such route: " + quote(c.path) +
                          " (a tag's routes are /v1/segments/{tag}, /v1/segments/{tag}/ids and "
                          "/v1/segments/{tag}/range)"));
      });
  table.add(Route::kSegmentLeafGet, Methods::kGetHead, "/api/segment/get/{tag}", {ops::Scope::kIds},
            [&ops](RouteCall& c) {
              Result<ops::IdCount> one = ops::IdCount::one();
              if (c.no_query("/api/segment/get/{tag}")) take_ids(ops, c, std::move(one), true);
            });
  // The monitoring page became the console's Tags section: old bookmarks land there. No token:
  // the redirect carries nothing.
  static constexpr std::array<HttpHeader, 1> kToConsole = {{{"Location", "/console#tags"}}};
  table.add(Route::kSegmentsPage, Methods::kGetHead, "/segments", {ops::Scope::kNone},
            [](RouteCall& c) {
              if (!c.no_query("/segments")) return;
              c.response.status = 302;
              c.response.content_type = kTextType;
              c.response.headers = kToConsole;
              c.body.append("moved to /console#tags\n");
            });
}

}  // namespace flurry::http

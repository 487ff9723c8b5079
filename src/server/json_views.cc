#include "json_views.h"

#include <chrono>

#include "api.h"
#include "flurry/timefmt.h"

namespace flurry::server {
namespace {

using std::chrono::milliseconds;

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
  return std::chrono::floor<milliseconds>(t).time_since_epoch().count();
}

void append_id(OutBuf& body, std::uint64_t id) {
  body.push('"');
  body.append_uint(id);
  body.push('"');
}

void append_time_ms(OutBuf& body, std::int64_t unix_ms) {
  body.append_json_string(format_unix_ms(unix_ms));
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

}  // namespace

LayoutJson::LayoutJson(const Layout& layout) {
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
  before_node_.assign(b.view());
}

void LayoutJson::write(std::uint64_t node, std::uint64_t max_batch, OutBuf& body) const {
  body.append(before_node_);
  body.append_uint(node);
  body.append(",\"max_batch\":");
  body.append_uint(max_batch);
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

void write_segment_row(const SegmentTagInfo& t, OutBuf& body) {
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

void write_segment_report(const ops::SegmentTagReport& report, OutBuf& body) {
  const SegmentTagState& s = report.state;
  body.append("{\"tag\":");
  body.append_json_string(s.tag);
  body.append(",\"served\":");
  body.append(report.served ? "true" : "false");
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
  if (report.stored) {
    write_segment_row(*report.stored, body);
  } else {
    body.append("null");
  }
  body.append("}\n");
}

}  // namespace flurry::server

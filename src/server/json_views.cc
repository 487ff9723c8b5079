#include "json_views.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstring>

#include "api.h"
#include "flurry/codec.h"
#include "flurry/timefmt.h"
#include "flurry/wide_id.h"
#include "routes.h"

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
  // Exact, for clients that decode IDs themselves (unit_ms is 0.1 for a 100 us unit).
  b.append(",\"unit_ns\":");
  b.append_uint(static_cast<std::uint64_t>(layout.unit().count()));
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
  // The text forms GET /v1/ids?encoding= takes for this layout: uuidv7 and ulid only where the
  // layout can carry them (docs/id-format.md), so a client need not try.
  b.append(",\"encodings\":[");
  for (const EncodingInfo& e : kEncodings) {
    b.append_json_string(e.name);
    b.push(',');
  }
  for (const WideFormatInfo& w : kWideFormats) {
    if (WideIdCodec::create(layout, w.format).ok()) {
      b.append_json_string(w.name);
      b.push(',');
    }
  }
  b.resize(b.size() - 1);  // the last comma
  b.append("],\"node\":");
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

namespace {

// What write_decimal_run copies per element: at least the longest element (20 digits and 3
// punctuation bytes). It may write this many bytes at the end of the last element.
constexpr std::size_t kRunCopy = 32;

// "00" "01" ... "99".
constexpr std::array<char, 200> kTwoDigits = [] {
  std::array<char, 200> t{};
  for (std::size_t i = 0; i < 100; ++i) {
    t[2 * i] = static_cast<char>('0' + i / 10);
    t[2 * i + 1] = static_cast<char>('0' + i % 10);
  }
  return t;
}();

// Decimal IDs, each written as `before` digits `after` (before: at most 1 byte, after: at most 2).
// An ID of at least 100 in the same hundred as the last one converted (most of a batch:
// consecutive sequence numbers of one tick) is that element copied with its last two digits
// replaced, not converted again: a fixed copy of kRunCopy bytes and one table load instead of
// std::to_chars (about 16 ns an ID for 18 digits here, see bench/http_body_bench.cc). The copy
// reads an element written up to 99 elements back, never the one just written, whose stores
// would not yet be readable as one load.
char* write_decimal_run(char* out, std::span<const std::uint64_t> ids, std::string_view before,
                        std::string_view after) {
  const char* base = nullptr;  // the last element converted
  std::size_t base_len = 0;    // its length, punctuation included
  std::uint64_t base_hundred = 0;
  for (const std::uint64_t id : ids) {
    const std::uint64_t hundred = id / 100;
    if (base != nullptr && hundred == base_hundred && id >= 100) {
      char element[kRunCopy];  // through a temporary: the source may run on into `out`
      std::memcpy(element, base, kRunCopy);
      std::memcpy(out, element, kRunCopy);
      const std::size_t last_two = static_cast<std::size_t>(id - hundred * 100);
      std::memcpy(out + base_len - after.size() - 2, &kTwoDigits[2 * last_two], 2);
      out += base_len;
      continue;
    }
    char* const element = out;
    out = std::copy(before.begin(), before.end(), out);  // often empty: no memcpy of null
    out = std::to_chars(out, out + 20, id).ptr;
    out = std::copy(after.begin(), after.end(), out);
    base = element;
    base_len = static_cast<std::size_t>(out - element);
    base_hundred = hundred;
  }
  return out;
}

}  // namespace

std::string_view write_id_list(IdListFormat format, const IdTextCodec& codec,
                               std::span<const std::uint64_t> ids, OutBuf& body) {
  const bool decimal =
      format == IdListFormat::kNumber || codec.encoding() == IdEncoding(Encoding::kDecimal);
  const std::size_t per_id = (decimal ? kMaxEncodedIdLength : codec.max_length()) + 3;
  char* const start = body.tail(ids.size() * per_id + 16 + kRunCopy);
  char* out = start;
  const auto put = [&out](std::string_view s) {
    std::memcpy(out, s.data(), s.size());
    out += s.size();
  };
  std::string_view content_type = kJsonType;
  if (format == IdListFormat::kText) {
    content_type = kTextType;
    if (decimal) {
      out = write_decimal_run(out, ids, {}, "\n");
    } else {
      for (const std::uint64_t id : ids) {
        out = codec.write(out, id);
        *out++ = '\n';
      }
    }
  } else {
    put("{\"ids\":[");
    if (format == IdListFormat::kNumber) {
      out = write_decimal_run(out, ids, {}, ",");
    } else if (decimal) {
      out = write_decimal_run(out, ids, "\"", "\",");
    } else {
      for (const std::uint64_t id : ids) {
        *out++ = '"';
        out = codec.write(out, id);
        *out++ = '"';
        *out++ = ',';
      }
    }
    if (!ids.empty()) --out;  // the last comma
    put("]}\n");
  }
  body.commit(static_cast<std::size_t>(out - start));
  return content_type;
}

}  // namespace flurry::server

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

namespace flurry::http {
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

void write_buffer(const std::optional<SegmentBufferInfo>& b, JsonWriter& w) {
  if (!b) {
    w.null();
    return;
  }
  w.begin_object();
  w.key("start").id_string(b->start);
  w.key("end").id_string(b->end);
  w.field("delta", b->delta);
  w.field("remainder", b->remainder);
  w.field("size", b->size);
  w.field("remaining", b->remaining);
  w.field("step", b->step);
  w.field("store", b->store);
  w.field("fetched_at", format_unix_ms(b->fetched_unix_ms));
  w.field("fetch_ms", std::chrono::duration<double, std::milli>(b->fetch_duration).count());
  w.end_object();
}

}  // namespace

LayoutJson::LayoutJson(const Layout& layout) {
  OutBuf b;
  JsonWriter w(b);
  w.begin_object();
  w.field("text", layout.to_string());
  w.key("preset");
  if (layout.preset_name().empty()) {
    w.null();
  } else {
    w.value(layout.preset_name());
  }
  w.field("bits", static_cast<std::uint64_t>(layout.total_bits()));
  w.key("fields").begin_array();
  for (const Field& f : layout.fields()) {
    w.begin_object();
    w.field("name", f.name);
    w.field("bits", static_cast<std::uint64_t>(f.bits));
    w.field("shift", static_cast<std::uint64_t>(f.shift));
    w.field("kind", kind_name(f.kind));
    w.end_object();
  }
  w.end_array();
  w.field("epoch", format_time(layout.epoch()));
  w.field("epoch_unix_ms", unix_ms(layout.epoch()));
  w.field("unit_ms", std::chrono::duration<double, std::milli>(layout.unit()).count());
  // Exact, for clients that decode IDs themselves (unit_ms is 0.1 for a 100 us unit).
  w.field("unit_ns", static_cast<std::uint64_t>(layout.unit().count()));
  w.key("end");
  if (layout.end() == TimePoint::max()) {
    w.null();
  } else {
    w.value(format_time(layout.end()));
  }
  w.field("rate_limit_per_second", layout.rate_limit_per_second());
  w.field("node_count", layout.node_count());
  w.field("clock_generations", layout.clock_generations());
  // The text forms GET /v1/ids?encoding= takes for this layout: uuidv7 and ulid only where the
  // layout can carry them (docs/id-format.md), so a client need not try.
  w.key("encodings").begin_array();
  for (const EncodingInfo& e : kEncodings) w.value(e.name);
  for (const WideFormatInfo& wide : kWideFormats) {
    if (WideIdCodec::create(layout, wide.format).ok()) w.value(wide.name);
  }
  w.end_array();
  before_node_.assign(b.view());
}

void LayoutJson::write(std::uint64_t node, std::uint64_t max_batch, JsonWriter& w) const {
  w.raw(before_node_);
  w.resume_object(1);
  w.field("node", node);
  w.field("max_batch", max_batch);
  w.end_object();
}

void LayoutJson::write(std::uint64_t node, std::uint64_t max_batch, OutBuf& body) const {
  JsonWriter w(body);
  write(node, max_batch, w);
  body.push('\n');
}

void write_decoded_id(const Layout& layout, const DecodedId& d, JsonWriter& w) {
  w.key("id").id_string(d.id);
  w.field("layout", layout.to_string());
  w.field("time", format_time(d.time));
  w.field("unix_ms", d.unix_ms);
  w.field("ticks", d.parts.ticks);
  w.field("node", d.parts.node);
  w.field("seq", d.parts.seq);
  if (d.has_clock) w.field("clock", d.parts.clock);
  w.key("fields").begin_object();
  for (const DecodedField& f : d.fields) w.field(f.name, f.value);
  w.end_object();
  w.key("encodings").begin_object();
  for (const EncodedId& e : d.encodings) w.field(e.name, e.text);
  w.end_object();
}

void write_segment_row(const SegmentTagInfo& t, JsonWriter& w) {
  w.begin_object();
  w.field("tag", t.tag);
  w.key("max_id").id_string(t.max_id);
  w.field("step", t.step);
  w.field("delta", t.delta);
  w.field("remainder", t.remainder);
  w.field("strict", t.strict);
  w.field("description", t.description);
  w.field("update_time", format_unix_ms(t.update_time_unix_ms));
  w.end_object();
}

void write_segment_report(const ops::SegmentTagReport& report, OutBuf& body) {
  const SegmentTagState& s = report.state;
  JsonWriter w(body);
  w.begin_object();
  w.field("tag", s.tag);
  w.field("served", report.served);
  w.field("step", s.step);
  w.field("base_step", s.base_step);
  w.field("remaining", s.remaining);
  w.field("fetching", s.fetching);
  w.field("ids_issued", s.ids_issued);
  w.field("ids_skipped", s.ids_skipped);
  w.field("ranges_fetched", s.ranges_fetched);
  w.field("store_errors", s.store_errors);
  w.field("waits", s.waits);
  w.field("unavailable", s.unavailable);
  w.field("last_error", s.last_error);
  if (s.strict) {
    // Strict tags: the leadership term of the current range, and what earlier terms dropped.
    w.field("term", s.term);
    w.field("stale_term_ids", s.stale_term_ids);
  }
  w.key("current");
  write_buffer(s.current, w);
  w.key("next");
  write_buffer(s.next, w);
  w.key("stored");
  if (report.stored) {
    write_segment_row(*report.stored, w);
  } else {
    w.null();
  }
  w.end_object();
  body.push('\n');
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

}  // namespace flurry::http

// libFuzzer target for every parser of outside input: layout text, ID text in each encoding, the
// decode model (an ID taken apart with a layout), time text, horizon records, the HTTP API's
// query strings, percent-encoding and path segments, and the JSON body of POST /v1/segments. Beyond
// "never crash" it checks the round trips the parsers promise: a parsed layout re-parses from its
// canonical text to an equal layout, a decoded ID encodes back to a text that decodes to the same
// value (and the same fields), so does its UUIDv7 or ULID form, a horizon record is accepted only
// in the exact canonical form that format_horizon_record writes, and a parsed query string, written
// again with every byte percent-encoded, parses to the same parameters, and a POST /v1/segments
// body that parses, written again by nlohmann-json, parses to the same tag spec. The core's shared
// helpers for outside input are fuzzed too: quote() always gives one line of printable ASCII of
// bounded length, and parse_uint() accepts exactly the digit strings that fit.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/numbers.h"
#include "core/percent.h"
#include "core/quote.h"
#include "flurry/codec.h"
#include "flurry/decoded_id.h"
#include "flurry/horizon.h"
#include "flurry/layout.h"
#include "flurry/segment_store.h"
#include "flurry/timefmt.h"
#include "flurry/wide_id.h"
#include "http/query.h"
#include "http/segment_body.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();  // libFuzzer reports the input that broke a promise
}

// The decode model agrees with the layout and with itself through every encoding.
void check_decoded(const flurry::Layout& layout, std::uint64_t raw) {
  flurry::Result<flurry::DecodedId> d = flurry::decode_id(layout, raw);
  check(d.ok() && d->id == raw);
  flurry::Result<std::uint64_t> back = layout.compose(d->parts);
  check(back.ok() && *back == raw);
  check(d->fields.size() == layout.fields().size());
  for (std::size_t i = 0; i < d->fields.size(); ++i) {
    check(d->fields[i].value == layout.field_value(raw, layout.fields()[i]));
  }
  check(d->time == layout.time_of(d->parts.ticks));
  for (std::size_t i = 0; i < flurry::kEncodings.size(); ++i) {
    const flurry::EncodedId& e = d->encodings[i];
    check(e.encoding == flurry::kEncodings[i].encoding && e.name == flurry::kEncodings[i].name);
    flurry::Result<flurry::DecodedId> again = flurry::decode_id(layout, e.text, e.encoding);
    check(again.ok() && again->id == raw && again->parts == d->parts);
  }
}

// An ID of `layout` written as UUIDv7 and ULID (when the layout can carry them) decodes back.
void check_wide(const flurry::Layout& layout, std::uint64_t raw) {
  for (const flurry::WideFormatInfo& f : flurry::kWideFormats) {
    flurry::Result<flurry::WideIdCodec> codec = flurry::WideIdCodec::create(layout, f.format);
    if (!codec.ok()) continue;
    const std::string text = codec->encode(raw);
    check(text.size() == codec->text_length());
    flurry::Result<std::uint64_t> back = codec->decode(text);
    check(back.ok() && *back == raw);
  }
}

// Text that decodes as a UUIDv7 or ULID of a 1 ms and of a 300 us layout writes back to a text
// that decodes to the same ID.
void check_wide_text(std::string_view text) {
  static const flurry::Layout kLayouts[] = {
      flurry::Layout::parse("flurry").value(),
      flurry::Layout::parse("time:43@300us,node:10,seq:10;epoch=2020-01-01Z").value()};
  for (const flurry::Layout& layout : kLayouts) {
    for (const flurry::WideFormatInfo& f : flurry::kWideFormats) {
      flurry::Result<flurry::WideIdCodec> codec = flurry::WideIdCodec::create(layout, f.format);
      check(codec.ok());
      if (flurry::Result<std::uint64_t> id = codec->decode(text); id.ok()) {
        flurry::Result<std::uint64_t> again = codec->decode(codec->encode(*id));
        check(again.ok() && *again == *id);
      }
    }
  }
}

// Every byte as %XX: decodes to `s` whatever it holds.
std::string encode_all(std::string_view s) {
  static constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto b = static_cast<unsigned char>(c);
    out += '%';
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

void check_query(std::string_view text) {
  using flurry::http::QueryParams;
  using flurry::http::QueryScratch;
  static constexpr std::array<std::string_view, 4> kAllowed = {"count", "a b", "", "x%"};

  QueryScratch scratch;
  using flurry::internal::PlusSign;
  for (const PlusSign plus_sign : {PlusSign::kPlus, PlusSign::kSpace}) {
    const bool plus = plus_sign == PlusSign::kSpace;
    std::string out;
    if (flurry::internal::percent_decode(text, out, plus_sign).ok()) {
      check(out.size() <= text.size());
      if (text.find('%') == std::string_view::npos &&
          (!plus || text.find('+') == std::string_view::npos)) {
        check(out == text);
      }
      std::string again;
      check(flurry::internal::percent_decode(encode_all(out), again, plus_sign).ok() &&
            again == out);
    }
  }

  QueryParams params;
  if (flurry::http::parse_query(text, "/fuzz", kAllowed, params, scratch).ok()) {
    // Copies: the views point into `text` and `scratch`, which the second parse reuses.
    std::array<std::string, kAllowed.size()> values;
    std::string canonical;
    for (std::size_t i = 0; i < kAllowed.size(); ++i) {
      if (!params.present[i]) continue;
      values[i] = params.value[i];
      if (!canonical.empty()) canonical += '&';
      canonical += encode_all(kAllowed[i]) + "=" + encode_all(values[i]);
    }
    QueryParams reparsed;
    QueryScratch scratch2;
    const flurry::Status st =
        flurry::http::parse_query(canonical, "/fuzz", kAllowed, reparsed, scratch2);
    check(st.ok() || canonical.empty());
    for (std::size_t i = 0; i < kAllowed.size(); ++i) {
      check(reparsed.present[i] == params.present[i]);
      if (params.present[i]) check(reparsed.value[i] == values[i]);
    }
  }

  if (flurry::Result<std::string_view> seg = flurry::http::path_segment(text, scratch);
      seg.ok() && text.find('%') == std::string_view::npos) {
    check(*seg == text);
  }
}

// A body that parses is a JSON object of known fields: written again, it reads the same.
void check_segment_body(std::string_view text) {
  flurry::Result<flurry::SegmentTagSpec> spec = flurry::http::parse_segment_tag_body(text);
  if (!spec.ok()) {
    check(spec.status().code() == flurry::StatusCode::kInvalidArgument);
    return;
  }
  const nlohmann::json doc = {{"tag", spec->tag},     {"start", spec->start},
                              {"step", spec->step},   {"description", spec->description},
                              {"delta", spec->delta}, {"remainder", spec->remainder}};
  flurry::Result<flurry::SegmentTagSpec> again = flurry::http::parse_segment_tag_body(doc.dump());
  check(again.ok() && again->tag == spec->tag && again->start == spec->start &&
        again->step == spec->step && again->description == spec->description &&
        again->delta == spec->delta && again->remainder == spec->remainder);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (flurry::Result<flurry::Layout> layout = flurry::Layout::parse(text); layout.ok()) {
    flurry::Result<flurry::Layout> again = flurry::Layout::parse(layout->to_string());
    check(again.ok() && *again == *layout);
    // compose/decompose are inverses on whatever the text's first bytes make of an ID.
    std::uint64_t raw = 0;
    for (std::size_t i = 0; i < size && i < 8; ++i) raw = raw << 8 | data[i];
    raw &= (layout->total_bits() < 64 ? (std::uint64_t{1} << layout->total_bits()) - 1 : ~0ull);
    flurry::Result<flurry::IdParts> parts = layout->decompose(raw);
    check(parts.ok());
    flurry::Result<std::uint64_t> back = layout->compose(*parts);
    check(back.ok() && *back == raw);
    check_decoded(*layout, raw);
    check_wide(*layout, raw);
  }
  check_wide_text(text);

  for (const flurry::EncodingInfo& info : flurry::kEncodings) {
    const flurry::Encoding e = info.encoding;
    if (flurry::Result<std::uint64_t> id = flurry::decode_id(text, e); id.ok()) {
      flurry::Result<std::uint64_t> again = flurry::decode_id(flurry::encode_id(*id, e), e);
      check(again.ok() && *again == *id);
    }
  }

  if (flurry::Result<flurry::TimePoint> t = flurry::parse_time(text); t.ok()) {
    (void)flurry::format_time(*t);
  }

  if (flurry::Result<flurry::HorizonRecord> r = flurry::parse_horizon_record(text); r.ok()) {
    check(flurry::format_horizon_record(*r) == text);
  }

  check_query(text);
  check_segment_body(text);

  const std::string quoted = flurry::internal::quote(text);
  check(quoted.size() <= 4 * flurry::internal::kQuoteMax + 5);
  for (const char c : quoted) check(c >= 0x20 && c < 0x7f);

  if (const flurry::internal::ParsedUint n = flurry::internal::parse_uint(text); n.ok()) {
    const std::size_t zeros = text.find_first_not_of('0');
    const std::string_view digits = zeros == std::string_view::npos ? "0" : text.substr(zeros);
    check(std::to_string(n.value) == digits);
  } else {
    check(n.value == 0 && (n.error != flurry::internal::UintError::kEmpty || text.empty()));
  }
  return 0;
}

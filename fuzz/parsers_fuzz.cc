// libFuzzer target for every core parser of outside input: layout text, ID text in each
// encoding, time text and horizon records. Beyond "never crash" it checks the round trips the
// parsers promise: a parsed layout re-parses from its canonical text to an equal layout, a
// decoded ID encodes back to a text that decodes to the same value, and a horizon record is
// accepted only in the exact canonical form that format_horizon_record writes. The core's shared
// helpers for outside input are fuzzed too: quote() always gives one line of printable ASCII of
// bounded length, and parse_uint() accepts exactly the digit strings that fit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/numbers.h"
#include "core/quote.h"
#include "flurry/codec.h"
#include "flurry/horizon.h"
#include "flurry/layout.h"
#include "flurry/timefmt.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();  // libFuzzer reports the input that broke a promise
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
  }

  for (flurry::Encoding e : {flurry::Encoding::kDecimal, flurry::Encoding::kHex,
                             flurry::Encoding::kBase32, flurry::Encoding::kBase62}) {
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

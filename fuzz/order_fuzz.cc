// libFuzzer target for the order-number parsers of outside input (flurry::order): the order-number
// decoder of several formats (digits + Damm or Luhn, base32 + mod 37, a literal prefix with
// grouping, a date prefix) and the key-set text form (key files and environment variables).
// Beyond "never crash" it checks what they promise: a number that decodes is the encoding of its
// ID up to separators, case and Crockford's aliases (so the ID's own encoding decodes to the same
// ID and has the format's length; with one key it is the input itself, up to form), and no error
// message of the key parser carries a run of hex digits that could be a piece of a key.
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/order_number.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();  // libFuzzer reports the input that broke a promise
}

constexpr std::array<std::uint8_t, 16> kKey = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

std::vector<flurry::OrderNumberFormat>& formats() {
  static std::vector<flurry::OrderNumberFormat>* all = [] {
    auto* v = new std::vector<flurry::OrderNumberFormat>;
    flurry::OrderKeySet keys;
    check(keys.add('1', kKey).ok());
    std::vector<flurry::OrderNumberOptions> options(6);
    options[1].check = flurry::OrderCheck::kLuhn;
    options[1].max_id = 999'999'999;
    options[2].alphabet = flurry::OrderAlphabet::kBase32;
    options[2].check = flurry::OrderCheck::kMod37;
    options[3].prefix = flurry::OrderPrefix::kLiteral;
    options[3].literal = "ORD";
    options[3].group_size = 4;
    options[4].prefix = flurry::OrderPrefix::kDate;
    options[4].max_id = (std::uint64_t{1} << 50) - 1;
    // 1 ms per ID from 2025-01-01Z: dates across the years the prefix allows.
    options[4].unix_ms = [](std::uint64_t id) -> flurry::Result<std::int64_t> {
      return static_cast<std::int64_t>(1'735'689'600'000 + (id >> 12));
    };
    options[5].alphabet = flurry::OrderAlphabet::kBase32;
    options[5].check = flurry::OrderCheck::kNone;
    options[5].max_id = ~std::uint64_t{0};
    options[5].group_size = 5;
    options[5].separator = '.';
    for (const auto& o : options) {
      flurry::Result<flurry::OrderNumberFormat> f = flurry::OrderNumberFormat::create(o, keys);
      check(f.ok());
      v->push_back(std::move(f).value());
    }
    return v;
  }();
  return *all;
}

// The characters that matter when comparing a parsed text with an encoding: no separators,
// upper case, Crockford's aliases resolved.
std::string canonical(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '-' || c == ' ' || c == '.' || c == '_' || c == '/') continue;
    char u = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (u == 'I' || u == 'L') u = '1';
    if (u == 'O') u = '0';
    out += u;
  }
  return out;
}

bool has_hex_run(std::string_view s, std::size_t run) {
  std::size_t n = 0;
  for (const char c : s) {
    n = std::isxdigit(static_cast<unsigned char>(c)) ? n + 1 : 0;
    if (n >= run) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  for (const flurry::OrderNumberFormat& f : formats()) {
    flurry::OrderDecodeError error;
    const flurry::Result<std::uint64_t> id = f.decode(text, &error);
    // The error's kind is set exactly when decoding fails, its position inside the text.
    check(id.ok() == (error.kind == flurry::OrderDecodeError::Kind::kNone));
    check(error.position <= text.size());
    if (!id.ok()) continue;
    const flurry::Result<std::string> again = f.encode(*id);
    check(again.ok() && again->size() == f.length());
    const flurry::Result<std::uint64_t> back = f.decode(*again);
    check(back.ok() && *back == *id);
    // One key: the encoding of an ID is unique, so the input was it, up to form.
    check(canonical(text) == canonical(*again));
  }

  const flurry::Result<flurry::OrderKeySet> keys = flurry::OrderKeySet::parse(text, "fuzz");
  if (keys.ok()) {
    check(!keys->empty() && keys->size() <= flurry::OrderKeySet::kMaxKeys);
    check(keys->versions().find(keys->active()) != std::string::npos);
    check(!has_hex_run(keys->to_string(), 8));
  } else {
    check(keys.status().code() == flurry::StatusCode::kInvalidArgument);
    check(!has_hex_run(keys.status().message(), 8));
  }
  return 0;
}

#include "flurry/codec.h"

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/numbers.h"
#include "core/quote.h"
#include "digits.h"

namespace flurry {
namespace {

using internal::quote;

using internal::DigitTable;
using internal::kBase32Alphabet;
using internal::kBase32Table;
using internal::kHexDigits;
using internal::kHexTable;
using internal::make_table;

constexpr std::string_view kBase62Alphabet =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

constexpr std::size_t kDecimalMaxLen = 20;  // 18446744073709551615
constexpr std::size_t kHexLen = 16;
constexpr std::size_t kBase32Len = 13;  // 65 bits: the first symbol carries only 4
constexpr std::size_t kBase62MaxLen = 11;

constexpr DigitTable kDecimalTable = make_table("0123456789");
constexpr DigitTable kBase62Table = make_table(kBase62Alphabet);

// The name used in error messages: to_string(), but "decimal" spelled out.
std::string_view long_name(Encoding encoding) noexcept {
  return encoding == Encoding::kDecimal ? "decimal" : to_string(encoding);
}

// "<encoding> ID "<text>": <why>"
Status bad_id(Encoding encoding, std::string_view text, std::string_view why) {
  std::string msg(long_name(encoding));
  msg += " ID ";
  msg += quote(text);
  msg += ": ";
  msg += why;
  return InvalidArgument(std::move(msg));
}

Status bad_character(Encoding encoding, std::string_view text, std::size_t pos) {
  std::string why = "bad character " + internal::quote_char(text[pos]) + " at position ";
  why += std::to_string(pos);
  return bad_id(encoding, text, why);
}

Status too_long(Encoding encoding, std::string_view text, std::size_t count, std::string_view unit,
                std::size_t max) {
  return bad_id(encoding, text,
                "too long: " + std::to_string(count) + " " + std::string(unit) + ", at most " +
                    std::to_string(max));
}

Status overflow(Encoding encoding, std::string_view text) {
  return bad_id(encoding, text,
                "overflows 64 bits (the largest ID is " +
                    encode_id(std::numeric_limits<std::uint64_t>::max(), encoding) + ")");
}

// Returns the position of the first byte of `digits` that is not in `table`, or npos.
std::size_t find_bad(std::string_view digits, const DigitTable& table) noexcept {
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (table[static_cast<unsigned char>(digits[i])] < 0) return i;
  }
  return std::string_view::npos;
}

// Digits of `id` in `alphabet` (base = its size), most significant first, shortest form.
char* write_shortest(char* out, std::uint64_t id, std::string_view alphabet) noexcept {
  const std::uint64_t base = alphabet.size();
  std::array<char, kMaxEncodedIdLength> buf;
  char* const end = buf.data() + buf.size();
  char* p = end;
  do {
    *--p = alphabet[id % base];
    id /= base;
  } while (id != 0);
  const auto n = static_cast<std::size_t>(end - p);
  std::memcpy(out, p, n);
  return out + n;
}

// Fixed width: `width` symbols of `bits` bits each, zero-padded.
char* write_fixed(char* out, std::uint64_t id, std::string_view alphabet, std::size_t width,
                  int bits) noexcept {
  const std::uint64_t mask = (std::uint64_t{1} << bits) - 1;
  for (std::size_t i = width; i-- > 0;) {
    out[i] = alphabet[id & mask];
    id >>= bits;
  }
  return out + width;
}

Result<std::uint64_t> decode_decimal(std::string_view text) {
  constexpr Encoding kEnc = Encoding::kDecimal;
  if (text.empty()) return bad_id(kEnc, text, "empty");
  if (const std::size_t bad = find_bad(text, kDecimalTable); bad != std::string_view::npos) {
    return bad_character(kEnc, text, bad);
  }
  if (text.size() > kDecimalMaxLen)
    return too_long(kEnc, text, text.size(), "digits", kDecimalMaxLen);
  const internal::ParsedUint value = internal::parse_uint(text);
  if (!value.ok()) return overflow(kEnc, text);  // only digits here: too large
  return value.value;
}

Result<std::uint64_t> decode_hex(std::string_view text) {
  constexpr Encoding kEnc = Encoding::kHex;
  if (text.empty()) return bad_id(kEnc, text, "empty");
  std::size_t start = 0;
  if (text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) start = 2;
  const std::string_view digits = text.substr(start);
  if (digits.empty()) return bad_id(kEnc, text, "no digits after the \"0x\" prefix");
  if (const std::size_t bad = find_bad(digits, kHexTable); bad != std::string_view::npos) {
    return bad_character(kEnc, text, start + bad);
  }
  if (digits.size() > kHexLen) return too_long(kEnc, text, digits.size(), "hex digits", kHexLen);
  std::uint64_t value = 0;
  for (const char c : digits) {
    value = (value << 4) | static_cast<std::uint64_t>(kHexTable[static_cast<unsigned char>(c)]);
  }
  return value;
}

Result<std::uint64_t> decode_base32(std::string_view text) {
  constexpr Encoding kEnc = Encoding::kBase32;
  if (text.empty()) return bad_id(kEnc, text, "empty");
  std::size_t symbols = 0;
  int first = -1;  // value of the first symbol
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '-') continue;
    const int v = kBase32Table[static_cast<unsigned char>(text[i])];
    if (v < 0) return bad_character(kEnc, text, i);
    if (first < 0) first = v;
    ++symbols;
  }
  if (symbols == 0) return bad_id(kEnc, text, "no symbols, only hyphens");
  if (symbols > kBase32Len) {
    return too_long(kEnc, text, symbols, "symbols (not counting hyphens)", kBase32Len);
  }
  // 13 symbols hold 65 bits: the first may only carry 4 (0-F).
  if (symbols == kBase32Len && first > 0xf) return overflow(kEnc, text);
  std::uint64_t value = 0;
  for (const char c : text) {
    if (c == '-') continue;
    value = (value << 5) | static_cast<std::uint64_t>(kBase32Table[static_cast<unsigned char>(c)]);
  }
  return value;
}

Result<std::uint64_t> decode_base62(std::string_view text) {
  constexpr Encoding kEnc = Encoding::kBase62;
  if (text.empty()) return bad_id(kEnc, text, "empty");
  if (const std::size_t bad = find_bad(text, kBase62Table); bad != std::string_view::npos) {
    return bad_character(kEnc, text, bad);
  }
  if (text.size() > kBase62MaxLen) {
    return too_long(kEnc, text, text.size(), "characters", kBase62MaxLen);
  }
  std::uint64_t value = 0;
  for (const char c : text) {
    const auto digit = static_cast<std::uint64_t>(kBase62Table[static_cast<unsigned char>(c)]);
    if (__builtin_mul_overflow(value, std::uint64_t{62}, &value) ||
        __builtin_add_overflow(value, digit, &value)) {
      return overflow(kEnc, text);
    }
  }
  return value;
}

}  // namespace

Result<Encoding> parse_encoding(std::string_view name) {
  for (const EncodingInfo& e : kEncodings) {
    if (name == e.name || (!e.alias.empty() && name == e.alias)) return e.encoding;
  }
  return InvalidArgument("unknown ID encoding " + quote(name) + ": expected " +
                         encoding_names(true));
}

std::string_view to_string(Encoding encoding) noexcept {
  for (const EncodingInfo& e : kEncodings) {
    if (e.encoding == encoding) return e.name;
  }
  return "unknown";
}

std::string encoding_names(bool aliases) {
  std::vector<std::string_view> names;
  for (const EncodingInfo& e : kEncodings) {
    names.push_back(e.name);
    if (aliases && !e.alias.empty()) names.push_back(e.alias);
  }
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

char* write_id(char* out, std::uint64_t id, Encoding encoding) noexcept {
  switch (encoding) {
    case Encoding::kDecimal:
      return std::to_chars(out, out + kMaxEncodedIdLength, id).ptr;
    case Encoding::kHex:
      return write_fixed(out, id, kHexDigits, kHexLen, 4);
    case Encoding::kBase32:
      return write_fixed(out, id, kBase32Alphabet, kBase32Len, 5);
    case Encoding::kBase62:
      return write_shortest(out, id, kBase62Alphabet);
  }
  return out;
}

std::string encode_id(std::uint64_t id, Encoding encoding) {
  std::array<char, kMaxEncodedIdLength> buf;
  return std::string(buf.data(), write_id(buf.data(), id, encoding));
}

Result<std::uint64_t> decode_id(std::string_view text, Encoding encoding) {
  switch (encoding) {
    case Encoding::kDecimal:
      return decode_decimal(text);
    case Encoding::kHex:
      return decode_hex(text);
    case Encoding::kBase32:
      return decode_base32(text);
    case Encoding::kBase62:
      return decode_base62(text);
  }
  return InvalidArgument("unknown ID encoding " + std::to_string(static_cast<int>(encoding)));
}

}  // namespace flurry

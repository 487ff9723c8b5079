// Internal: what the order-number format's files share: the alphabets and their parse tables,
// numeral conversions, and the format's state (OrderNumberFormat::Impl).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "check_char.h"
#include "date_prefix.h"
#include "flurry/ff1.h"
#include "flurry/order_number.h"

namespace flurry {
namespace order_internal {

inline constexpr std::string_view kDigits = "0123456789";
inline constexpr std::string_view kBase32 = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
inline constexpr std::size_t kMaxLiteral = 8;
inline constexpr std::size_t kDateLength = 6;
inline constexpr int kMaxOffsetMinutes = 18 * 60;
inline constexpr std::string_view kSeparators = "-_ ./";
// Characters of a number without separators: the longest prefix, version, payload, check.
inline constexpr std::size_t kMaxChars = kMaxLiteral + 1 + Ff1::kMaxLength + 1;

// Byte -> value, or -1.
using Table = std::array<std::int8_t, 256>;

constexpr Table make_table(std::string_view alphabet) {
  Table t{};
  for (auto& v : t) v = -1;
  for (std::size_t i = 0; i < alphabet.size(); ++i) {
    const char c = alphabet[i];
    t[static_cast<unsigned char>(c)] = static_cast<std::int8_t>(i);
    if (c >= 'A' && c <= 'Z')
      t[static_cast<unsigned char>(c - 'A' + 'a')] = static_cast<std::int8_t>(i);
  }
  return t;
}

// Crockford: either case; I and L read as 1, O as 0.
constexpr Table make_crockford_table(std::string_view alphabet) {
  Table t = make_table(alphabet);
  for (const char c : {'I', 'i', 'L', 'l'}) t[static_cast<unsigned char>(c)] = 1;
  for (const char c : {'O', 'o'}) t[static_cast<unsigned char>(c)] = 0;
  return t;
}

inline constexpr Table kDigitTable = make_table(kDigits);
inline constexpr Table kBase32Table = make_crockford_table(kBase32);
inline constexpr Table kMod37Table = make_crockford_table(internal::kMod37Symbols);

inline char upper(char c) noexcept {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

inline std::string_view check_name(OrderCheck c) noexcept {
  switch (c) {
    case OrderCheck::kNone:
      return "no";
    case OrderCheck::kLuhn:
      return "Luhn";
    case OrderCheck::kDamm:
      return "Damm";
    case OrderCheck::kMod37:
      return "mod 37";
  }
  return "?";
}

// STR_radix^n(value): n numerals, most significant first (leading zeros when n is larger than
// needed). Constant radixes let the compiler divide by multiplication.
template <unsigned kRadix>
void to_numerals(std::uint64_t value, std::uint8_t* out, std::size_t n) noexcept {
  for (std::size_t i = n; i-- > 0;) {
    out[i] = static_cast<std::uint8_t>(value % kRadix);
    value /= kRadix;
  }
}

// NUM_radix of n numerals, false when the value exceeds 2^64 - 1.
template <unsigned kRadix>
bool from_numerals(const std::uint8_t* in, std::size_t n, std::uint64_t& out) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (__builtin_mul_overflow(v, std::uint64_t{kRadix}, &v) ||
        __builtin_add_overflow(v, std::uint64_t{in[i]}, &v)) {
      return false;
    }
  }
  out = v;
  return true;
}

}  // namespace order_internal

struct OrderNumberFormat::Impl {
  using Table = order_internal::Table;

  OrderNumberOptions options;
  unsigned radix = 10;
  std::string_view alphabet;
  const Table* table = nullptr;
  std::size_t n = 0;           // payload numerals
  std::size_t prefix_len = 0;  // 0, the literal's or 6
  std::size_t body_len = 0;    // version + payload + check
  std::size_t chars = 0;       // prefix_len + body_len
  std::size_t display_len = 0;
  std::vector<Ff1> ff1;                  // by key index
  std::vector<char> versions;            // by key index
  std::array<std::int8_t, 128> index{};  // version character -> key index, or -1
  std::size_t active = 0;                // key index
  std::vector<std::uint8_t> tweak;

  [[nodiscard]] std::uint8_t check_value(const std::uint8_t* body, std::size_t len) const noexcept {
    const std::span<const std::uint8_t> s(body, len);
    switch (options.check) {
      case OrderCheck::kLuhn:
        return internal::luhn_check(s);
      case OrderCheck::kDamm:
        return internal::damm_check(s);
      case OrderCheck::kMod37:
        return internal::mod37_check(s);
      case OrderCheck::kNone:
        break;
    }
    return 0;
  }

  [[nodiscard]] char check_symbol(std::uint8_t v) const noexcept {
    return options.check == OrderCheck::kMod37 ? internal::kMod37Symbols[v]
                                               : order_internal::kDigits[v];
  }

  [[nodiscard]] Result<std::array<char, 6>> date_of(std::uint64_t id) const {
    Result<std::int64_t> ms = options.unix_ms(id);
    if (!ms.ok()) return ms.status().with_prefix("the date of ID " + std::to_string(id));
    return internal::yymmdd(*ms, options.utc_offset_minutes);
  }

  void to_payload(std::uint64_t id, std::uint8_t* out) const noexcept {
    if (radix == 10) {
      order_internal::to_numerals<10>(id, out, n);
    } else {
      order_internal::to_numerals<32>(id, out, n);
    }
  }

  [[nodiscard]] bool from_payload(const std::uint8_t* in, std::uint64_t& out) const noexcept {
    return radix == 10 ? order_internal::from_numerals<10>(in, n, out)
                       : order_internal::from_numerals<32>(in, n, out);
  }
};

}  // namespace flurry

// The digit alphabets and their reverse tables, shared by the 64-bit encodings (codec.cc) and the
// wide forms (wide_id.cc), so Crockford's base32 is read the same way in both.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flurry::internal {

inline constexpr std::string_view kHexDigits = "0123456789abcdef";
// Crockford's base32: no I, L, O, U.
inline constexpr std::string_view kBase32Alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

// Byte -> digit value, or -1 when the byte is not a digit of the encoding.
using DigitTable = std::array<std::int8_t, 256>;

constexpr DigitTable make_table(std::string_view alphabet) {
  DigitTable t{};
  for (auto& v : t) v = -1;
  for (std::size_t i = 0; i < alphabet.size(); ++i) {
    t[static_cast<unsigned char>(alphabet[i])] = static_cast<std::int8_t>(i);
  }
  return t;
}

// Hex digits in either case.
constexpr DigitTable make_hex_table() {
  DigitTable t = make_table(kHexDigits);
  for (int i = 0; i < 6; ++i)
    t[static_cast<std::size_t>('A' + i)] = static_cast<std::int8_t>(10 + i);
  return t;
}

// Crockford: case-insensitive, I and L read as 1, O reads as 0. U is not a symbol.
constexpr DigitTable make_base32_table() {
  DigitTable t = make_table(kBase32Alphabet);
  for (std::size_t i = 0; i < kBase32Alphabet.size(); ++i) {
    const char c = kBase32Alphabet[i];
    if (c >= 'A' && c <= 'Z') {
      t[static_cast<unsigned char>(c - 'A' + 'a')] = static_cast<std::int8_t>(i);
    }
  }
  for (const char c : {'I', 'i', 'L', 'l'}) t[static_cast<unsigned char>(c)] = 1;
  for (const char c : {'O', 'o'}) t[static_cast<unsigned char>(c)] = 0;
  return t;
}

inline constexpr DigitTable kHexTable = make_hex_table();
inline constexpr DigitTable kBase32Table = make_base32_table();

}  // namespace flurry::internal

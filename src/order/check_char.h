// Internal: the check characters of order numbers, over the numeric values of the characters
// they protect (decimal digits 0-9, or Crockford base32 symbols 0-31).
//
//   Luhn (ISO/IEC 7812-1): decimal. Catches every single-digit error and every adjacent
//     transposition except 09 <-> 90.
//   Damm (H. M. Damm, 2004; the totally anti-symmetric quasigroup of order 10 from his thesis):
//     decimal. Catches every single-digit error and every adjacent transposition, including those
//     that involve the check digit itself.
//   Crockford mod 37: the value of the base-32 symbols taken as one number, modulo 37, written
//     with Crockford's check symbols (0-9 A-Z without I L O U for 0-31, then * ~ $ = U for
//     32-36). 37 is prime and neither 32 nor 31 is a multiple of it, so every single-symbol error
//     and every adjacent transposition changes the remainder.
#pragma once

#include <cstdint>
#include <span>

namespace flurry::internal {

// The Luhn check digit (0-9) to append to `digits`.
[[nodiscard]] std::uint8_t luhn_check(std::span<const std::uint8_t> digits) noexcept;
// The Damm check digit (0-9) to append to `digits`.
[[nodiscard]] std::uint8_t damm_check(std::span<const std::uint8_t> digits) noexcept;
// Crockford's check value (0-36) for base-32 `symbols`, most significant first.
[[nodiscard]] std::uint8_t mod37_check(std::span<const std::uint8_t> symbols) noexcept;

// Crockford's 37 check symbols: the 32 base32 symbols, then * ~ $ = U.
inline constexpr char kMod37Symbols[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ*~$=U";

}  // namespace flurry::internal

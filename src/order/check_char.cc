#include "check_char.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace flurry::internal {
namespace {

// Damm's weakly totally anti-symmetric quasigroup of order 10 (zero diagonal).
constexpr std::array<std::array<std::uint8_t, 10>, 10> kDamm = {{
    {0, 3, 1, 7, 5, 9, 8, 6, 4, 2},
    {7, 0, 9, 2, 1, 5, 4, 8, 6, 3},
    {4, 2, 0, 6, 8, 7, 1, 3, 5, 9},
    {1, 7, 5, 0, 9, 8, 3, 4, 2, 6},
    {6, 1, 2, 3, 0, 4, 5, 9, 7, 8},
    {3, 6, 7, 4, 2, 0, 9, 5, 8, 1},
    {5, 8, 6, 9, 7, 2, 0, 1, 3, 4},
    {8, 9, 4, 5, 3, 6, 2, 0, 1, 7},
    {9, 4, 3, 8, 6, 1, 7, 2, 0, 5},
    {2, 5, 8, 1, 4, 3, 6, 7, 9, 0},
}};

}  // namespace

std::uint8_t luhn_check(std::span<const std::uint8_t> digits) noexcept {
  // The check digit will be the rightmost: the digit left of it is doubled, then every second.
  unsigned sum = 0;
  bool twice = true;
  for (std::size_t i = digits.size(); i-- > 0; twice = !twice) {
    unsigned d = digits[i];
    if (twice) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return static_cast<std::uint8_t>((10 - sum % 10) % 10);
}

std::uint8_t damm_check(std::span<const std::uint8_t> digits) noexcept {
  std::uint8_t interim = 0;
  for (const std::uint8_t d : digits) interim = kDamm[interim][d];
  return interim;
}

std::uint8_t mod37_check(std::span<const std::uint8_t> symbols) noexcept {
  unsigned r = 0;
  for (const std::uint8_t s : symbols) r = (r * 32 + s) % 37;
  return static_cast<std::uint8_t>(r);
}

}  // namespace flurry::internal

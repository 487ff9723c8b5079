// Internal: numbers read from outside input and written into messages. The one decimal
// unsigned-integer parser and the one milliseconds formatter of the project: the core, the
// registry, the server and the command-line tool all go through them.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "flurry/clock.h"

namespace flurry::internal {

// Why parse_uint() refused its text.
enum class UintError {
  kNone,
  kEmpty,      // no characters at all
  kNotDigits,  // a character other than 0-9 (a sign, a space, a decimal point, ...)
  kTooLarge,   // only digits, but above the maximum (or above 2^64 - 1)
};

struct ParsedUint {
  std::uint64_t value = 0;  // 0 unless ok()
  UintError error = UintError::kNone;

  [[nodiscard]] bool ok() const noexcept { return error == UintError::kNone; }
};

// A decimal unsigned integer that fills `text`: one or more digits 0-9 and nothing else (no
// sign, space or prefix; leading zeros allowed), at most `max`.
[[nodiscard]] ParsedUint parse_uint(
    std::string_view text, std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) noexcept;

// Whole milliseconds in `d`, truncated toward zero.
[[nodiscard]] constexpr std::int64_t to_millis(Nanos d) noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// `d` in milliseconds for a message: "250 ms", or with one decimal (truncated toward zero) when
// it is not a whole number of them: "0.5 ms", "-1.2 ms", "0.0 ms" for 50 us.
[[nodiscard]] std::string millis_text(Nanos d);

}  // namespace flurry::internal

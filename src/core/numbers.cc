#include "core/numbers.h"

namespace flurry::internal {

ParsedUint parse_uint(std::string_view text, std::uint64_t max) noexcept {
  if (text.empty()) return {0, UintError::kEmpty};
  for (const char c : text) {
    if (c < '0' || c > '9') return {0, UintError::kNotDigits};
  }
  std::uint64_t value = 0;
  for (const char c : text) {
    if (__builtin_mul_overflow(value, std::uint64_t{10}, &value) ||
        __builtin_add_overflow(value, static_cast<std::uint64_t>(c - '0'), &value)) {
      return {0, UintError::kTooLarge};
    }
  }
  if (value > max) return {0, UintError::kTooLarge};
  return {value, UintError::kNone};
}

std::string millis_text(Nanos d) {
  const std::int64_t ns = d.count();
  // The magnitude as unsigned, so that the most negative count has one too.
  const std::uint64_t magnitude =
      ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  std::string out = ns < 0 ? "-" : "";
  out += std::to_string(magnitude / 1'000'000);
  if (const std::uint64_t rest = magnitude % 1'000'000; rest != 0) {
    out += '.';
    out += static_cast<char>('0' + rest / 100'000);
  }
  return out + " ms";
}

}  // namespace flurry::internal

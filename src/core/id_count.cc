// IdCount: see include/flurry/id_count.h.
#include "flurry/id_count.h"

#include <algorithm>
#include <string>

#include "numbers.h"
#include "quote.h"

namespace flurry {
namespace {

std::string param(std::string_view field) {
  return "parameter \"" + std::string(field) + "\"";
}

Status too_large(std::string_view field, std::string_view shown, std::uint64_t max) {
  return InvalidArgument(param(field) + ": " + std::string(shown) + " is more than max_batch (" +
                         std::to_string(max) + ")");
}

}  // namespace

Result<IdCount> IdCount::of(std::uint64_t n, std::uint64_t max, std::string_view field) {
  max = std::min(max, kMaxIdCount);
  if (n == 0) return InvalidArgument(param(field) + ": 0 is too small (at least 1)");
  if (n > max) return too_large(field, std::to_string(n), max);
  return IdCount(n);
}

Result<IdCount> IdCount::parse(std::string_view text, std::uint64_t max, std::string_view field) {
  max = std::min(max, kMaxIdCount);
  const auto range = [max] { return "a whole number from 1 to " + std::to_string(max); };
  if (text.empty()) return InvalidArgument(param(field) + " is empty; expected " + range());
  const internal::ParsedUint n = internal::parse_uint(text, max);
  if (n.error == internal::UintError::kNotDigits) {
    return InvalidArgument(param(field) + ": " + internal::quote(text) + " is not " + range());
  }
  if (n.error == internal::UintError::kTooLarge) {
    // Digits only: shown as they are unless too long to read.
    return too_large(field, text.size() <= 20 ? std::string(text) : internal::quote(text), max);
  }
  return of(n.value, max, field);
}

}  // namespace flurry

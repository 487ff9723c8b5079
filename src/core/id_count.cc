// IdCount: see include/flurry/id_count.h.
#include "flurry/id_count.h"

#include <algorithm>
#include <string>

#include "core/numbers.h"
#include "core/quote.h"

namespace flurry {
namespace {

Status too_large(const FieldName& field, std::string_view shown, std::uint64_t max) {
  return InvalidArgument(field.words() + ": " + std::string(shown) + " is more than max_batch (" +
                         std::to_string(max) + ")");
}

}  // namespace

std::string FieldName::words() const {
  if (kind.empty()) return std::string(name);
  std::string out(kind);
  out += " \"";
  out += name;
  out += '"';
  return out;
}

Result<IdCount> IdCount::of(std::uint64_t n, std::uint64_t max, FieldName field) {
  max = std::min(max, kMaxIdCount);
  if (n == 0) return InvalidArgument(field.words() + ": 0 is too small (at least 1)");
  if (n > max) return too_large(field, std::to_string(n), max);
  return IdCount(n);
}

Result<IdCount> IdCount::parse(std::string_view text, std::uint64_t max, FieldName field) {
  max = std::min(max, kMaxIdCount);
  const auto range = [max] { return "a whole number from 1 to " + std::to_string(max); };
  if (text.empty()) return InvalidArgument(field.words() + " is empty; expected " + range());
  const internal::ParsedUint n = internal::parse_uint(text, max);
  if (n.error == internal::UintError::kNotDigits) {
    return InvalidArgument(field.words() + ": " + internal::quote(text) + " is not " + range());
  }
  if (n.error == internal::UintError::kTooLarge) {
    // Digits only: shown as they are unless too long to read.
    return too_large(field, text.size() <= 20 ? std::string(text) : internal::quote(text), max);
  }
  return of(n.value, max, field);
}

}  // namespace flurry

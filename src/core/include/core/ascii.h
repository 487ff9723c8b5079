// Internal: ASCII helpers for protocol tokens (HTTP header values, gRPC metadata, scheme names).
#pragma once

#include <cstddef>
#include <string_view>

namespace flurry::internal {

// ASCII case-insensitive equality ("Bearer" == "bearer"); other bytes compare exactly.
[[nodiscard]] constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace flurry::internal

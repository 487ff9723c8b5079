#include "core/utf8.h"

#include <cstdint>

namespace flurry::internal {

std::size_t utf8_sequence_length(std::string_view text) noexcept {
  if (text.empty()) return 0;
  const auto lead = static_cast<unsigned char>(text[0]);
  if (lead < 0x80) return 1;
  std::size_t len = 0;
  std::uint32_t cp = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    len = 2;
    cp = lead & 0x1fU;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    len = 3;
    cp = lead & 0x0fU;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    len = 4;
    cp = lead & 0x07U;
  } else {
    return 0;  // a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5 and above
  }
  if (text.size() < len) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto c = static_cast<unsigned char>(text[k]);
    if ((c & 0xc0U) != 0x80U) return 0;
    cp = (cp << 6) | (c & 0x3fU);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

std::size_t invalid_utf8_at(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t len = utf8_sequence_length(text.substr(i));
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace flurry::internal

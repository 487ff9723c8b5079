// Internal: quoting outside input inside error messages, so a message stays one readable
// line whatever bytes the input held.
#pragma once

#include <string>
#include <string_view>

namespace flurry::internal {

// `"text"` with quotes, backslashes, control and non-ASCII bytes escaped (\xNN), cut short
// with "..." after 64 bytes.
[[nodiscard]] std::string quote(std::string_view text);
// `'c'` with the same escaping.
[[nodiscard]] std::string quote_char(char c);

}  // namespace flurry::internal

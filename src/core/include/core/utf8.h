// Internal: UTF-8 validation (RFC 3629), the one copy for the whole project: the config reader,
// the segment stores (tag descriptions) and the server's JSON writer check text through it.
#pragma once

#include <cstddef>
#include <string_view>

namespace flurry::internal {

// The length (1 to 4) of the UTF-8 sequence `text` starts with, or 0 when it starts with no
// valid one (empty text, a stray continuation byte, a truncated sequence, an overlong form, a
// surrogate, a code point above U+10FFFF; PostgreSQL refuses the same).
[[nodiscard]] std::size_t utf8_sequence_length(std::string_view text) noexcept;

// The position of the first byte of `text` that is not part of valid UTF-8, or npos.
[[nodiscard]] std::size_t invalid_utf8_at(std::string_view text) noexcept;

}  // namespace flurry::internal

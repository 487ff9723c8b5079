// Text encodings of a 64-bit ID. Pure functions, thread-safe.
//
//   decimal  "1234567890"        default; JSON APIs send it as a string (JavaScript numbers
//                                 lose precision above 2^53)
//   hex      "00000000499602d2"  fixed 16 lower-case digits, sorts like the number
//   base32   "00000014SC0PJ"     Crockford's alphabet, fixed 13 characters, sorts like the number
//   base62   "1LY7VK"            0-9A-Za-z, shortest form (for URLs); not fixed width
//
// Every encode/decode pair is an exact inverse over all 2^64 values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry {

enum class Encoding { kDecimal, kHex, kBase32, kBase62 };

struct EncodingInfo {
  Encoding encoding;
  std::string_view name;         // what to_string() returns and parse_encoding() accepts
  std::string_view alias;        // also accepted by parse_encoding(), or empty
  std::string_view description;  // one line, for help texts
};

// The encodings, in documentation order (decimal, the default, first). Every place that lists,
// parses or writes every encoding uses this list.
inline constexpr std::array<EncodingInfo, 4> kEncodings = {{
    {Encoding::kDecimal, "dec", "decimal", "decimal digits, the default"},
    {Encoding::kHex, "hex", "", "16 lower-case hex digits, sorts like the number"},
    {Encoding::kBase32, "base32", "", "Crockford's base32, 13 characters, sorts like the number"},
    {Encoding::kBase62, "base62", "", "0-9A-Za-z, shortest form (for URLs), not fixed width"},
}};

// A name or alias in kEncodings (case-sensitive). INVALID_ARGUMENT otherwise.
[[nodiscard]] Result<Encoding> parse_encoding(std::string_view name);
// The name in kEncodings: "dec", "hex", "base32", "base62".
[[nodiscard]] std::string_view to_string(Encoding encoding) noexcept;
// The names of kEncodings for messages and help texts: "dec, hex, base32 or base62"; with
// `aliases`, each alias after its name ("dec, decimal, hex, base32 or base62").
[[nodiscard]] std::string encoding_names(bool aliases = false);

[[nodiscard]] std::string encode_id(std::uint64_t id, Encoding encoding);

// The longest text encode_id produces (20 decimal digits).
inline constexpr std::size_t kMaxEncodedIdLength = 20;
// Writes the same text as encode_id to `out`, which must have room for kMaxEncodedIdLength
// characters, and returns the end of what it wrote. No allocation: for response bodies.
char* write_id(char* out, std::uint64_t id, Encoding encoding) noexcept;

// Parses text written by encode_id (and its lenient variants: hex in either case with an
// optional "0x" prefix and without zero padding; base32 in either case with Crockford's
// aliases I/L -> 1 and O -> 0, hyphens ignored, and without zero padding). Rejects an empty
// string, text that is too long, a bad character (naming it and its position) and values that
// overflow 64 bits, with INVALID_ARGUMENT.
[[nodiscard]] Result<std::uint64_t> decode_id(std::string_view text, Encoding encoding);

}  // namespace flurry

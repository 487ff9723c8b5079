// Internal: percent-decoding (RFC 3986, section 2.1). The one decoder of the project: the HTTP
// API's query strings and path segments (src/http/query.cc) and the user information and
// parameters of PostgreSQL URLs (src/db/postgres_conninfo.cc) go through it.
#pragma once

#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry::internal {

// What a '+' stands for: itself (RFC 3986: a path, a URL's user information, libpq's URLs), or a
// space (HTML forms' application/x-www-form-urlencoded, as query strings use it). The caller
// says which; there is no default.
enum class PlusSign { kPlus, kSpace };

// `in` with every "%XX" (X a hex digit, either case) replaced by the byte it stands for, and '+'
// as `plus` says, written to `out` (its contents replaced; its capacity kept, so decoding into a
// warm string allocates nothing). Every other byte is copied as it is: this decodes, it does
// not check which characters a URI may hold. "%00" decodes to a NUL byte; a caller that cannot
// take one refuses it itself.
// INVALID_ARGUMENT / BAD_INPUT for a '%' not followed by two hex digits, never passed through:
// the message names the escape and its offset ("bad percent-encoding at byte 3: "%zz" is not
// '%' and two hex digits") and shows nothing else of `in`. `out` is then unspecified.
// Thread-safe (a pure function).
[[nodiscard]] Status percent_decode(std::string_view in, std::string& out, PlusSign plus);

}  // namespace flurry::internal

// The C++ client's decoder of a refill's text answer (GET /v1/ids?format=text): one decimal ID per
// line. Pure; the hot part of a refill (~330 KB parsed while callers use the other half of the
// buffer).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace flurry::client_internal {

// The IDs of a text answer, one decimal per line (LF or CRLF; empty lines skipped), into `out`.
// False for anything else: a character that is no digit, a number of 2^64 or more.
[[nodiscard]] bool parse_text_ids(std::string_view body, std::vector<std::uint64_t>& out);

}  // namespace flurry::client_internal

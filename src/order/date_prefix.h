// Internal: the YYMMDD date prefix of an order number.
#pragma once

#include <array>
#include <cstdint>

#include "flurry/status.h"

namespace flurry::internal {

// The calendar date of `unix_ms` at a fixed offset from UTC (minutes east), as YYMMDD.
// INVALID_ARGUMENT for dates outside 2000-01-01..2099-12-31, which two year digits cannot tell
// apart.
[[nodiscard]] Result<std::array<char, 6>> yymmdd(std::int64_t unix_ms, int utc_offset_minutes);

}  // namespace flurry::internal

// ISO-8601 UTC text for wall-clock times. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/clock.h"
#include "flurry/status.h"

namespace flurry {

// Formats as "YYYY-MM-DDTHH:MM:SS.mmmZ" (milliseconds, truncated towards the past).
[[nodiscard]] std::string format_time(TimePoint t);

// format_time of a count of milliseconds since 1970 that came from outside (a store, a registry,
// a UUIDv7 or ULID): one a TimePoint cannot hold (before 1677 or after 2262) is written as
// "unix_ms N" instead of overflowing.
[[nodiscard]] std::string format_unix_ms(std::int64_t unix_ms);

// Parses "YYYY-MM-DD", "YYYY-MM-DDZ", "YYYY-MM-DDTHH:MM[:SS[.fraction]]Z" (the trailing Z is
// required when a time of day is given: flurry only speaks UTC), or an integer count of
// milliseconds since the Unix epoch. Rejects anything else with INVALID_ARGUMENT saying what is
// wrong. Fractions beyond nanoseconds are rejected rather than rounded.
[[nodiscard]] Result<TimePoint> parse_time(std::string_view text);

}  // namespace flurry

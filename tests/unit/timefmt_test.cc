#include "flurry/timefmt.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>

namespace flurry {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TimePoint from_ms(std::int64_t ms) {
  return TimePoint(milliseconds(ms));
}
TimePoint from_ns(std::int64_t ns) {
  return TimePoint(nanoseconds(ns));
}

std::int64_t ns_of(TimePoint t) {
  return t.time_since_epoch().count();
}

// Parses text that must be accepted and returns its nanoseconds since the Unix epoch.
std::int64_t parse_ns(std::string_view text) {
  const Result<TimePoint> r = parse_time(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().to_string();
  return r.ok() ? ns_of(*r) : INT64_MIN;
}

// Expects text to be rejected with INVALID_ARGUMENT whose message names the text and contains
// `cause`.
void expect_rejected(std::string_view text, std::string_view cause) {
  const Result<TimePoint> r = parse_time(text);
  ASSERT_FALSE(r.ok()) << "accepted \"" << text << "\" as " << format_time(*r);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
  EXPECT_EQ(r.status().reason(), Reason::kBadInput) << text;
  const std::string msg = r.status().message();  // status() returns a copy
  EXPECT_EQ(msg.rfind("bad time \"", 0), 0u) << msg;
  EXPECT_NE(msg.find(cause), std::string::npos) << "message: " << msg << "\nwanted: " << cause;
}

constexpr std::int64_t kMs = 1'000'000;  // nanoseconds per millisecond

// --- format_time -------------------------------------------------------------------------------

TEST(FormatTimeTest, UnixEpoch) {
  EXPECT_EQ(format_time(from_ns(0)), "1970-01-01T00:00:00.000Z");
}

TEST(FormatTimeTest, TwitterEpoch) {
  EXPECT_EQ(format_time(from_ms(1288834974657)), "2010-11-04T01:42:54.657Z");
}

TEST(FormatTimeTest, FlurryEpoch) {
  EXPECT_EQ(format_time(from_ms(1735689600000)), "2025-01-01T00:00:00.000Z");
}

TEST(FormatTimeTest, LeapDay) {
  EXPECT_EQ(format_time(from_ms(951825600000)), "2000-02-29T12:00:00.000Z");
}

TEST(FormatTimeTest, TruncatesSubMillisecondTowardsThePast) {
  EXPECT_EQ(format_time(from_ns(1288834974657 * kMs + 999'999)), "2010-11-04T01:42:54.657Z");
  EXPECT_EQ(format_time(from_ns(999'999)), "1970-01-01T00:00:00.000Z");
}

TEST(FormatTimeTest, BeforeUnixEpochTruncatesTowardsThePast) {
  EXPECT_EQ(format_time(from_ms(-1)), "1969-12-31T23:59:59.999Z");
  // One nanosecond before 1970 is still in the millisecond 23:59:59.999.
  EXPECT_EQ(format_time(from_ns(-1)), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(format_time(from_ns(-1'000'001)), "1969-12-31T23:59:59.998Z");
  EXPECT_EQ(format_time(from_ms(-2208988800000)), "1900-01-01T00:00:00.000Z");
  EXPECT_EQ(format_time(from_ms(-2208988800000 - 1)), "1899-12-31T23:59:59.999Z");
}

TEST(FormatTimeTest, RepresentableExtremes) {
  EXPECT_EQ(format_time(TimePoint::min()), "1677-09-21T00:12:43.145Z");
  EXPECT_EQ(format_time(TimePoint::max()), "2262-04-11T23:47:16.854Z");
}

// --- parse_time: accepted forms ----------------------------------------------------------------

TEST(ParseTimeTest, DateOnly) {
  EXPECT_EQ(parse_ns("2025-01-01"), 1735689600000 * kMs);
  EXPECT_EQ(parse_ns("2025-01-01Z"), 1735689600000 * kMs);
  EXPECT_EQ(parse_ns("1970-01-01"), 0);
}

TEST(ParseTimeTest, FullTimestamp) {
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.657Z"), 1288834974657 * kMs);
}

TEST(ParseTimeTest, MinutesAndSecondsOptional) {
  EXPECT_EQ(parse_ns("2010-11-04T01:42Z"), 1288834920000 * kMs);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54Z"), 1288834974000 * kMs);
}

TEST(ParseTimeTest, FractionsOfEveryLength) {
  const std::int64_t base = 1288834974 * std::int64_t{1'000'000'000};
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.6Z"), base + 600'000'000);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.65Z"), base + 650'000'000);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.657Z"), base + 657'000'000);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.6571Z"), base + 657'100'000);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.657123Z"), base + 657'123'000);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.123456789Z"), base + 123'456'789);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.000000001Z"), base + 1);
  EXPECT_EQ(parse_ns("2010-11-04T01:42:54.000Z"), base);
}

TEST(ParseTimeTest, EndsOfRanges) {
  EXPECT_EQ(parse_ns("1999-12-31T23:59:59.999Z"), 946684799999 * kMs);
  EXPECT_EQ(parse_ns("2000-02-29"), 951782400000 * kMs);  // 2000 is a leap year
  EXPECT_EQ(parse_ns("2024-02-29"), 1709164800000 * kMs);
  EXPECT_EQ(parse_ns("2025-12-31T00:00Z"), 1767139200000 * kMs);
}

TEST(ParseTimeTest, BeforeUnixEpoch) {
  EXPECT_EQ(parse_ns("1969-12-31T23:59:59.999Z"), -1 * kMs);
  EXPECT_EQ(parse_ns("1969-12-31T23:59:59.999999999Z"), -1);
  EXPECT_EQ(parse_ns("1900-01-01"), -2208988800000 * kMs);
}

TEST(ParseTimeTest, RepresentableExtremes) {
  EXPECT_EQ(parse_ns("1677-09-21T00:12:43.145224192Z"), INT64_MIN);
  EXPECT_EQ(parse_ns("2262-04-11T23:47:16.854775807Z"), INT64_MAX);
  // The first and last whole milliseconds inside the range.
  EXPECT_EQ(parse_ns("1677-09-21T00:12:43.146Z"), -9223372036854 * kMs);
  EXPECT_EQ(parse_ns("2262-04-11T23:47:16.854Z"), 9223372036854 * kMs);
}

TEST(ParseTimeTest, IntegerMilliseconds) {
  EXPECT_EQ(parse_ns("0"), 0);
  EXPECT_EQ(parse_ns("-0"), 0);
  EXPECT_EQ(parse_ns("1288834974657"), 1288834974657 * kMs);
  EXPECT_EQ(parse_ns("-1"), -1 * kMs);
  EXPECT_EQ(parse_ns("-2208988800000"), -2208988800000 * kMs);
  EXPECT_EQ(parse_ns("0001288834974657"), 1288834974657 * kMs);  // leading zeros are fine
  // The largest counts that fit in TimePoint.
  EXPECT_EQ(parse_ns("9223372036854"), 9223372036854 * kMs);
  EXPECT_EQ(parse_ns("-9223372036854"), -9223372036854 * kMs);
}

// --- round trips -------------------------------------------------------------------------------

TEST(TimeRoundTripTest, FormatThenParseIsExactForWholeMilliseconds) {
  std::mt19937_64 rng(20250101);
  // Whole milliseconds across the whole representable range, both sides of 1970.
  std::uniform_int_distribution<std::int64_t> dist(-9223372036854, 9223372036854);
  for (int i = 0; i < 20000; ++i) {
    const TimePoint t = from_ms(dist(rng));
    const std::string text = format_time(t);
    ASSERT_EQ(text.size(), 24u) << text;
    const Result<TimePoint> back = parse_time(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status().to_string();
    ASSERT_EQ(ns_of(*back), ns_of(t)) << text;
  }
}

TEST(TimeRoundTripTest, ParseOfFormatFloorsToTheMillisecond) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> dist(INT64_MIN + kMs, INT64_MAX);
  for (int i = 0; i < 20000; ++i) {
    const TimePoint t = from_ns(dist(rng));
    const Result<TimePoint> back = parse_time(format_time(t));
    ASSERT_TRUE(back.ok()) << format_time(t);
    const std::int64_t want = std::chrono::floor<milliseconds>(t.time_since_epoch()).count() * kMs;
    ASSERT_EQ(ns_of(*back), want) << format_time(t);
  }
}

TEST(TimeRoundTripTest, IntegerFormAgreesWithCalendarForm) {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<std::int64_t> dist(-9223372036854, 9223372036854);
  for (int i = 0; i < 5000; ++i) {
    const std::int64_t ms = dist(rng);
    ASSERT_EQ(parse_ns(std::to_string(ms)), parse_ns(format_time(from_ms(ms)))) << ms;
  }
}

// --- parse_time: rejections --------------------------------------------------------------------

TEST(ParseTimeRejectTest, Empty) {
  expect_rejected("", "empty");
}

TEST(ParseTimeRejectTest, MonthOutOfRange) {
  const Result<TimePoint> r = parse_time("2025-13-01");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "bad time \"2025-13-01\": month 13 is out of range 1-12");
  expect_rejected("2025-00-10", "month 0 is out of range 1-12");
}

TEST(ParseTimeRejectTest, DayOutOfRangeForMonth) {
  const Result<TimePoint> r = parse_time("2025-02-30");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "bad time \"2025-02-30\": day 30 is out of range 1-28 for February 2025");
  expect_rejected("2025-02-29", "day 29 is out of range 1-28 for February 2025");
  expect_rejected("1900-02-29", "day 29 is out of range 1-28 for February 1900");
  expect_rejected("2024-02-30", "day 30 is out of range 1-29 for February 2024");
  expect_rejected("2025-04-31", "day 31 is out of range 1-30 for April 2025");
  expect_rejected("2025-01-32", "day 32 is out of range 1-31 for January 2025");
  expect_rejected("2025-01-00", "day 0 is out of range 1-31 for January 2025");
}

TEST(ParseTimeRejectTest, TimeOfDayOutOfRange) {
  expect_rejected("2025-01-01T24:00Z", "hour 24 is out of range 0-23");
  expect_rejected("2025-01-01T23:60Z", "minute 60 is out of range 0-59");
  expect_rejected("2025-01-01T23:59:60Z", "second 60 is out of range 0-59");
}

TEST(ParseTimeRejectTest, TimeOfDayWithoutZ) {
  const Result<TimePoint> r = parse_time("2025-01-01T10:00");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "bad time \"2025-01-01T10:00\": a time of day needs a trailing 'Z' (UTC)");
  expect_rejected("2025-01-01T10:00:00", "needs a trailing 'Z' (UTC)");
  expect_rejected("2025-01-01T10:00:00.5", "needs a trailing 'Z' (UTC)");
  expect_rejected("2025-01-01T10:00:00z", "needs a trailing 'Z' (UTC)");
}

TEST(ParseTimeRejectTest, TimeZoneOffset) {
  expect_rejected("2025-01-01T10:00:00+01:00", "time-zone offsets are not accepted");
  expect_rejected("2025-01-01T10:00-05:00", "time-zone offsets are not accepted");
}

TEST(ParseTimeRejectTest, FractionTooLongOrEmpty) {
  expect_rejected("2025-01-01T00:00:00.1234567890Z", "more than 9 digits");
  expect_rejected("2025-01-01T00:00:00.Z", "expected digits after '.'");
}

TEST(ParseTimeRejectTest, TrailingGarbage) {
  expect_rejected("2025-01-01Zx", "unexpected trailing text starting with 'x' at position 11");
  expect_rejected("2025-01-01T00:00ZZ",
                  "unexpected trailing text starting with 'Z' at position 17");
  expect_rejected("2025-01-01x", "unexpected character 'x' at position 10");
  expect_rejected("2025-01-01 00:00Z", "unexpected character ' ' at position 10");
  expect_rejected("12345x", "unexpected character 'x' at position 5");
  expect_rejected("12 ", "unexpected character ' ' at position 2");
}

TEST(ParseTimeRejectTest, MalformedFields) {
  expect_rejected("2025-1-01", "expected a 2-digit month, found '-' at position 6");
  expect_rejected("2025-01-1", "expected a 2-digit day, but the text ends at position 9");
  expect_rejected("2025/01/01", "expected a date");
  expect_rejected("2025-01-01T", "expected a 2-digit hour, but the text ends at position 11");
  expect_rejected("2025-01-01T1:00Z", "expected a 2-digit hour, found ':' at position 12");
  expect_rejected("2025-01-01T10Z", "expected ':' after the hour, found 'Z' at position 13");
  expect_rejected("2025-01-01T10:0Z", "expected a 2-digit minute");
  expect_rejected("2025-01-01T10:00:Z", "expected a 2-digit second");
  expect_rejected("2025-01", "expected '-' after the month, but the text ends");
}

TEST(ParseTimeRejectTest, NotATime) {
  expect_rejected("now", "expected a date");
  expect_rejected(" 2025-01-01", "expected a date");
  expect_rejected("+5", "expected a date");
  expect_rejected("-", "expected digits after '-'");
  expect_rejected("--5", "unexpected character '-' at position 1");
}

TEST(ParseTimeRejectTest, IntegerOverflow) {
  expect_rejected("9223372036854775808", "overflows 64 bits");
  expect_rejected("-9223372036854775809", "overflows 64 bits");
  expect_rejected("99999999999999999999999999", "overflows 64 bits");
  // Fits in 64 bits of milliseconds but not in TimePoint's nanoseconds.
  expect_rejected("9223372036855", "outside the representable range");
  expect_rejected("-9223372036855", "outside the representable range");
  expect_rejected("9223372036854775807", "outside the representable range");
  expect_rejected("-9223372036854775808", "outside the representable range");
}

TEST(ParseTimeRejectTest, CalendarOutsideRepresentableRange) {
  const Result<TimePoint> r = parse_time("2300-01-01");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "bad time \"2300-01-01\": the time is outside the representable range "
            "1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z");
  expect_rejected("1600-01-01", "outside the representable range");
  expect_rejected("2262-04-11T23:47:16.854775808Z", "outside the representable range");
  expect_rejected("1677-09-21T00:12:43.145224191Z", "outside the representable range");
  expect_rejected("1677-09-21T00:12:43.145Z", "outside the representable range");
  expect_rejected("1677-09-21", "outside the representable range");
  expect_rejected("2262-04-12", "outside the representable range");
  expect_rejected("0000-01-01", "outside the representable range");
  expect_rejected("9999-12-31T23:59:59.999999999Z", "outside the representable range");
}

TEST(ParseTimeRejectTest, MessageEscapesAndShortensTheText) {
  const Result<TimePoint> r = parse_time(std::string_view("2025-01-01\n", 11));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "bad time \"2025-01-01\\x0a\": unexpected character '\\x0a' at position 10 after the "
            "date (expected 'T', 'Z' or the end)");
  const std::string long_text = "2025-01-01Z" + std::string(1000, 'x');
  const Result<TimePoint> l = parse_time(long_text);
  ASSERT_FALSE(l.ok());
  EXPECT_LT(l.status().message().size(), 200u);
  EXPECT_NE(l.status().message().find("...\""), std::string::npos);
}

}  // namespace
TEST(FormatUnixMsTest, WritesTimesATimePointHoldsAndNamesTheRest) {
  EXPECT_EQ(format_unix_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_unix_ms(1735689600123), "2025-01-01T00:00:00.123Z");
  EXPECT_EQ(format_unix_ms(-1), "1969-12-31T23:59:59.999Z");
  // Past 2262 and before 1677: no TimePoint holds them (a store or a ULID may still say so).
  EXPECT_EQ(format_unix_ms(281474976710655), "unix_ms 281474976710655");
  EXPECT_EQ(format_unix_ms(-9300000000000), "unix_ms -9300000000000");
  EXPECT_EQ(format_unix_ms(std::numeric_limits<std::int64_t>::max()),
            "unix_ms 9223372036854775807");
}

}  // namespace flurry

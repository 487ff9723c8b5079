// The core's shared internal helpers: quoting outside input, the decimal unsigned-integer
// parser and the milliseconds formatter.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "core/numbers.h"
#include "core/quote.h"

namespace flurry::internal {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(QuoteTest, PlainTextIsQuotedAsIs) {
  EXPECT_EQ(quote(""), R"("")");
  EXPECT_EQ(quote("flurry"), R"("flurry")");
  EXPECT_EQ(quote("it's"), R"("it's")");  // the other quote needs no escape
}

TEST(QuoteTest, EscapesTheDelimiterBackslashControlAndNonAscii) {
  EXPECT_EQ(quote(R"(a"b)"), R"("a\"b")");
  EXPECT_EQ(quote(R"(a\b)"), R"("a\\b")");
  EXPECT_EQ(quote("a\nb\r\t"), R"("a\x0ab\x0d\x09")");
  EXPECT_EQ(quote(std::string("a\0b", 3)), R"("a\x00b")");
  EXPECT_EQ(quote("\x7f\x1b"), R"("\x7f\x1b")");
  EXPECT_EQ(quote("caf\xc3\xa9"), R"("caf\xc3\xa9")");
}

TEST(QuoteTest, CutsShortAfterMaxBytes) {
  const std::string a64(64, 'a');
  EXPECT_EQ(quote(a64), "\"" + a64 + "\"");
  EXPECT_EQ(quote(a64 + "b"), "\"" + a64 + "...\"");
  EXPECT_EQ(quote(std::string(100000, 'x')).size(), 64u + 5u);
  EXPECT_EQ(quote("abcdef", 3), R"("abc...")");
  EXPECT_EQ(quote("abc", 3), R"("abc")");
  EXPECT_EQ(quote("abc", 0), R"("...")");
  // The limit counts input bytes, not escaped output.
  EXPECT_EQ(quote("\n\n\n\n", 2), R"("\x0a\x0a...")");
}

TEST(QuoteTest, QuoteCharEscapesItsOwnDelimiter) {
  EXPECT_EQ(quote_char('x'), "'x'");
  EXPECT_EQ(quote_char('\''), R"('\'')");
  EXPECT_EQ(quote_char('"'), R"('"')");
  EXPECT_EQ(quote_char('\\'), R"('\\')");
  EXPECT_EQ(quote_char('\0'), R"('\x00')");
  EXPECT_EQ(quote_char('\xff'), R"('\xff')");
}

// Credentials in a URL or an endpoint never reach a message (issue 32).
TEST(QuoteTest, QuoteRedactedHidesUserInformationAndSecretParameters) {
  EXPECT_EQ(quote_redacted("http://user:Secret1@h:2379"), R"("http://***@h:2379")");
  EXPECT_EQ(quote_redacted("user:Secret2@h:2379"), R"("***@h:2379")");
  EXPECT_EQ(quote_redacted("https://a@b:Secret3@h:1/x"), R"("https://***@h:1/x")");
  EXPECT_EQ(quote_redacted("a:1, http://u:Secret4@b:2,,c:3"), R"("a:1, http://***@b:2,,c:3")");
  EXPECT_EQ(quote_redacted("http://h:1/?user=u&password=Secret5&sslmode=x"),
            R"("http://h:1/?user=u&password=***&sslmode=x")");
  EXPECT_EQ(quote_redacted("http://h:1?Token=Secret6"), R"("http://h:1?Token=***")");
  // Nothing to hide: as quote().
  for (std::string_view plain : {"", "h:2379", "http://h:2379/", "a:1,b:2", "x\n\"y"}) {
    EXPECT_EQ(quote_redacted(plain), quote(plain)) << plain;
  }
  EXPECT_EQ(quote_redacted("http://u:Secret7@" + std::string(100, 'h'), 10), R"("http://***...")");
}

TEST(ParseUintTest, Accepts) {
  EXPECT_EQ(parse_uint("0").value, 0u);
  EXPECT_EQ(parse_uint("42").value, 42u);
  EXPECT_EQ(parse_uint("007").value, 7u);
  EXPECT_EQ(parse_uint("18446744073709551615").value, std::numeric_limits<std::uint64_t>::max());
  EXPECT_TRUE(parse_uint("63", 63).ok());
  EXPECT_EQ(parse_uint("63", 63).value, 63u);
}

TEST(ParseUintTest, SaysWhy) {
  EXPECT_EQ(parse_uint("").error, UintError::kEmpty);
  for (const char* text : {"-1", "+1", " 1", "1 ", "1.5", "0x10", "1e3", "abc", "١"}) {
    EXPECT_EQ(parse_uint(text).error, UintError::kNotDigits) << text;
  }
  EXPECT_EQ(parse_uint("18446744073709551616").error, UintError::kTooLarge);
  EXPECT_EQ(parse_uint("99999999999999999999999").error, UintError::kTooLarge);
  EXPECT_EQ(parse_uint("64", 63).error, UintError::kTooLarge);
  EXPECT_EQ(parse_uint("64", 63).value, 0u);
  // Not digits wins over too large: the text is not a number at all.
  EXPECT_EQ(parse_uint("99999999999999999999999x").error, UintError::kNotDigits);
}

TEST(MillisTest, ToMillisTruncatesTowardZero) {
  EXPECT_EQ(to_millis(milliseconds(1500)), 1500);
  EXPECT_EQ(to_millis(microseconds(1999)), 1);
  EXPECT_EQ(to_millis(microseconds(-1999)), -1);
  EXPECT_EQ(to_millis(seconds(3)), 3000);
}

TEST(MillisTest, MillisTextShowsOneDecimalWhenNotWhole) {
  EXPECT_EQ(millis_text(nanoseconds(0)), "0 ms");
  EXPECT_EQ(millis_text(milliseconds(250)), "250 ms");
  EXPECT_EQ(millis_text(seconds(1)), "1000 ms");
  EXPECT_EQ(millis_text(microseconds(500)), "0.5 ms");
  EXPECT_EQ(millis_text(microseconds(1250)), "1.2 ms");
  EXPECT_EQ(millis_text(microseconds(1999)), "1.9 ms");
  EXPECT_EQ(millis_text(microseconds(50)), "0.0 ms");
  EXPECT_EQ(millis_text(microseconds(-1250)), "-1.2 ms");
  EXPECT_EQ(millis_text(milliseconds(-3)), "-3 ms");
  EXPECT_EQ(millis_text(nanoseconds(std::numeric_limits<std::int64_t>::min())),
            "-9223372036854.7 ms");
}

}  // namespace
}  // namespace flurry::internal

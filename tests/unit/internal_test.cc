// The core's shared internal helpers: quoting outside input, the decimal unsigned-integer
// parser, the milliseconds formatter and the percent decoder.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "core/numbers.h"
#include "core/percent.h"
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

// ---- percent_decode (RFC 3986, section 2.1) ----

std::string decoded(std::string_view in, PlusSign plus) {
  std::string out = "left over";
  const Status st = percent_decode(in, out, plus);
  EXPECT_TRUE(st.ok()) << quote(in) << ": " << st.to_string();
  return out;
}

TEST(PercentDecodeTest, EscapesInEitherCase) {
  EXPECT_EQ(decoded("a%20b%2Fc%2fd", PlusSign::kPlus), "a b/c/d");
  EXPECT_EQ(decoded("", PlusSign::kSpace), "");
  EXPECT_EQ(decoded("%00%FF%7e", PlusSign::kSpace), std::string("\0\xff~", 3));
  EXPECT_EQ(decoded("%25%32%35", PlusSign::kPlus), "%25");  // decoded once, not twice
  // Bytes that are not escapes are copied as they are, whatever they are.
  EXPECT_EQ(decoded("caf\xc3\xa9 ?#", PlusSign::kPlus), "caf\xc3\xa9 ?#");
  // Every byte value round-trips through its escape.
  std::string all, escaped;
  for (int b = 0; b < 256; ++b) {
    all += static_cast<char>(b);
    escaped += '%';
    escaped += "0123456789ABCDEF"[b >> 4];
    escaped += "0123456789abcdef"[b & 15];
  }
  EXPECT_EQ(decoded(escaped, PlusSign::kPlus), all);
}

TEST(PercentDecodeTest, PlusIsASpaceOnlyWhenTheCallerAsks) {
  EXPECT_EQ(decoded("a+b%2B", PlusSign::kSpace), "a b+");
  EXPECT_EQ(decoded("a+b%2B", PlusSign::kPlus), "a+b+");
  EXPECT_EQ(decoded("%20+", PlusSign::kPlus), " +");
}

TEST(PercentDecodeTest, MalformedEscapesAreRefusedNamingThem) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"%", R"(at byte 0: "%")"},      {"%4", R"(at byte 0: "%4")"},
      {"a%", R"(at byte 1: "%")"},     {"%zz", R"(at byte 0: "%zz")"},
      {"%4g", R"(at byte 0: "%4g")"},  {"%%41", R"(at byte 0: "%%4")"},
      {"ab%2", R"(at byte 2: "%2")"},  {"%41%g1", R"(at byte 3: "%g1")"},
      {"% 41", R"(at byte 0: "% 4")"}, {"%+41", R"(at byte 0: "%+4")"},
      {"%-1", R"(at byte 0: "%-1")"},  {"x%\xff\xfe", R"(at byte 1: "%\xff\xfe")"},
  };
  for (const auto& [bad, where] : cases) {
    for (const PlusSign plus : {PlusSign::kPlus, PlusSign::kSpace}) {
      std::string out;
      const Status st = percent_decode(bad, out, plus);
      ASSERT_FALSE(st.ok()) << quote(bad) << " decoded to " << quote(out);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
      EXPECT_EQ(st.reason(), Reason::kBadInput) << st.to_string();
      EXPECT_EQ(st.message(),
                "bad percent-encoding " + std::string(where) + " is not '%' and two hex digits")
          << quote(bad);
    }
  }
}

// Only the escape is shown, not the rest of the text (which may be a password in a URL).
TEST(PercentDecodeTest, TheMessageShowsOnlyTheEscape) {
  std::string out;
  const Status st = percent_decode("s3cret%zzpassword", out, PlusSign::kPlus);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find("s3cret"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("password"), std::string::npos) << st.message();
}

// Decoding into a string that already has the room allocates nothing (the HTTP API's scratch).
TEST(PercentDecodeTest, KeepsTheCapacityOfItsOutput) {
  std::string out;
  out.reserve(64);
  const char* const data = out.data();
  ASSERT_TRUE(percent_decode("a%20b+c", out, PlusSign::kSpace).ok());
  EXPECT_EQ(out, "a b c");
  EXPECT_EQ(out.data(), data);
}

}  // namespace
}  // namespace flurry::internal

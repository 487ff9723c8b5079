#include "flurry/codec.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>

namespace flurry {
namespace {

constexpr std::array<Encoding, 4> kAll = {Encoding::kDecimal, Encoding::kHex, Encoding::kBase32,
                                          Encoding::kBase62};

constexpr std::uint64_t kMax = UINT64_MAX;
constexpr std::uint64_t kMaxSigned = INT64_MAX;

// Decodes text that must be accepted.
std::uint64_t decode_ok(std::string_view text, Encoding enc) {
  const Result<std::uint64_t> r = decode_id(text, enc);
  EXPECT_TRUE(r.ok()) << to_string(enc) << " \"" << text << "\": " << r.status().to_string();
  return r.ok() ? *r : 0xdeadbeefdeadbeef;
}

// Expects text to be rejected with INVALID_ARGUMENT whose message starts with the encoding's
// name and contains `cause`.
void expect_rejected(std::string_view text, Encoding enc, std::string_view prefix,
                     std::string_view cause) {
  const Result<std::uint64_t> r = decode_id(text, enc);
  ASSERT_FALSE(r.ok()) << to_string(enc) << " accepted \"" << text << "\" as " << *r;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().reason(), Reason::kBadInput);
  const std::string msg = r.status().message();  // status() returns a copy
  EXPECT_EQ(msg.rfind(prefix, 0), 0u) << "message: " << msg << "\nwanted prefix: " << prefix;
  EXPECT_NE(msg.find(cause), std::string::npos) << "message: " << msg << "\nwanted: " << cause;
}

// --- names ---------------------------------------------------------------------------------

TEST(EncodingNameTest, ParseAndPrint) {
  EXPECT_EQ(*parse_encoding("dec"), Encoding::kDecimal);
  EXPECT_EQ(*parse_encoding("decimal"), Encoding::kDecimal);
  EXPECT_EQ(*parse_encoding("hex"), Encoding::kHex);
  EXPECT_EQ(*parse_encoding("base32"), Encoding::kBase32);
  EXPECT_EQ(*parse_encoding("base62"), Encoding::kBase62);
  EXPECT_EQ(to_string(Encoding::kDecimal), "dec");
  EXPECT_EQ(to_string(Encoding::kHex), "hex");
  EXPECT_EQ(to_string(Encoding::kBase32), "base32");
  EXPECT_EQ(to_string(Encoding::kBase62), "base62");
  for (const Encoding e : kAll) EXPECT_EQ(*parse_encoding(to_string(e)), e);
}

TEST(EncodingNameTest, RejectsUnknownAndWrongCase) {
  for (const std::string_view name : {"", "Hex", "HEX", "base64", "b32", "dec ", "decimal\n"}) {
    const Result<Encoding> r = parse_encoding(name);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("unknown ID encoding \"", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find("dec, decimal, hex, base32 or base62"), std::string::npos);
  }
  EXPECT_EQ(parse_encoding("base64").status().message(),
            "unknown ID encoding \"base64\": expected dec, decimal, hex, base32 or base62");
}

// --- known vectors -------------------------------------------------------------------------

struct Vector {
  std::uint64_t id;
  std::string_view dec, hex, base32, base62;
};

constexpr std::array<Vector, 7> kVectors = {{
    {0, "0", "0000000000000000", "0000000000000", "0"},
    {1, "1", "0000000000000001", "0000000000001", "1"},
    {61, "61", "000000000000003d", "000000000001X", "z"},
    {62, "62", "000000000000003e", "000000000001Y", "10"},
    {1234567890, "1234567890", "00000000499602d2", "00000014SC0PJ", "1LY7VK"},
    {kMaxSigned, "9223372036854775807", "7fffffffffffffff", "7ZZZZZZZZZZZZ", "AzL8n0Y58m7"},
    {kMax, "18446744073709551615", "ffffffffffffffff", "FZZZZZZZZZZZZ", "LygHa16AHYF"},
}};

TEST(CodecVectorTest, Encode) {
  for (const Vector& v : kVectors) {
    EXPECT_EQ(encode_id(v.id, Encoding::kDecimal), v.dec) << v.id;
    EXPECT_EQ(encode_id(v.id, Encoding::kHex), v.hex) << v.id;
    EXPECT_EQ(encode_id(v.id, Encoding::kBase32), v.base32) << v.id;
    EXPECT_EQ(encode_id(v.id, Encoding::kBase62), v.base62) << v.id;
  }
}

TEST(CodecVectorTest, Decode) {
  for (const Vector& v : kVectors) {
    EXPECT_EQ(decode_ok(v.dec, Encoding::kDecimal), v.id) << v.dec;
    EXPECT_EQ(decode_ok(v.hex, Encoding::kHex), v.id) << v.hex;
    EXPECT_EQ(decode_ok(v.base32, Encoding::kBase32), v.id) << v.base32;
    EXPECT_EQ(decode_ok(v.base62, Encoding::kBase62), v.id) << v.base62;
  }
}

TEST(CodecVectorTest, PowersOfTwo) {
  // Each single bit lands in the right place in every encoding.
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t id = std::uint64_t{1} << bit;
    EXPECT_EQ(encode_id(id, Encoding::kDecimal), std::to_string(id));
    const std::string hex = encode_id(id, Encoding::kHex);
    EXPECT_EQ(hex[15 - bit / 4], "1248"[bit % 4]) << hex;
    const std::string b32 = encode_id(id, Encoding::kBase32);
    EXPECT_EQ(b32[12 - bit / 5], "1248G"[bit % 5]) << b32;
    for (const Encoding e : kAll) EXPECT_EQ(decode_ok(encode_id(id, e), e), id);
  }
}

TEST(CodecVectorTest, FixedWidths) {
  EXPECT_EQ(encode_id(0, Encoding::kHex).size(), 16u);
  EXPECT_EQ(encode_id(0, Encoding::kBase32).size(), 13u);
  EXPECT_EQ(encode_id(kMax, Encoding::kDecimal).size(), 20u);
  EXPECT_EQ(encode_id(kMax, Encoding::kBase62).size(), 11u);
}

// --- round trips and order -----------------------------------------------------------------

TEST(CodecRoundTripTest, RandomIdsInEveryEncoding) {
  std::mt19937_64 rng(0xf1a77);
  for (int i = 0; i < 100'000; ++i) {
    // Mix full-range values with small ones (shortest forms) and boundary neighbours.
    std::uint64_t id = rng();
    if (i % 4 == 1) id >>= (id & 63);
    if (i % 4 == 2) id = kMax - (id & 0xffff);
    for (const Encoding e : kAll) {
      const std::string text = encode_id(id, e);
      const Result<std::uint64_t> back = decode_id(text, e);
      ASSERT_TRUE(back.ok()) << to_string(e) << " " << text << ": " << back.status().to_string();
      ASSERT_EQ(*back, id) << to_string(e) << " " << text;
    }
    ASSERT_EQ(encode_id(id, Encoding::kDecimal), std::to_string(id));
  }
}

TEST(CodecOrderTest, FixedWidthFormsSortLikeTheNumbers) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 100'000; ++i) {
    std::uint64_t a = rng();
    std::uint64_t b = rng();
    // Half the pairs share a long common prefix, so low digits decide the order.
    if (i % 2 == 1) b = a ^ (b >> (20 + (b & 31)));
    for (const Encoding e : {Encoding::kHex, Encoding::kBase32}) {
      const std::string ta = encode_id(a, e);
      const std::string tb = encode_id(b, e);
      ASSERT_EQ(ta < tb, a < b) << to_string(e) << " " << ta << " " << tb;
      ASSERT_EQ(ta == tb, a == b) << to_string(e) << " " << ta << " " << tb;
    }
  }
}

// --- lenient forms -------------------------------------------------------------------------

TEST(CodecLenientTest, HexCaseAndPrefixAndPadding) {
  EXPECT_EQ(decode_ok("499602d2", Encoding::kHex), 1234567890u);
  EXPECT_EQ(decode_ok("499602D2", Encoding::kHex), 1234567890u);
  EXPECT_EQ(decode_ok("0x499602d2", Encoding::kHex), 1234567890u);
  EXPECT_EQ(decode_ok("0X00000000499602D2", Encoding::kHex), 1234567890u);
  EXPECT_EQ(decode_ok("0xFFFFFFFFFFFFFFFF", Encoding::kHex), kMax);
  EXPECT_EQ(decode_ok("0", Encoding::kHex), 0u);
  EXPECT_EQ(decode_ok("0x0", Encoding::kHex), 0u);
  EXPECT_EQ(decode_ok("f", Encoding::kHex), 15u);
}

TEST(CodecLenientTest, Base32CaseAliasesHyphensAndPadding) {
  EXPECT_EQ(decode_ok("00000014sc0pj", Encoding::kBase32), 1234567890u);
  EXPECT_EQ(decode_ok("14SC0PJ", Encoding::kBase32), 1234567890u);
  EXPECT_EQ(decode_ok("14sc0pj", Encoding::kBase32), 1234567890u);
  EXPECT_EQ(decode_ok("OOOOOOI4SCOPJ", Encoding::kBase32), 1234567890u);  // O -> 0, I -> 1
  EXPECT_EQ(decode_ok("ooooooL4scopj", Encoding::kBase32), 1234567890u);
  EXPECT_EQ(decode_ok("0000-0014-SC0P-J", Encoding::kBase32), 1234567890u);
  EXPECT_EQ(decode_ok("-14SC-0PJ-", Encoding::kBase32), 1234567890u);
  EXPECT_EQ(decode_ok("fzzz-zzzzz-zzzz", Encoding::kBase32), kMax);
  EXPECT_EQ(decode_ok("L", Encoding::kBase32), 1u);
  EXPECT_EQ(decode_ok("l", Encoding::kBase32), 1u);
  EXPECT_EQ(decode_ok("i", Encoding::kBase32), 1u);
  EXPECT_EQ(decode_ok("o", Encoding::kBase32), 0u);
}

TEST(CodecLenientTest, DecimalAndBase62LeadingZeros) {
  EXPECT_EQ(decode_ok("00000000000000000001", Encoding::kDecimal), 1u);
  EXPECT_EQ(decode_ok("01844674407370955161", Encoding::kDecimal), 1844674407370955161u);
  EXPECT_EQ(decode_ok("00001LY7VK", Encoding::kBase62), 1234567890u);
  EXPECT_EQ(decode_ok("00000000000", Encoding::kBase62), 0u);
}

// --- rejections ----------------------------------------------------------------------------

TEST(CodecRejectTest, Empty) {
  expect_rejected("", Encoding::kDecimal, "decimal ID \"\"", "empty");
  expect_rejected("", Encoding::kHex, "hex ID \"\"", "empty");
  expect_rejected("", Encoding::kBase32, "base32 ID \"\"", "empty");
  expect_rejected("", Encoding::kBase62, "base62 ID \"\"", "empty");
  expect_rejected("0x", Encoding::kHex, "hex ID \"0x\"", "no digits after the \"0x\" prefix");
  expect_rejected("---", Encoding::kBase32, "base32 ID \"---\"", "no symbols, only hyphens");
}

TEST(CodecRejectTest, BadCharacterNamesItAndItsPosition) {
  const Result<std::uint64_t> r = decode_id("0000001!SC0PJ", Encoding::kBase32);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "base32 ID \"0000001!SC0PJ\": bad character '!' at position 7");

  expect_rejected("12a4", Encoding::kDecimal, "decimal ID", "bad character 'a' at position 2");
  expect_rejected("-1", Encoding::kDecimal, "decimal ID", "bad character '-' at position 0");
  expect_rejected("+1", Encoding::kDecimal, "decimal ID", "bad character '+' at position 0");
  expect_rejected(" 1", Encoding::kDecimal, "decimal ID", "bad character ' ' at position 0");
  expect_rejected("1 ", Encoding::kDecimal, "decimal ID", "bad character ' ' at position 1");
  expect_rejected("1.0", Encoding::kDecimal, "decimal ID", "bad character '.' at position 1");
  expect_rejected("499602g2", Encoding::kHex, "hex ID", "bad character 'g' at position 6");
  // Positions count from the start of the text, prefix included.
  expect_rejected("0x49960z", Encoding::kHex, "hex ID", "bad character 'z' at position 7");
  expect_rejected("0x0x1", Encoding::kHex, "hex ID", "bad character 'x' at position 3");
  expect_rejected("x1", Encoding::kHex, "hex ID", "bad character 'x' at position 0");
  expect_rejected("-1f", Encoding::kHex, "hex ID", "bad character '-' at position 0");
  // U is not in Crockford's alphabet; hyphens count towards positions.
  expect_rejected("14SC-0PU", Encoding::kBase32, "base32 ID", "bad character 'U' at position 7");
  expect_rejected("14sc0pu", Encoding::kBase32, "base32 ID", "bad character 'u' at position 6");
  expect_rejected("14SC_0PJ", Encoding::kBase32, "base32 ID", "bad character '_' at position 4");
  expect_rejected("1LY7-VK", Encoding::kBase62, "base62 ID", "bad character '-' at position 4");
  expect_rejected("1LY7VK=", Encoding::kBase62, "base62 ID", "bad character '=' at position 6");
}

TEST(CodecRejectTest, BadCharacterIsEscaped) {
  const Result<std::uint64_t> r = decode_id(std::string_view("12\x00"
                                                             "3",
                                                             4),
                                            Encoding::kDecimal);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "decimal ID \"12\\x003\": bad character '\\x00' at position 2");
  const Result<std::uint64_t> q = decode_id("1\"2", Encoding::kBase62);
  ASSERT_FALSE(q.ok());
  // Only the delimiter and the backslash are escaped: '"' in single quotes, "'" in double.
  EXPECT_EQ(q.status().message(), R"(base62 ID "1\"2": bad character '"' at position 1)");
  const Result<std::uint64_t> a = decode_id("1'2", Encoding::kBase62);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), R"(base62 ID "1'2": bad character '\'' at position 1)");
  const Result<std::uint64_t> u = decode_id("1\xc3\xa9", Encoding::kHex);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().message(), "hex ID \"1\\xc3\\xa9\": bad character '\\xc3' at position 1");
}

TEST(CodecRejectTest, TooLongSaysTheMaximum) {
  const Result<std::uint64_t> r = decode_id("000000000000000000001", Encoding::kDecimal);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "decimal ID \"000000000000000000001\": too long: 21 digits, at most 20");
  expect_rejected("00000000000000000", Encoding::kHex, "hex ID",
                  "too long: 17 hex digits, at most 16");
  expect_rejected("0x00000000000000001", Encoding::kHex, "hex ID",
                  "too long: 17 hex digits, at most 16");
  expect_rejected("00000000000000", Encoding::kBase32, "base32 ID",
                  "too long: 14 symbols (not counting hyphens), at most 13");
  // Zero padding counts too: at most 13 symbols even when the value would fit.
  expect_rejected("oooooooL4scopj", Encoding::kBase32, "base32 ID", "too long: 14 symbols");
  expect_rejected("0000-0000-0000-01", Encoding::kBase32, "base32 ID", "too long: 14 symbols");
  expect_rejected("000000000000", Encoding::kBase62, "base62 ID",
                  "too long: 12 characters, at most 11");
}

TEST(CodecRejectTest, LongTextIsShortenedInTheMessage) {
  const std::string text(10'000, '7');
  for (const Encoding e : kAll) {
    const Result<std::uint64_t> r = decode_id(text, e);
    ASSERT_FALSE(r.ok());
    EXPECT_LT(r.status().message().size(), 200u) << r.status().message();
    EXPECT_NE(r.status().message().find("...\": too long: 10000 "), std::string::npos)
        << r.status().message();
  }
}

TEST(CodecRejectTest, Overflow) {
  const Result<std::uint64_t> r = decode_id("18446744073709551616", Encoding::kDecimal);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "decimal ID \"18446744073709551616\": overflows 64 bits (the largest ID is "
            "18446744073709551615)");
  expect_rejected("99999999999999999999", Encoding::kDecimal, "decimal ID", "overflows 64 bits");
  expect_rejected("G000000000000", Encoding::kBase32, "base32 ID",
                  "overflows 64 bits (the largest ID is FZZZZZZZZZZZZ)");
  expect_rejected("g0000-00000-000", Encoding::kBase32, "base32 ID", "overflows 64 bits");
  expect_rejected("ZZZZZZZZZZZZZ", Encoding::kBase32, "base32 ID", "overflows 64 bits");
  expect_rejected("LygHa16AHYG", Encoding::kBase62, "base62 ID",
                  "overflows 64 bits (the largest ID is LygHa16AHYF)");
  expect_rejected("zzzzzzzzzzz", Encoding::kBase62, "base62 ID", "overflows 64 bits");
  expect_rejected("M0000000000", Encoding::kBase62, "base62 ID", "overflows 64 bits");
}

TEST(CodecRejectTest, JustBelowOverflowIsAccepted) {
  EXPECT_EQ(decode_ok("18446744073709551615", Encoding::kDecimal), kMax);
  EXPECT_EQ(decode_ok("18446744073709551614", Encoding::kDecimal), kMax - 1);
  EXPECT_EQ(decode_ok("F000000000000", Encoding::kBase32), std::uint64_t{15} << 60);
  EXPECT_EQ(decode_ok("ZZZZZZZZZZZZ", Encoding::kBase32), (std::uint64_t{1} << 60) - 1);
  EXPECT_EQ(decode_ok("LygHa16AHYE", Encoding::kBase62), kMax - 1);
  EXPECT_EQ(decode_ok("zzzzzzzzzz", Encoding::kBase62), 839299365868340223u);  // 62^10 - 1
}

}  // namespace
}  // namespace flurry

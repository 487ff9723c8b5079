// The server's output buffer: JSON strings (UTF-8 kept, invalid bytes replaced), moves, growth.
#include "http/text.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "core/utf8.h"

namespace flurry::http {
namespace {

std::string json(std::string_view s) {
  OutBuf b;
  b.append_json_string(s);
  return std::string(b.view());
}

TEST(JsonStringTest, AsciiAndEscapes) {
  EXPECT_EQ(json(""), "\"\"");
  EXPECT_EQ(json("plain text"), "\"plain text\"");
  EXPECT_EQ(json("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json("line\nnext"), "\"line\\nnext\"");
  EXPECT_EQ(json(std::string_view("\x00\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\\u007f\"");
}

TEST(JsonStringTest, ValidUtf8IsWrittenAsItIs) {
  // Two-, three- and four-byte sequences, and the edges of the ranges.
  for (std::string_view text :
       {"Bestellzeilen \xe2\x80\x93 \xe6\xb3\xa8\xe6\x96\x87",  // "Bestellzeilen – 注文"
        "\xc3\xa4\xc3\xb6\xc3\xbc \xc3\x9f", "\xf0\x9f\x93\xa6 parcel", "\xc2\x80", "\xdf\xbf",
        "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80",
        "\xf4\x8f\xbf\xbf"}) {
    std::string quoted(1, '"');
    quoted.append(text).push_back('"');
    EXPECT_EQ(json(text), quoted) << text;
  }
}

TEST(JsonStringTest, InvalidUtf8BecomesReplacementCharacters) {
  // A stray continuation byte, a lone lead byte, a truncated sequence at the end.
  EXPECT_EQ(json("a\x80z"), "\"a\\ufffdz\"");
  EXPECT_EQ(json("a\xc3z"), "\"a\\ufffdz\"");
  EXPECT_EQ(json("\xe6\xb3"), "\"\\ufffd\\ufffd\"");
  // Overlong forms, a surrogate, above U+10FFFF, bytes never in UTF-8: one U+FFFD per byte.
  EXPECT_EQ(json("\xc0\xaf"), "\"\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xe0\x80\xaf"), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
  EXPECT_EQ(json("\xff\xfe"), "\"\\ufffd\\ufffd\"");
  // Valid text around an invalid byte is kept.
  EXPECT_EQ(json("\xc3\xa4\xff\xc3\xb6"), "\"\xc3\xa4\\ufffd\xc3\xb6\"");
}

TEST(JsonStringTest, OutputIsAlwaysValidUtf8) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  const std::string out = json(all + all);
  EXPECT_EQ(internal::invalid_utf8_at(out), std::string::npos);
}

TEST(OutBufTest, MoveLeavesTheSourceEmpty) {
  OutBuf a;
  a.append("hello");
  OutBuf b(std::move(a));
  EXPECT_EQ(b.view(), "hello");
  EXPECT_EQ(a.size(), 0u);      // NOLINT(bugprone-use-after-move): the documented state
  EXPECT_EQ(a.capacity(), 0u);  // NOLINT(bugprone-use-after-move)
  OutBuf c;
  c.append("x");
  c = std::move(b);
  EXPECT_EQ(c.view(), "hello");
  EXPECT_EQ(b.size(), 0u);  // NOLINT(bugprone-use-after-move)
  a.append("again");        // a moved-from buffer is usable
  EXPECT_EQ(a.view(), "again");
}

TEST(OutBufTest, OneLargeReservationIsNotDoubled) {
  OutBuf b;
  b.resize(512);
  b.tail(3'000'000);
  EXPECT_EQ(b.capacity(), 3'000'512u);
  // Small appends still grow geometrically.
  OutBuf s;
  for (int i = 0; i < 1000; ++i) s.push('x');
  EXPECT_LE(s.capacity(), 2048u);
  b.trim(8192);
  EXPECT_EQ(b.capacity(), 0u);
}

}  // namespace
}  // namespace flurry::http

// Query strings, percent-decoding and path segments of the HTTP API (src/http/query.h).
#include "http/query.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>

namespace flurry::http {
namespace {

constexpr std::array<std::string_view, 3> kIds = {"count", "format", "encoding"};

// Expects INVALID_ARGUMENT / BAD_INPUT with `needle` in the message.
void expect_bad(const Status& st, std::string_view needle) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_EQ(st.reason(), Reason::kBadInput);
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(ParseQueryTest, FindsTheAllowedParameters) {
  QueryScratch scratch;
  QueryParams q;
  const std::string_view query = "count=5&&encoding=hex&";
  ASSERT_TRUE(parse_query(query, "/v1/ids", kIds, q, scratch).ok());
  EXPECT_TRUE(q.present[0]);
  EXPECT_EQ(q.value[0], "5");
  EXPECT_FALSE(q.present[1]);
  EXPECT_TRUE(q.present[2]);
  EXPECT_EQ(q.value[2], "hex");
  // Values that need no decoding are views into the query string itself.
  EXPECT_EQ(q.value[0].data(), query.data() + 6);
}

TEST(ParseQueryTest, EmptyAndMissingValues) {
  QueryScratch scratch;
  QueryParams q;
  ASSERT_TRUE(parse_query("count&format=", "/v1/ids", kIds, q, scratch).ok());
  EXPECT_TRUE(q.present[0]);
  EXPECT_EQ(q.value[0], "");
  EXPECT_TRUE(q.present[1]);
  EXPECT_EQ(q.value[1], "");
  QueryParams none;
  ASSERT_TRUE(parse_query("", "/v1/ids", kIds, none, scratch).ok());
  EXPECT_FALSE(none.present[0] || none.present[1] || none.present[2]);
}

TEST(ParseQueryTest, DecodesNamesAndValues) {
  QueryScratch scratch;
  QueryParams q;
  ASSERT_TRUE(parse_query("c%6Funt=1%32&format=a+b%2B", "/v1/ids", kIds, q, scratch).ok());
  EXPECT_EQ(q.value[0], "12");
  EXPECT_EQ(q.value[1], "a b+");
  // Decoded values live in the scratch, one string per parameter.
  EXPECT_EQ(q.value[0].data(), scratch.values[0].data());
  EXPECT_EQ(q.value[1].data(), scratch.values[1].data());
}

TEST(ParseQueryTest, Errors) {
  QueryScratch scratch;
  const auto parse = [&](std::string_view query, std::span<const std::string_view> allowed) {
    QueryParams q;
    return parse_query(query, "/v1/ids", allowed, q, scratch);
  };
  expect_bad(parse("size=1", kIds),
             "unknown parameter \"size\" (/v1/ids takes count, format and encoding)");
  expect_bad(parse("x=1", {}), "unknown parameter \"x\" (/v1/ids takes no parameters)");
  expect_bad(parse("count=1&count=2", kIds), "parameter \"count\" is given more than once");
  expect_bad(parse("count=1&c%6Funt=2", kIds), "parameter \"count\" is given more than once");
  expect_bad(parse("%zz=1", kIds), "bad percent-encoding in the query string: \"%zz\"");
  expect_bad(parse("count=%4", kIds), "parameter \"count\": bad percent-encoding in \"%4\"");
  // Outside bytes are quoted, never copied raw into the message.
  expect_bad(parse("a%0Ab=1", kIds), "unknown parameter \"a\\x0ab\"");
  constexpr std::array<std::string_view, 2> kTwo = {"a", "b"};
  expect_bad(parse("c=1", kTwo), "(/v1/ids takes a and b)");
  constexpr std::array<std::string_view, 1> kOne = {"a"};
  expect_bad(parse("c=1", kOne), "(/v1/ids takes a)");
}

TEST(PathSegmentTest, DecodesWithoutPlus) {
  QueryScratch scratch;
  Result<std::string_view> plain = path_segment("abc+d", scratch);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "abc+d");
  Result<std::string_view> decoded = path_segment("a%20b+c", scratch);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, "a b+c");
  EXPECT_EQ(decoded->data(), scratch.path.data());
  expect_bad(path_segment("%zz", scratch).status(), "bad percent-encoding in the path: \"%zz\"");
}

// A warm scratch makes parsing allocation-free: the decoded strings keep their capacity.
TEST(ParseQueryTest, ScratchKeepsItsCapacity) {
  QueryScratch scratch;
  QueryParams q;
  ASSERT_TRUE(parse_query("count=%31%30&encoding=b%61se62", "/v1/ids", kIds, q, scratch).ok());
  const char* const count = scratch.values[0].data();
  const char* const encoding = scratch.values[2].data();
  QueryParams again;
  ASSERT_TRUE(parse_query("count=%32&encoding=h%65x", "/v1/ids", kIds, again, scratch).ok());
  EXPECT_EQ(again.value[0], "2");
  EXPECT_EQ(again.value[2], "hex");
  EXPECT_EQ(scratch.values[0].data(), count);
  EXPECT_EQ(scratch.values[2].data(), encoding);
}

}  // namespace
}  // namespace flurry::http

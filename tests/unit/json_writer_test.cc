// The HTTP layer's JSON writer: commas at every depth, escaped keys and values, the number forms
// OutBuf writes, optional values, cached prefixes resumed; every output parses as JSON.
#include "http/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace flurry::http {
namespace {

std::string text(const OutBuf& b) {
  return std::string(b.view());
}

TEST(JsonWriterTest, CommasAtEveryDepth) {
  OutBuf b;
  JsonWriter w(b);
  w.begin_object();
  w.field("a", 1).field("b", "x");
  w.key("list").begin_array();
  w.value(1).value(2);
  w.begin_object().end_object();
  w.begin_array().end_array();
  w.begin_object().field("deep", true).key("more").begin_array().value(3).end_array().end_object();
  w.end_array();
  w.key("empty").begin_object().end_object();
  w.field("last", false);
  w.end_object();
  EXPECT_EQ(
      text(b),
      R"({"a":1,"b":"x","list":[1,2,{},[],{"deep":true,"more":[3]}],"empty":{},"last":false})");
  EXPECT_TRUE(nlohmann::json::accept(b.view()));
}

TEST(JsonWriterTest, KeysAndStringsAreEscaped) {
  OutBuf b;
  JsonWriter w(b);
  w.begin_object().field("q\"uote", std::string("line\nbreak\\")).field("ctl", "\x01").end_object();
  EXPECT_EQ(text(b), R"({"q\"uote":"line\nbreak\\","ctl":"\u0001"})");
  const nlohmann::json doc = nlohmann::json::parse(b.view());
  EXPECT_EQ(doc["q\"uote"], "line\nbreak\\");
}

TEST(JsonWriterTest, NumbersBooleansAndNulls) {
  OutBuf b;
  JsonWriter w(b);
  w.begin_array();
  w.value(std::numeric_limits<std::uint64_t>::max());
  w.value(std::int64_t{-42});
  w.value(7U);
  w.value(-7);
  w.value(0.1);
  w.value(std::nan(""));  // JSON has no NaN: null
  w.value(true);
  w.null();
  w.value(std::optional<std::int64_t>{5});
  w.value(std::optional<std::int64_t>{});
  w.id_string(123);
  w.end_array();
  EXPECT_EQ(text(b), R"([18446744073709551615,-42,7,-7,0.1,null,true,null,5,null,"123"])");
}

TEST(JsonWriterTest, ACachedPrefixIsResumed) {
  OutBuf prefix;
  JsonWriter p(prefix);
  p.begin_object().field("text", "cached");
  const std::string cached(prefix.view());
  EXPECT_EQ(cached, R"({"text":"cached")");

  OutBuf b;
  JsonWriter w(b);
  w.begin_object().key("layout");
  w.raw(cached).resume_object(1).field("node", 3).end_object();
  w.field("after", 1).end_object();
  EXPECT_EQ(text(b), R"({"layout":{"text":"cached","node":3},"after":1})");
  EXPECT_TRUE(nlohmann::json::accept(b.view()));

  OutBuf none;
  JsonWriter n(none);
  n.raw("{").resume_object(0).field("first", 1).end_object();
  EXPECT_EQ(text(none), R"({"first":1})");
}

TEST(JsonWriterTest, TopLevelValuesTakeNoComma) {
  OutBuf b;
  JsonWriter w(b);
  w.value("one");
  EXPECT_EQ(text(b), R"("one")");
}

}  // namespace
}  // namespace flurry::http

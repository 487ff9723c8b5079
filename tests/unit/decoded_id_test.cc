// The decode model (flurry/decoded_id.h) and the one list of encodings (flurry/codec.h).
#include "flurry/decoded_id.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "flurry/timefmt.h"

namespace flurry {
namespace {

Layout layout_of(std::string_view text) {
  Result<Layout> l = Layout::parse(text);
  EXPECT_TRUE(l.ok()) << l.status().to_string();
  return l.value();
}

TEST(EncodingListTest, NamesParseAndPrint) {
  std::set<std::string_view> names;
  for (const EncodingInfo& e : kEncodings) {
    SCOPED_TRACE(e.name);
    EXPECT_TRUE(names.insert(e.name).second);
    EXPECT_EQ(to_string(e.encoding), e.name);
    Result<Encoding> parsed = parse_encoding(e.name);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, e.encoding);
    if (!e.alias.empty()) {
      EXPECT_EQ(parse_encoding(e.alias).value(), e.encoding);
    }
    EXPECT_FALSE(e.description.empty());
  }
  EXPECT_EQ(kEncodings[0].encoding, Encoding::kDecimal);  // the default comes first
  EXPECT_EQ(encoding_names(), "dec, hex, base32 or base62");
  EXPECT_EQ(encoding_names(true), "dec, decimal, hex, base32 or base62");
  Result<Encoding> bad = parse_encoding("base64");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown ID encoding \"base64\": expected dec, decimal, hex, base32 or base62");
}

TEST(DecodedIdTest, TakesAnIdApart) {
  const Layout layout = layout_of("time:41@1ms,datacenter:5,worker:5,seq:12;epoch=2025-01-01Z");
  IdParts parts;
  parts.ticks = 1000;
  parts.node = 3 << 5 | 7;
  parts.seq = 42;
  const std::uint64_t id = layout.compose(parts).value();

  Result<DecodedId> d = decode_id(layout, id);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->id, id);
  EXPECT_EQ(d->parts, parts);
  EXPECT_FALSE(d->has_clock);
  EXPECT_EQ(format_time(d->time), "2025-01-01T00:00:01.000Z");
  EXPECT_EQ(d->unix_ms, 1735689601000);
  ASSERT_EQ(d->fields.size(), 4u);
  EXPECT_EQ(d->fields[0].name, "time");
  EXPECT_EQ(d->fields[0].kind, FieldKind::kTime);
  EXPECT_EQ(d->fields[0].bits, 41);
  EXPECT_EQ(d->fields[0].value, 1000u);
  EXPECT_EQ(d->fields[1].name, "datacenter");
  EXPECT_EQ(d->fields[1].value, 3u);
  EXPECT_EQ(d->fields[2].name, "worker");
  EXPECT_EQ(d->fields[2].value, 7u);
  EXPECT_EQ(d->fields[3].name, "seq");
  EXPECT_EQ(d->fields[3].kind, FieldKind::kSeq);
  EXPECT_EQ(d->fields[3].value, 42u);
  for (std::size_t i = 0; i < kEncodings.size(); ++i) {
    EXPECT_EQ(d->encodings[i].encoding, kEncodings[i].encoding);
    EXPECT_EQ(d->encodings[i].name, kEncodings[i].name);
    EXPECT_EQ(d->encodings[i].text, encode_id(id, kEncodings[i].encoding));
    // Each text decodes back to the same ID.
    Result<DecodedId> again = decode_id(layout, d->encodings[i].text, d->encodings[i].encoding);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ(again->id, id);
  }
}

TEST(DecodedIdTest, ClockField) {
  const Layout layout = layout_of("time:40@1ms,clock:2,node:8,seq:13;epoch=2025-01-01Z");
  IdParts parts;
  parts.ticks = 5;
  parts.clock = 2;
  parts.node = 9;
  parts.seq = 1;
  Result<DecodedId> d = decode_id(layout, layout.compose(parts).value());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->has_clock);
  EXPECT_EQ(d->parts.clock, 2u);
  EXPECT_EQ(d->fields[1].kind, FieldKind::kClock);
}

TEST(DecodedIdTest, Errors) {
  const Layout layout = layout_of("flurry");
  // Bad text: the codec's message.
  Result<DecodedId> text = decode_id(layout, "12a", Encoding::kDecimal);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(text.status().reason(), Reason::kBadInput);
  // Bit 63 set: this 63-bit layout cannot have produced it.
  Result<DecodedId> high = decode_id(layout, std::uint64_t{1} << 63);
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(high.status().message().find("cannot have produced it"), std::string::npos);
}

}  // namespace
}  // namespace flurry

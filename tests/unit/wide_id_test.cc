#include "flurry/wide_id.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace flurry {
namespace {

constexpr std::array<WideFormat, 2> kFormats = {WideFormat::kUuidv7, WideFormat::kUlid};

Layout layout_of(std::string_view text) {
  Result<Layout> layout = Layout::parse(text);
  EXPECT_TRUE(layout.ok()) << text << ": " << layout.status().to_string();
  return std::move(layout).value();
}

WideIdCodec codec_of(std::string_view layout_text, WideFormat format) {
  Result<WideIdCodec> codec = WideIdCodec::create(layout_of(layout_text), format);
  EXPECT_TRUE(codec.ok()) << layout_text << ": " << codec.status().to_string();
  return std::move(codec).value();
}

std::uint64_t decode_ok(const WideIdCodec& codec, std::string_view text) {
  const Result<std::uint64_t> id = codec.decode(text);
  EXPECT_TRUE(id.ok()) << text << ": " << id.status().to_string();
  return id.ok() ? *id : 0xdeadbeefdeadbeef;
}

// Expects `text` refused with INVALID_ARGUMENT / BAD_INPUT, the message naming the format and
// containing `cause`.
void expect_rejected(const WideIdCodec& codec, std::string_view text, std::string_view cause) {
  const Result<std::uint64_t> id = codec.decode(text);
  ASSERT_FALSE(id.ok()) << "accepted \"" << text << "\" as " << *id;
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(id.status().reason(), Reason::kBadInput);
  const std::string msg = id.status().message();
  EXPECT_EQ(msg.rfind(std::string(to_string(codec.format())) + " ID \"", 0), 0u) << msg;
  EXPECT_NE(msg.find(cause), std::string::npos) << "message: " << msg << "\nwanted: " << cause;
}

void expect_refused(std::string_view layout_text, WideFormat format, std::string_view cause) {
  const Result<WideIdCodec> codec = WideIdCodec::create(layout_of(layout_text), format);
  ASSERT_FALSE(codec.ok()) << layout_text;
  EXPECT_EQ(codec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(codec.status().reason(), Reason::kBadInput);
  const std::string msg = codec.status().message();
  EXPECT_NE(msg.find(std::string("cannot be written as ") + std::string(to_string(format))),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(cause), std::string::npos) << "message: " << msg << "\nwanted: " << cause;
}

// The largest ID a layout can hold.
std::uint64_t max_id(const Layout& layout) {
  return layout.total_bits() >= 64 ? UINT64_MAX : (std::uint64_t{1} << layout.total_bits()) - 1;
}

// Layouts with a 1 ms unit and finer ones (100 us divides 1 ms; 300 us does not, so some
// milliseconds hold 3 ticks and some 4).
constexpr std::array<std::string_view, 6> kLayouts = {
    "flurry",
    "twitter",
    "multiclock",
    "js-safe",
    "time:45@100us,node:8,seq:10;epoch=2025-01-01Z",
    "time:43@300us,node:10,seq:10;epoch=2020-01-01T00:00:00.001Z",
};

// --- names -------------------------------------------------------------------------------------

TEST(IdEncodingTest, OneParserForEveryName) {
  EXPECT_EQ(*parse_id_encoding("uuidv7"), IdEncoding(WideFormat::kUuidv7));
  EXPECT_EQ(*parse_id_encoding("ulid"), IdEncoding(WideFormat::kUlid));
  EXPECT_EQ(*parse_id_encoding("dec"), IdEncoding(Encoding::kDecimal));
  EXPECT_EQ(*parse_id_encoding("decimal"), IdEncoding(Encoding::kDecimal));
  EXPECT_EQ(*parse_id_encoding("base62"), IdEncoding(Encoding::kBase62));
  for (const EncodingInfo& e : kEncodings) EXPECT_EQ(parse_id_encoding(e.name)->name(), e.name);
  for (const WideFormatInfo& f : kWideFormats) {
    EXPECT_EQ(parse_id_encoding(f.name)->name(), f.name);
    EXPECT_TRUE(parse_id_encoding(f.name)->is_wide());
  }
  EXPECT_EQ(id_encoding_names(), "dec, hex, base32, base62, uuidv7 or ulid");
  for (const std::string_view name : {"", "UUIDv7", "uuid", "ULID", "uuidv4", "ulid "}) {
    const Result<IdEncoding> r = parse_id_encoding(name);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("unknown ID encoding \"", 0), 0u) << r.status().message();
    EXPECT_NE(r.status().message().find("dec, decimal, hex, base32, base62, uuidv7 or ulid"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(IdEncodingTest, DetectsTheFormByShape) {
  EXPECT_EQ(detect_wide_format("01936b2e-1e00-7000-8000-000000000000"), WideFormat::kUuidv7);
  EXPECT_EQ(detect_wide_format("01JDNQ4R800000000000000000"), WideFormat::kUlid);
  EXPECT_EQ(detect_wide_format("1234567890"), std::nullopt);
  EXPECT_EQ(detect_wide_format("00000014SC0PJ"), std::nullopt);
  EXPECT_EQ(detect_wide_format("01936b2e1e0070008000000000000000"), std::nullopt);  // 32 hex
  EXPECT_EQ(detect_wide_format("01936b2e1-e00-7000-8000-000000000000"), std::nullopt);
  EXPECT_EQ(detect_wide_format("01JDNQ4R80000000000000000-"), std::nullopt);
}

// --- the layout check --------------------------------------------------------------------------

TEST(WideIdCodecTest, RandomBitsOnTheDefaultLayout) {
  // time:41 leaves node:10 + seq:12 = 22 bits of fields: 74 - 22 and 80 - 22.
  EXPECT_EQ(codec_of("flurry", WideFormat::kUuidv7).random_bits(), 52);
  EXPECT_EQ(codec_of("flurry", WideFormat::kUlid).random_bits(), 58);
  EXPECT_EQ(codec_of("flurry", WideFormat::kUuidv7).sub_ms_bits(), 0);
  // 100 us: 10 ticks per millisecond need 4 bits; 300 us: 4 ticks (some milliseconds hold 3), 2.
  EXPECT_EQ(codec_of(kLayouts[4], WideFormat::kUuidv7).sub_ms_bits(), 4);
  EXPECT_EQ(codec_of(kLayouts[4], WideFormat::kUuidv7).random_bits(), 74 - 4 - 18);
  EXPECT_EQ(codec_of(kLayouts[5], WideFormat::kUlid).sub_ms_bits(), 2);
  EXPECT_EQ(codec_of(kLayouts[5], WideFormat::kUlid).random_bits(), 80 - 2 - 20);
}

TEST(WideIdCodecTest, RefusesLayoutsThatCannotBeCarried) {
  for (const WideFormat f : kFormats) {
    expect_refused("sonyflake", f, "time unit is coarser than 1 ms");
    expect_refused("uid-generator", f, "time unit is coarser than 1 ms");
    expect_refused("time:41@2ms,node:10,seq:12;epoch=2025-01-01Z", f, "coarser than 1 ms");
    expect_refused("time:41@1ms,node:10,seq:12;epoch=1969-12-31Z", f, "epoch lies before 1970");
    // 2^49 ms from 2025 is long past 2^48 ms (year 10889).
    expect_refused("time:49@1ms,node:2,seq:12;epoch=2025-01-01Z", f, "48-bit Unix millisecond");
  }
  // The widest layout flurry parses still fits (at most 63 bits of fields, 10 of sub-ms ticks).
  EXPECT_TRUE(WideIdCodec::create(layout_of("time:2@1us,node:40,seq:21;epoch=2025-01-01Z"),
                                  WideFormat::kUuidv7)
                  .ok());
  EXPECT_EQ(
      codec_of("time:2@1us,node:40,seq:21;epoch=2025-01-01Z", WideFormat::kUuidv7).random_bits(),
      74 - 61 - 10);
}

// --- encoding ----------------------------------------------------------------------------------

TEST(WideIdCodecTest, KnownValues) {
  // Default layout, epoch 2025-01-01Z: Unix ms 1735689600000 + 1000 = 0x01941f297fe8. The values
  // below come from an independent implementation (Python's uuid module agrees on version and
  // variant).
  const std::uint64_t id = (std::uint64_t{1000} << 22) | (std::uint64_t{5} << 12) | 7;
  const WideIdCodec uuid = codec_of("flurry", WideFormat::kUuidv7);
  char buf[WideIdCodec::kMaxTextLength];
  // unix_ts_ms | 7 | the 22 field bits 0x5007 (12 in rand_a, 10 after the variant) | random.
  EXPECT_EQ(std::string(buf, uuid.write(buf, id, 0, 0)), "01941f29-7fe8-7014-8070-000000000000");
  EXPECT_EQ(std::string(buf, uuid.write(buf, id, ~0ull, ~0ull)),
            "01941f29-7fe8-7014-807f-ffffffffffff");
  const WideIdCodec ulid = codec_of("flurry", WideFormat::kUlid);
  EXPECT_EQ(std::string(buf, ulid.write(buf, id, 0, 0)), "01JGFJJZZ80501R00000000000");
  EXPECT_EQ(decode_ok(uuid, "01941f29-7fe8-7014-807f-ffffffffffff"), id);
  EXPECT_EQ(decode_ok(uuid, "01941F29-7FE8-7014-807F-FFFFFFFFFFFF"), id);  // either case
  EXPECT_EQ(decode_ok(ulid, "01JGFJJZZ80501R00000000000"), id);
  EXPECT_EQ(decode_ok(ulid, "01jgfjjzz80501r0000000000o"), id);  // case, O read as 0
}

TEST(WideIdCodecTest, RoundTripsEdgeAndRandomIds) {
  std::mt19937_64 rng(18);
  for (const std::string_view text : kLayouts) {
    const Layout layout = layout_of(text);
    for (const WideFormat f : kFormats) {
      const WideIdCodec codec = codec_of(text, f);
      std::vector<std::uint64_t> ids = {0, 1, max_id(layout), max_id(layout) - 1,
                                        max_id(layout) >> 1};
      const int low = layout.total_bits() - layout.time_field().bits;
      for (std::uint64_t ticks : {0ull, 1ull, 2ull, 3ull, 9ull, 10ull, 11ull, 3333ull}) {
        ids.push_back(ticks << low);
        ids.push_back((ticks << low) | ((std::uint64_t{1} << low) - 1));
      }
      for (int i = 0; i < 20000; ++i) ids.push_back(rng() & max_id(layout));
      for (const std::uint64_t id : ids) {
        const std::string encoded = codec.encode(id);
        ASSERT_EQ(encoded.size(), codec.text_length());
        ASSERT_EQ(decode_ok(codec, encoded), id) << text << " " << encoded;
        // The millisecond in front is the ID's time, floored.
        const std::int64_t ms = std::chrono::floor<std::chrono::milliseconds>(
                                    layout.time_of(layout.field_value(id, layout.time_field())))
                                    .time_since_epoch()
                                    .count();
        std::string hex;
        if (f == WideFormat::kUuidv7) hex = encoded.substr(0, 8) + encoded.substr(9, 4);
        if (!hex.empty()) {
          ASSERT_EQ(std::stoll(hex, nullptr, 16), ms) << text << " " << encoded;
        }
      }
    }
  }
}

TEST(WideIdCodecTest, VersionAndVariantBits) {
  const WideIdCodec codec = codec_of("flurry", WideFormat::kUuidv7);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const std::string text = codec.encode(rng() >> 1);
    ASSERT_EQ(text[14], '7') << text;
    ASSERT_NE(std::string_view("89ab").find(text[19]), std::string_view::npos) << text;
    for (const std::size_t pos : {8, 13, 18, 23}) ASSERT_EQ(text[pos], '-') << text;
  }
  const WideIdCodec ulid = codec_of("flurry", WideFormat::kUlid);
  for (int i = 0; i < 1000; ++i) {
    const std::string text = ulid.encode(rng() >> 1);
    ASSERT_LE(text[0], '7') << text;
  }
}

TEST(WideIdCodecTest, RandomBitsDifferYetDecodeToTheSameId) {
  for (const WideFormat f : kFormats) {
    const WideIdCodec codec = codec_of("flurry", f);
    const std::uint64_t id = (std::uint64_t{123456789} << 22) | (std::uint64_t{3} << 12) | 4095;
    std::set<std::string> texts;
    for (int i = 0; i < 1000; ++i) {
      const std::string text = codec.encode(id);
      EXPECT_EQ(decode_ok(codec, text), id) << text;
      texts.insert(text);
    }
    // 52 or 58 random bits: 1000 draws that repeat would mean the bits are not random.
    EXPECT_EQ(texts.size(), 1000u);
    // The random bits are the tail: every text shares the prefix that holds time and fields.
    const std::size_t fixed_chars = f == WideFormat::kUuidv7 ? 20 : 12;
    for (const std::string& t : texts) {
      EXPECT_EQ(t.substr(0, fixed_chars), texts.begin()->substr(0, fixed_chars));
    }
  }
}

TEST(WideIdCodecTest, TextSortsLikeTheIds) {
  std::mt19937_64 rng(42);
  for (const std::string_view text : kLayouts) {
    const Layout layout = layout_of(text);
    const int low = layout.total_bits() - layout.time_field().bits;
    std::vector<std::uint64_t> ids;
    // Same tick (so same millisecond), every kind of neighbour: node and seq differences.
    const std::uint64_t base = std::uint64_t{777} << low;
    for (std::uint64_t v : {0ull, 1ull, 2ull, 4095ull, 4096ull, 4097ull, 1ull << 20}) {
      if (v < (std::uint64_t{1} << low)) ids.push_back(base | v);
    }
    // Neighbouring ticks, which share a millisecond below 1 ms units.
    for (std::uint64_t t = 0; t < 25; ++t) ids.push_back((t << low) | (rng() & 3));
    for (int i = 0; i < 5000; ++i) ids.push_back(rng() & max_id(layout));
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (const WideFormat f : kFormats) {
      const WideIdCodec codec = codec_of(text, f);
      std::vector<std::string> texts;
      for (const std::uint64_t id : ids) texts.push_back(codec.encode(id));
      for (std::size_t i = 1; i < texts.size(); ++i) {
        ASSERT_LT(texts[i - 1], texts[i])
            << text << ": IDs " << ids[i - 1] << " < " << ids[i] << " but texts do not sort";
      }
    }
  }
}

// --- decoding bad text -------------------------------------------------------------------------

TEST(WideIdCodecTest, RejectsBadUuidText) {
  const WideIdCodec c = codec_of("flurry", WideFormat::kUuidv7);
  expect_rejected(c, "", "empty, expected 36 characters");
  expect_rejected(c, "01941f29-7fe8-7014-807f-ffffffffffff0", "37 characters, expected 36");
  expect_rejected(c, "01941f297fe8-7014-807f-ffffffffffff0", "expected a hyphen at position 8");
  expect_rejected(c, "01941f29-7fe8-7014-807f-fffffffffffg", "bad character 'g' at position 35");
  expect_rejected(c, "01941f29-7fe8-4014-807f-ffffffffffff", "version 4");
  expect_rejected(c, "01941f29-7fe8-7014-c07f-ffffffffffff", "variant bits 11");
  expect_rejected(c, "01941f29-7fe8-7014-007f-ffffffffffff", "variant bits 00");
  // 2024: before the flurry preset's epoch, 2025-01-01.
  expect_rejected(c, "018cc251-f400-7000-8000-000000000000",
                  "lies before the layout's epoch 2025-01-01");
  const WideIdCodec fine = codec_of(kLayouts[4], WideFormat::kUuidv7);
  // 100 us ticks: 10 per millisecond, so a sub-millisecond index of 10..15 is out of range. The
  // index is the top 4 of the 74 payload bits: the first hex digit after the version.
  expect_rejected(fine, "01941f29-7fe8-7a00-8000-000000000000", "sub-millisecond tick 10");
  EXPECT_TRUE(fine.decode("01941f29-7fe8-7900-8000-000000000000").ok());
}

TEST(WideIdCodecTest, RejectsTimesOutsideTheTimeField) {
  // time:20@1ms from 2025-01-01 ends 2^20 ms (about 17 minutes) later.
  const WideIdCodec c =
      codec_of("time:20@1ms,node:20,seq:23;epoch=2025-01-01Z", WideFormat::kUuidv7);
  const std::uint64_t last = (std::uint64_t{1} << 63) - 1;
  EXPECT_EQ(decode_ok(c, c.encode(last)), last);
  // The first millisecond past it: 1735689600000 + 2^20 = 0x01941f397c00.
  expect_rejected(c, "01941f39-7c00-7000-8000-000000000000", "past the end of the layout's time");
  // A millisecond past what a TimePoint holds (the year 2262) is named by its number: found by
  // the fuzzer as a signed overflow while the message was written.
  const WideIdCodec ulid = codec_of("flurry", WideFormat::kUlid);
  expect_rejected(ulid, "1FG0JJJZZ00000JJZZ50801R00", "unix_ms 5");
  expect_rejected(ulid, "1FG0JJJZZ00000JJZZ50801R00", "past the end of the layout's time");
}

TEST(WideIdCodecTest, RejectsBadUlidText) {
  const WideIdCodec c = codec_of("flurry", WideFormat::kUlid);
  expect_rejected(c, "01JGFJJZZ80501R0000000000", "25 characters, expected 26");
  expect_rejected(c, "01JGFJJZZ80501R0000000000U", "bad character 'U' at position 25");
  expect_rejected(c, "01JGFJJZZ805-1R00000000000", "bad character '-' at position 12");
  expect_rejected(c, "81JGFJJZZ80501R00000000000", "overflows 128 bits");
  expect_rejected(c, "01HK153X000000000000000000", "lies before the layout's epoch");
}

TEST(IdTextCodecTest, OneWriterForEveryFormat) {
  const Layout layout = layout_of("flurry");
  const std::uint64_t id = (std::uint64_t{1000} << 22) | (std::uint64_t{5} << 12) | 7;
  for (const EncodingInfo& e : kEncodings) {
    const Result<IdTextCodec> codec = IdTextCodec::create(layout, e.encoding);
    ASSERT_TRUE(codec.ok());
    EXPECT_EQ(codec->encode(id), encode_id(id, e.encoding));
    EXPECT_EQ(*codec->decode(codec->encode(id)), id);
  }
  for (const WideFormatInfo& f : kWideFormats) {
    const Result<IdTextCodec> codec = IdTextCodec::create(layout, f.format);
    ASSERT_TRUE(codec.ok());
    EXPECT_EQ(codec->encode(id).size(), f.format == WideFormat::kUuidv7 ? 36u : 26u);
    EXPECT_EQ(*codec->decode(codec->encode(id)), id);
    const Result<IdTextCodec> refused = IdTextCodec::create(layout_of("sonyflake"), f.format);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("coarser than 1 ms"), std::string::npos);
  }
  EXPECT_EQ(IdTextCodec::of(Encoding::kHex).encode(255), "00000000000000ff");
}

TEST(IdTextCodecsTest, MadeOnceRefusedPerEncoding) {
  const IdTextCodecs fine(layout_of("flurry"));
  const std::uint64_t id = (std::uint64_t{1000} << 22) | (std::uint64_t{5} << 12) | 7;
  for (const std::string_view name : {"dec", "decimal", "hex", "base32", "base62"}) {
    const Result<const IdTextCodec*> codec = fine.parse(name);
    ASSERT_TRUE(codec.ok()) << name;
    EXPECT_EQ((*codec)->encode(id), encode_id(id, parse_encoding(name).value()));
  }
  for (const WideFormatInfo& f : kWideFormats) {
    const Result<const IdTextCodec*> codec = fine.parse(f.name);
    ASSERT_TRUE(codec.ok()) << f.name;
    EXPECT_EQ((*codec)->encoding(), IdEncoding(f.format));
    EXPECT_EQ(*(*codec)->decode((*codec)->encode(id)), id);
    // The same object every time: nothing is made per request.
    EXPECT_EQ(*codec, *fine.get(f.format));
  }
  const Result<const IdTextCodec*> unknown = fine.parse("uuid", "parameter \"encoding\": ");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().reason(), Reason::kBadInput);
  EXPECT_EQ(
      unknown.status().message().rfind("parameter \"encoding\": unknown ID encoding \"uuid\"", 0),
      0u)
      << unknown.status().message();

  const IdTextCodecs coarse(layout_of("sonyflake"));
  EXPECT_TRUE(coarse.parse("base62").ok());
  for (const WideFormatInfo& f : kWideFormats) {
    const Result<const IdTextCodec*> refused = coarse.parse(f.name, "parameter \"encoding\": ");
    ASSERT_FALSE(refused.ok()) << f.name;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(refused.status().reason(), Reason::kBadInput);
    EXPECT_NE(refused.status().message().find("parameter \"encoding\": layout \""),
              std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find("coarser than 1 ms"), std::string::npos);
  }
}

}  // namespace
}  // namespace flurry

#include "flurry/layout.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flurry/clock.h"
#include "flurry/status.h"
#include "flurry/timefmt.h"

namespace flurry {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

constexpr std::string_view kPresetNames[] = {"flurry",    "twitter",       "sonyflake",
                                             "instagram", "uid-generator", "multiclock",
                                             "region",    "js-safe",       "tso"};

TimePoint from_ms(std::int64_t ms) {
  return TimePoint(milliseconds(ms));
}

// Parses text that must be accepted.
Layout must_parse(std::string_view text) {
  Result<Layout> r = Layout::parse(text);
  if (!r.ok()) {
    ADD_FAILURE() << "Layout::parse(\"" << text << "\") failed: " << r.status().to_string();
    return Layout::parse("flurry").value();
  }
  return std::move(r).value();
}

// A text that parses to a live layout for every preset (uid-generator's own epoch ran out).
std::string live_text(std::string_view preset) {
  if (preset == "uid-generator") return std::string(preset) + ";epoch=2025-01-01Z";
  return std::string(preset);
}

const Field* find_field(const Layout& layout, std::string_view name) {
  for (const Field& f : layout.fields()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// Expects `text` to be rejected with INVALID_ARGUMENT / BAD_INPUT and a message containing
// `needle`.
void expect_bad(std::string_view text, std::string_view needle) {
  SCOPED_TRACE("layout text: \"" + std::string(text) + "\"");
  const Result<Layout> r = Layout::parse(text);
  ASSERT_FALSE(r.ok()) << "accepted as " << r->to_string();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
  EXPECT_EQ(r.status().reason(), Reason::kBadInput) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message \"" << r.status().message() << "\" lacks \"" << needle << "\"";
}

// Checks the structural invariants every valid layout satisfies.
void expect_consistent(const Layout& l) {
  SCOPED_TRACE(l.to_string());
  ASSERT_FALSE(l.fields().empty());
  EXPECT_EQ(l.fields().front().kind, FieldKind::kTime);
  EXPECT_EQ(&l.time_field(), &l.fields().front());
  EXPECT_EQ(l.seq_field().kind, FieldKind::kSeq);
  EXPECT_EQ(l.seq_field().name, "seq");
  int sum = 0;
  int node_bits = 0;
  int expected_shift = l.total_bits();
  int time_count = 0;
  int seq_count = 0;
  int clock_count = 0;
  std::set<std::string> names;
  for (const Field& f : l.fields()) {
    EXPECT_GE(f.bits, 1) << f.name;
    expected_shift -= f.bits;
    EXPECT_EQ(f.shift, expected_shift) << f.name;
    EXPECT_EQ(f.max_value(), (std::uint64_t{1} << f.bits) - 1) << f.name;
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate " << f.name;
    sum += f.bits;
    switch (f.kind) {
      case FieldKind::kTime:
        ++time_count;
        EXPECT_EQ(f.name, "time");
        break;
      case FieldKind::kSeq:
        ++seq_count;
        break;
      case FieldKind::kClock:
        ++clock_count;
        EXPECT_EQ(f.name, "clock");
        EXPECT_EQ(l.clock_field(), &f);
        break;
      case FieldKind::kNode:
        node_bits += f.bits;
        break;
    }
  }
  EXPECT_EQ(expected_shift, 0);
  EXPECT_EQ(sum, l.total_bits());
  EXPECT_EQ(time_count, 1);
  EXPECT_EQ(seq_count, 1);
  EXPECT_LE(clock_count, 1);
  if (clock_count == 0) {
    EXPECT_EQ(l.clock_field(), nullptr);
    EXPECT_EQ(l.clock_generations(), 1u);
  } else {
    EXPECT_EQ(l.clock_generations(), std::uint64_t{1} << l.clock_field()->bits);
  }
  EXPECT_GE(node_bits, 0);  // none: one node ID (the tso preset)
  EXPECT_EQ(l.node_bits(), node_bits);
  EXPECT_EQ(l.node_count(), std::uint64_t{1} << node_bits);
  EXPECT_GT(l.unit(), Nanos(0));
}

void expect_same_structure(const Layout& a, const Layout& b) {
  ASSERT_EQ(a.fields().size(), b.fields().size());
  for (std::size_t i = 0; i < a.fields().size(); ++i) {
    EXPECT_EQ(a.fields()[i].name, b.fields()[i].name);
    EXPECT_EQ(a.fields()[i].kind, b.fields()[i].kind);
    EXPECT_EQ(a.fields()[i].bits, b.fields()[i].bits);
    EXPECT_EQ(a.fields()[i].shift, b.fields()[i].shift);
  }
  EXPECT_EQ(a.total_bits(), b.total_bits());
  EXPECT_EQ(a.node_bits(), b.node_bits());
  EXPECT_EQ(a.epoch(), b.epoch());
  EXPECT_EQ(a.unit(), b.unit());
  EXPECT_EQ(a.end(), b.end());
  EXPECT_EQ(a.to_string(), b.to_string());
  EXPECT_TRUE(a == b);
}

// ---------------------------------------------------------------------------------------------
// Presets

TEST(LayoutPresetsTest, ListsEveryPresetInDocumentationOrder) {
  const auto presets = Layout::presets();
  ASSERT_EQ(presets.size(), std::size(kPresetNames));
  for (std::size_t i = 0; i < presets.size(); ++i) {
    EXPECT_EQ(presets[i].name, kPresetNames[i]);
    EXPECT_FALSE(presets[i].text.empty()) << presets[i].name;
    EXPECT_FALSE(presets[i].summary.empty()) << presets[i].name;
  }
}

TEST(LayoutPresetsTest, EveryPresetParsesAndRoundTripsThroughItsCanonicalText) {
  for (const Layout::Preset& p : Layout::presets()) {
    SCOPED_TRACE(std::string(p.name));
    const Layout by_name = must_parse(p.name);
    EXPECT_EQ(by_name.preset_name(), p.name);
    expect_consistent(by_name);

    // The preset's own text yields the same layout, but not the preset's name.
    const Layout by_text = must_parse(p.text);
    EXPECT_EQ(by_text.preset_name(), "");
    expect_same_structure(by_name, by_text);

    const std::string canonical = by_name.to_string();
    const Layout reparsed = must_parse(canonical);
    expect_same_structure(by_name, reparsed);
    EXPECT_EQ(reparsed.to_string(), canonical) << "canonical text is not a fixed point";
    EXPECT_EQ(reparsed.preset_name(), "");
  }
}

TEST(LayoutPresetsTest, Flurry) {
  const Layout l = must_parse("flurry");
  expect_consistent(l);
  EXPECT_EQ(l.preset_name(), "flurry");
  ASSERT_EQ(l.fields().size(), 3u);
  EXPECT_EQ(l.fields()[0].name, "time");
  EXPECT_EQ(l.fields()[0].bits, 41);
  EXPECT_EQ(l.fields()[0].shift, 22);
  EXPECT_EQ(l.fields()[1].name, "node");
  EXPECT_EQ(l.fields()[1].kind, FieldKind::kNode);
  EXPECT_EQ(l.fields()[1].bits, 10);
  EXPECT_EQ(l.fields()[1].shift, 12);
  EXPECT_EQ(l.fields()[2].name, "seq");
  EXPECT_EQ(l.fields()[2].bits, 12);
  EXPECT_EQ(l.fields()[2].shift, 0);
  EXPECT_EQ(l.unit(), milliseconds(1));
  EXPECT_EQ(l.total_bits(), 63);
  EXPECT_EQ(l.node_bits(), 10);
  EXPECT_EQ(l.node_count(), 1024u);
  EXPECT_EQ(l.clock_field(), nullptr);
  EXPECT_EQ(l.clock_generations(), 1u);
  EXPECT_DOUBLE_EQ(l.rate_limit_per_second(), 4'096'000.0);

  const std::int64_t epoch_ms = 1'735'689'600'000;  // 2025-01-01T00:00:00Z
  EXPECT_EQ(l.epoch(), from_ms(epoch_ms));
  EXPECT_EQ(format_time(l.epoch()), "2025-01-01T00:00:00.000Z");
  // end = epoch + 2^41 ms.
  const std::int64_t end_ms = epoch_ms + (std::int64_t{1} << 41);
  EXPECT_EQ(end_ms, 3'934'712'855'552);
  EXPECT_EQ(l.end(), from_ms(end_ms));
  EXPECT_EQ(format_time(l.end()), "2094-09-07T15:47:35.552Z");
  EXPECT_EQ(l.to_string(), "time:41@1ms,node:10,seq:12;epoch=2025-01-01T00:00:00.000Z");
}

TEST(LayoutPresetsTest, Twitter) {
  const Layout l = must_parse("twitter");
  expect_consistent(l);
  ASSERT_EQ(l.fields().size(), 4u);
  EXPECT_EQ(l.fields()[0].bits, 41);
  EXPECT_EQ(l.fields()[0].shift, 22);
  EXPECT_EQ(l.fields()[1].name, "datacenter");
  EXPECT_EQ(l.fields()[1].kind, FieldKind::kNode);
  EXPECT_EQ(l.fields()[1].bits, 5);
  EXPECT_EQ(l.fields()[1].shift, 17);
  EXPECT_EQ(l.fields()[2].name, "worker");
  EXPECT_EQ(l.fields()[2].kind, FieldKind::kNode);
  EXPECT_EQ(l.fields()[2].bits, 5);
  EXPECT_EQ(l.fields()[2].shift, 12);
  EXPECT_EQ(l.fields()[3].name, "seq");
  EXPECT_EQ(l.fields()[3].bits, 12);
  EXPECT_EQ(l.fields()[3].shift, 0);
  EXPECT_EQ(l.unit(), milliseconds(1));
  EXPECT_EQ(l.node_bits(), 10);
  EXPECT_EQ(l.node_count(), 1024u);
  EXPECT_EQ(l.epoch(), from_ms(1'288'834'974'657));
  EXPECT_EQ(format_time(l.epoch()), "2010-11-04T01:42:54.657Z");
  EXPECT_EQ(l.end(), from_ms(1'288'834'974'657 + (std::int64_t{1} << 41)));
  EXPECT_DOUBLE_EQ(l.rate_limit_per_second(), 4'096'000.0);
}

TEST(LayoutPresetsTest, SonyflakePutsTheMachineInTheLowestBits) {
  const Layout l = must_parse("sonyflake");
  expect_consistent(l);
  ASSERT_EQ(l.fields().size(), 3u);
  EXPECT_EQ(l.fields()[0].name, "time");
  EXPECT_EQ(l.fields()[0].bits, 39);
  EXPECT_EQ(l.fields()[0].shift, 24);
  EXPECT_EQ(l.fields()[1].name, "seq");
  EXPECT_EQ(l.fields()[1].bits, 8);
  EXPECT_EQ(l.fields()[1].shift, 16);
  EXPECT_EQ(l.fields()[2].name, "machine");
  EXPECT_EQ(l.fields()[2].kind, FieldKind::kNode);
  EXPECT_EQ(l.fields()[2].bits, 16);
  EXPECT_EQ(l.fields()[2].shift, 0);
  EXPECT_EQ(&l.seq_field(), &l.fields()[1]);
  EXPECT_EQ(l.unit(), milliseconds(10));
  EXPECT_EQ(l.node_count(), 65536u);
  EXPECT_EQ(l.epoch(), TimePoint(seconds(1'409'529'600)));  // 2014-09-01Z
  EXPECT_EQ(l.end(), l.epoch() + milliseconds(10) * (std::int64_t{1} << 39));
  EXPECT_DOUBLE_EQ(l.rate_limit_per_second(), 25600.0);
  EXPECT_EQ(l.to_string(), "time:39@10ms,seq:8,machine:16;epoch=2014-09-01T00:00:00.000Z");

  // The machine really is in the low bits of a composed ID.
  const Result<std::uint64_t> id = l.compose({.ticks = 1, .clock = 0, .node = 0xabcd, .seq = 2});
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(*id, (std::uint64_t{1} << 24) | (std::uint64_t{2} << 16) | 0xabcd);
}

TEST(LayoutPresetsTest, Instagram) {
  const Layout l = must_parse("instagram");
  expect_consistent(l);
  ASSERT_EQ(l.fields().size(), 3u);
  EXPECT_EQ(l.fields()[0].bits, 40);
  EXPECT_EQ(l.fields()[0].shift, 23);
  EXPECT_EQ(l.fields()[1].name, "shard");
  EXPECT_EQ(l.fields()[1].bits, 13);
  EXPECT_EQ(l.fields()[1].shift, 10);
  EXPECT_EQ(l.fields()[2].name, "seq");
  EXPECT_EQ(l.fields()[2].bits, 10);
  EXPECT_EQ(l.node_count(), 8192u);
  EXPECT_EQ(l.unit(), milliseconds(1));
  EXPECT_EQ(l.epoch(), from_ms(1'314'220'021'721));
  EXPECT_EQ(format_time(l.epoch()), "2011-08-24T21:07:01.721Z");
  EXPECT_DOUBLE_EQ(l.rate_limit_per_second(), 1'024'000.0);
}

TEST(LayoutPresetsTest, UidGeneratorParsesButItsTimeFieldRanOutIn2024) {
  const Layout l = must_parse("uid-generator");
  expect_consistent(l);
  ASSERT_EQ(l.fields().size(), 3u);
  EXPECT_EQ(l.fields()[0].bits, 28);
  EXPECT_EQ(l.fields()[0].shift, 35);
  EXPECT_EQ(l.fields()[1].name, "worker");
  EXPECT_EQ(l.fields()[1].bits, 22);
  EXPECT_EQ(l.fields()[2].bits, 13);
  EXPECT_EQ(l.unit(), seconds(1));
  EXPECT_EQ(l.node_count(), std::uint64_t{1} << 22);
  EXPECT_EQ(format_time(l.epoch()), "2016-05-20T00:00:00.000Z");
  EXPECT_EQ(format_time(l.end()), "2024-11-20T21:24:16.000Z");
  EXPECT_DOUBLE_EQ(l.rate_limit_per_second(), 8192.0);

  for (const TimePoint now : {SystemClock::coarse().now(), from_ms(1'735'689'600'000)}) {
    const Status st = l.check_alive(now);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(st.reason(), Reason::kTimeExhausted);
    EXPECT_NE(st.message().find("2024"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("epoch="), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("uid-generator"), std::string::npos) << st.message();
  }
  // Alive the second before it ran out.
  EXPECT_TRUE(l.check_alive(l.end() - nanoseconds(1)).ok());
}

TEST(LayoutPresetsTest, UidGeneratorWithARecentEpochIsAlive) {
  const Layout l = must_parse("uid-generator;epoch=2025-01-01Z");
  expect_consistent(l);
  EXPECT_EQ(l.preset_name(), "");  // overridden: no longer the preset
  EXPECT_EQ(l.epoch(), from_ms(1'735'689'600'000));
  EXPECT_EQ(l.fields()[0].bits, 28);
  EXPECT_EQ(l.unit(), seconds(1));
  EXPECT_EQ(l.end(), l.epoch() + seconds(std::int64_t{1} << 28));
  EXPECT_TRUE(l.check_alive(SystemClock::coarse().now()).ok());
  EXPECT_TRUE(l.check_alive(from_ms(1'735'689'600'000)).ok());
  EXPECT_EQ(l.to_string(), "time:28@1s,worker:22,seq:13;epoch=2025-01-01T00:00:00.000Z");
  EXPECT_EQ(must_parse("uid-generator").preset_name(), "uid-generator");
}

TEST(LayoutPresetsTest, Multiclock) {
  const Layout l = must_parse("multiclock");
  expect_consistent(l);
  ASSERT_EQ(l.fields().size(), 4u);
  EXPECT_EQ(l.fields()[0].bits, 41);
  EXPECT_EQ(l.fields()[0].shift, 22);
  ASSERT_NE(l.clock_field(), nullptr);
  EXPECT_EQ(l.clock_field(), &l.fields()[1]);
  EXPECT_EQ(l.clock_field()->name, "clock");
  EXPECT_EQ(l.clock_field()->kind, FieldKind::kClock);
  EXPECT_EQ(l.clock_field()->bits, 4);
  EXPECT_EQ(l.clock_field()->shift, 18);
  EXPECT_EQ(l.clock_generations(), 16u);
  EXPECT_EQ(l.fields()[2].name, "worker");
  EXPECT_EQ(l.fields()[2].shift, 10);
  EXPECT_EQ(l.node_bits(), 8);  // the clock field is not a node field
  EXPECT_EQ(l.node_count(), 256u);
  EXPECT_EQ(l.seq_field().bits, 10);
  EXPECT_EQ(format_time(l.epoch()), "2025-01-01T00:00:00.000Z");
  // The clock generations do not add to the rate limit.
  EXPECT_DOUBLE_EQ(l.rate_limit_per_second(), 1'024'000.0);

  const Result<std::uint64_t> id = l.compose({.ticks = 0, .clock = 9, .node = 0, .seq = 0});
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(*id, std::uint64_t{9} << 18);
  EXPECT_EQ(l.field_value(*id, *l.clock_field()), 9u);
}

TEST(LayoutPresetsTest, Region) {
  const Layout l = must_parse("region");
  expect_consistent(l);
  ASSERT_EQ(l.fields().size(), 4u);
  EXPECT_EQ(l.fields()[0].bits, 40);
  EXPECT_EQ(l.fields()[1].name, "region");
  EXPECT_EQ(l.fields()[1].bits, 3);
  EXPECT_EQ(l.fields()[1].shift, 20);
  EXPECT_EQ(l.fields()[2].name, "worker");
  EXPECT_EQ(l.fields()[2].bits, 10);
  EXPECT_EQ(l.fields()[2].shift, 10);
  EXPECT_EQ(l.seq_field().bits, 10);
  EXPECT_EQ(l.node_bits(), 13);
  EXPECT_EQ(l.node_count(), 8192u);
  EXPECT_EQ(format_time(l.epoch()), "2025-01-01T00:00:00.000Z");
}

TEST(LayoutPresetsTest, JsSafeFitsIn53Bits) {
  const Layout l = must_parse("js-safe");
  expect_consistent(l);
  EXPECT_EQ(l.total_bits(), 53);
  ASSERT_EQ(l.fields().size(), 3u);
  EXPECT_EQ(l.fields()[0].bits, 41);
  EXPECT_EQ(l.fields()[0].shift, 12);
  EXPECT_EQ(l.fields()[1].bits, 5);
  EXPECT_EQ(l.fields()[2].bits, 7);
  EXPECT_EQ(l.node_count(), 32u);
  EXPECT_DOUBLE_EQ(l.rate_limit_per_second(), 128'000.0);
  EXPECT_EQ(l.to_string(), "time:41@1ms,node:5,seq:7;epoch=2025-01-01T00:00:00.000Z;bits=53");

  const std::uint64_t limit = std::uint64_t{1} << 53;
  const Result<std::uint64_t> max_id =
      l.compose({.ticks = l.time_field().max_value(), .clock = 0, .node = 31, .seq = 127});
  ASSERT_TRUE(max_id.ok()) << max_id.status().to_string();
  EXPECT_EQ(*max_id, limit - 1);

  std::mt19937_64 rng(53);
  for (int i = 0; i < 10000; ++i) {
    const IdParts parts{.ticks = rng() & l.time_field().max_value(),
                        .clock = 0,
                        .node = rng() % l.node_count(),
                        .seq = rng() & l.seq_field().max_value()};
    const Result<std::uint64_t> id = l.compose(parts);
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    ASSERT_LT(*id, limit);
  }
}

TEST(LayoutPresetsTest, RateLimits) {
  EXPECT_DOUBLE_EQ(must_parse("sonyflake").rate_limit_per_second(), 25600.0);
  EXPECT_DOUBLE_EQ(must_parse("uid-generator").rate_limit_per_second(), 8192.0);
  EXPECT_DOUBLE_EQ(must_parse("flurry").rate_limit_per_second(), 4'096'000.0);
  EXPECT_DOUBLE_EQ(
      must_parse("time:40@100us,node:10,seq:13;epoch=2025-01-01Z").rate_limit_per_second(),
      81'920'000.0);
}

TEST(LayoutPresetsTest, EveryLivePresetIsAliveNow) {
  const TimePoint now = SystemClock::coarse().now();
  for (std::string_view name : kPresetNames) {
    const Layout l = must_parse(live_text(name));
    EXPECT_TRUE(l.check_alive(now).ok()) << name << ": " << l.check_alive(now).to_string();
  }
}

TEST(LayoutPresetsTest, OverridesKeepTheFieldsAndDropTheName) {
  const Layout l = must_parse("flurry;epoch=2030-06-01T12:00:00Z");
  EXPECT_EQ(l.preset_name(), "");
  EXPECT_EQ(format_time(l.epoch()), "2030-06-01T12:00:00.000Z");
  EXPECT_EQ(l.fields().size(), 3u);
  EXPECT_EQ(l.to_string(), "time:41@1ms,node:10,seq:12;epoch=2030-06-01T12:00:00.000Z");

  // A preset name surrounded by blanks is still the preset.
  EXPECT_EQ(must_parse("  twitter\t").preset_name(), "twitter");

  // The preset's bits can be overridden too, and then must still fit.
  expect_bad("js-safe;bits=63", "sum to");
  expect_bad("flurry;bits=53", "sum to");
  // An override may be given once; the preset's own option does not count.
  expect_bad("flurry;epoch=2030-01-01Z;epoch=2031-01-01Z", "twice");
  // The preset names are exact.
  expect_bad("Flurry", "unknown preset");
}

// ---------------------------------------------------------------------------------------------
// Custom layouts

TEST(LayoutParseTest, AcceptsCustomLayouts) {
  const Layout l =
      must_parse("time:41@1ms,datacenter:5,worker:5,seq:12;epoch=2010-11-04T01:42:54.657Z");
  expect_consistent(l);
  expect_same_structure(l, must_parse("twitter"));
  EXPECT_EQ(l.preset_name(), "");

  // Blanks around tokens are ignored.
  const Layout spaced =
      must_parse(" time : 41 @ 1ms , node : 10 , seq : 12 ; epoch = 2025-01-01Z ");
  expect_same_structure(spaced, must_parse("flurry"));

  // The unit defaults to 1 ms.
  expect_same_structure(must_parse("time:41,node:10,seq:12;epoch=2025-01-01Z"),
                        must_parse("flurry"));

  // The epoch in Unix milliseconds.
  expect_same_structure(must_parse("time:41,node:10,seq:12;epoch=1735689600000"),
                        must_parse("flurry"));

  // Field order below time is free; the clock field may sit anywhere below time.
  const Layout odd = must_parse("time:40@1ms,seq:10,clock:3,node:10;epoch=2025-01-01Z");
  expect_consistent(odd);
  EXPECT_EQ(odd.clock_field()->shift, 10);
  EXPECT_EQ(odd.seq_field().shift, 13);

  // Options in either order, bits below 63.
  const Layout small = must_parse("time:30@1s,node:2,seq:8;bits=40;epoch=2025-01-01Z");
  expect_consistent(small);
  EXPECT_EQ(small.total_bits(), 40);
  EXPECT_EQ(small.to_string(), "time:30@1s,node:2,seq:8;epoch=2025-01-01T00:00:00.000Z;bits=40");

  // bits=63 is the default and is not written out.
  EXPECT_EQ(must_parse("time:41,node:10,seq:12;epoch=2025-01-01Z;bits=63").to_string(),
            must_parse("flurry").to_string());

  // The smallest layout.
  const Layout tiny = must_parse("time:1,n:1,seq:1;bits=3;epoch=2025-01-01Z");
  expect_consistent(tiny);
  EXPECT_EQ(tiny.node_count(), 2u);

  // Field names: up to 32 of a-z, 0-9, _ starting with a letter.
  const std::string long_name(32, 'n');
  const Layout named = must_parse("time:41,a_1:5," + long_name + ":5,seq:12;epoch=2025-01-01Z");
  EXPECT_EQ(named.fields()[2].name, long_name);
  EXPECT_EQ(named.node_bits(), 10);
}

TEST(LayoutParseTest, CanonicalisesUnits) {
  struct Case {
    std::string unit;
    Nanos expected;
    std::string canonical;
  };
  const std::vector<Case> cases = {
      {"1ms", milliseconds(1), "1ms"},
      {"10ms", milliseconds(10), "10ms"},
      {"1s", seconds(1), "1s"},
      {"100us", std::chrono::microseconds(100), "100us"},
      {"1000us", milliseconds(1), "1ms"},
      {"1000ms", seconds(1), "1s"},
      {"1500us", std::chrono::microseconds(1500), "1500us"},
      {"60s", seconds(60), "60s"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.unit);
    const Layout l = must_parse("time:41@" + c.unit + ",node:10,seq:12;epoch=2025-01-01Z");
    EXPECT_EQ(l.unit(), c.expected);
    EXPECT_EQ(l.to_string(),
              "time:41@" + c.canonical + ",node:10,seq:12;epoch=2025-01-01T00:00:00.000Z");
    expect_same_structure(l, must_parse(l.to_string()));
  }
}

TEST(LayoutParseTest, EndSaturatesForVeryWideTimeFields) {
  const Layout l = must_parse("time:61@1s,node:1,seq:1;epoch=2025-01-01Z");
  EXPECT_EQ(l.end(), TimePoint::max());
  EXPECT_TRUE(l.check_alive(SystemClock::coarse().now()).ok());
  EXPECT_EQ(l.time_of(l.time_field().max_value()), TimePoint::max());
  expect_same_structure(l, must_parse(l.to_string()));
}

TEST(LayoutParseTest, AcceptsTextUpTo1024Characters) {
  const std::string padded = "flurry" + std::string(1024 - 6, ' ');
  ASSERT_EQ(padded.size(), 1024u);
  EXPECT_TRUE(Layout::parse(padded).ok());
  expect_bad(padded + " ", "1024");
  expect_bad(std::string(5000, 'x'), "1024");
}

// ---------------------------------------------------------------------------------------------
// Validation errors

constexpr std::string_view kEpoch = ";epoch=2025-01-01Z";

std::string with_epoch(std::string_view fields) {
  return std::string(fields) + std::string(kEpoch);
}

TEST(LayoutParseErrorsTest, EmptyText) {
  expect_bad("", "empty");
  expect_bad("   ", "empty");
  expect_bad("\t", "empty");
}

TEST(LayoutParseErrorsTest, ZeroWidthField) {
  expect_bad(with_epoch("time:41,node:22,seq:0"), "at least 1 bit");
  expect_bad(with_epoch("time:41,node:0,seq:22"), "at least 1 bit");
  expect_bad(with_epoch("time:0,node:41,seq:22"), "at least 1 bit");
  expect_bad(with_epoch("time:41,clock:0,node:10,seq:12"), "at least 1 bit");
}

TEST(LayoutParseErrorsTest, WidthsMustSumToTheTotal) {
  expect_bad(with_epoch("time:42,node:10,seq:12"), "sum to");  // 64
  expect_bad(with_epoch("time:40,node:10,seq:12"), "sum to");  // 62
  expect_bad(with_epoch("time:42,node:10,seq:12"), "64");
  expect_bad(with_epoch("time:40,node:10,seq:12"), "62");
  expect_bad(with_epoch("time:41,node:10,seq:12") + ";bits=53", "sum to");
  expect_bad(with_epoch("time:41,node:5,seq:6") + ";bits=53", "sum to");
}

TEST(LayoutParseErrorsTest, BadUnits) {
  expect_bad(with_epoch("time:41@1xs,node:10,seq:12"), "unknown time unit");
  expect_bad(with_epoch("time:41@1xs,node:10,seq:12"), "1xs");
  expect_bad(with_epoch("time:41@0ms,node:10,seq:12"), "0ms");
  expect_bad(with_epoch("time:41@0ms,node:10,seq:12"), "from 1");
  expect_bad(with_epoch("time:41@ms,node:10,seq:12"), "time unit");
  expect_bad(with_epoch("time:41@,node:10,seq:12"), "time unit");
  expect_bad(with_epoch("time:41@1h,node:10,seq:12"), "unknown time unit");
  expect_bad(with_epoch("time:41@-1ms,node:10,seq:12"), "time unit");
  expect_bad(with_epoch("time:41@1000000001s,node:10,seq:12"), "time unit");
}

TEST(LayoutParseErrorsTest, MissingOrMisplacedFields) {
  expect_bad(with_epoch("node:51,seq:12"), "no time field");
  expect_bad(with_epoch("node:10,time:41,seq:12"), "time field must come first");
  expect_bad(with_epoch("time:41,node:22"), "no seq field");
}

// Without a node field a layout has one node ID (the timestamp oracle's `tso` preset).
TEST(LayoutParseTest, NoNodeFieldMeansOneNode) {
  Result<Layout> tso = Layout::parse("tso");
  ASSERT_TRUE(tso.ok()) << tso.status().to_string();
  EXPECT_EQ(tso->node_count(), 1u);
  EXPECT_EQ(tso->to_string(), "time:45@1ms,seq:18;epoch=2025-01-01T00:00:00.000Z");
  Result<Layout> plain = Layout::parse(with_epoch("time:47,clock:4,seq:12"));
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->node_count(), 1u);
  // Consecutive values within a millisecond are consecutive integers.
  Result<std::uint64_t> a = tso->compose({.ticks = 5, .clock = 0, .node = 0, .seq = 7});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(*a, (std::uint64_t{5} << 18) | 7u);
  EXPECT_FALSE(tso->compose({.ticks = 5, .clock = 0, .node = 1, .seq = 7}).ok());
}

TEST(LayoutParseErrorsTest, DuplicateFieldNames) {
  expect_bad(with_epoch("time:41,node:5,node:5,seq:12"), "used twice");
  expect_bad(with_epoch("time:41,node:10,seq:6,seq:6"), "used twice");
  expect_bad(with_epoch("time:41,clock:2,clock:2,node:6,seq:12"), "used twice");
  expect_bad(with_epoch("time:31,time:10,node:10,seq:12"), "used twice");
}

TEST(LayoutParseErrorsTest, BadFieldNames) {
  expect_bad(with_epoch("time:41,Node:10,seq:12"), "field name");
  expect_bad(with_epoch("time:41,9x:10,seq:12"), "field name");
  expect_bad(with_epoch("time:41,a-b:10,seq:12"), "field name");
  expect_bad(with_epoch("time:41,:10,seq:12"), "field name");
  expect_bad(with_epoch("time:41,_n:10,seq:12"), "field name");
  expect_bad(with_epoch("time:41,n o:10,seq:12"), "field name");
  expect_bad(with_epoch("time:41," + std::string(33, 'n') + ":10,seq:12"), "field name");
}

TEST(LayoutParseErrorsTest, MalformedFields) {
  expect_bad(with_epoch("time41,node:10,seq:12"), "name:width");
  expect_bad(with_epoch("time:41,node10,seq:12"), "name:width");
  expect_bad(with_epoch("time:41,node:abc,seq:12"), "width must be a whole number");
  expect_bad(with_epoch("time:41,node:,seq:12"), "width must be a whole number");
  expect_bad(with_epoch("time:41,node:-1,seq:12"), "width must be a whole number");
  expect_bad(with_epoch("time:41,node:1.5,seq:12"), "width must be a whole number");
  expect_bad(with_epoch("time:41,node:10x,seq:12"), "width must be a whole number");
  expect_bad(with_epoch("time:64,node:10,seq:12"), "at most 63 bits");
  expect_bad(with_epoch("time:41,node:64,seq:12"), "at most 63 bits");
  expect_bad(with_epoch("time:41,,node:10,seq:12"), "field 2 is empty");
  expect_bad(with_epoch("time:41,node:10,seq:12,"), "is empty");
  expect_bad(with_epoch(",time:41,node:10,seq:12"), "field 1 is empty");
  expect_bad(with_epoch("time:41,node:10@1ms,seq:12"), "only the time field takes a unit");
  expect_bad(with_epoch("time:41,node:10,seq:12@1ms"), "only the time field takes a unit");
}

TEST(LayoutParseErrorsTest, BadOptions) {
  expect_bad("time:41,node:10,seq:12;epoch=2025-01-01Z;foo=1", "unknown option");
  expect_bad("time:41,node:10,seq:12;epoch=2025-01-01Z;foo=1", "foo");
  expect_bad("flurry;foo=1", "unknown option");
  expect_bad("time:41,node:10,seq:12;epoch=2025-01-01Z;epoch=2025-01-01Z", "given twice");
  expect_bad("time:41,node:10,seq:12;bits=63;epoch=2025-01-01Z;bits=63", "given twice");
  expect_bad("time:41,node:10,seq:12;epoch", "key=value");
  expect_bad("time:41,node:10,seq:12;epoch=2025-01-01Z;", "key=value");
  expect_bad("flurry;", "key=value");
}

TEST(LayoutParseErrorsTest, BadEpochs) {
  expect_bad("time:41,node:10,seq:12;epoch=2025-13-01", "epoch");
  expect_bad("time:41,node:10,seq:12;epoch=yesterday", "epoch");
  expect_bad("time:41,node:10,seq:12;epoch=yesterday", "yesterday");
  expect_bad("time:41,node:10,seq:12;epoch=", "epoch");
  expect_bad("time:41,node:10,seq:12;epoch=2025-02-30Z", "epoch");
  expect_bad("flurry;epoch=2025-13-01", "epoch");
  // Sub-millisecond epochs cannot be written in the canonical text.
  expect_bad("time:41,node:10,seq:12;epoch=2025-01-01T00:00:00.0001Z", "whole millisecond");
  expect_bad("time:41,node:10,seq:12;epoch=2025-01-01T00:00:00.000000001Z", "whole millisecond");
  expect_bad("time:41,node:10,seq:12;epoch=1969-12-31T23:59:59.9995Z", "whole millisecond");
  // A whole millisecond written with more digits is fine.
  EXPECT_TRUE(Layout::parse("time:41,node:10,seq:12;epoch=2025-01-01T00:00:00.001000Z").ok());
}

TEST(LayoutParseErrorsTest, BadTotalBits) {
  expect_bad(with_epoch("time:41,node:10,seq:13") + ";bits=64", "bits=\"64\"");
  expect_bad(with_epoch("time:41,node:10,seq:12") + ";bits=2", "bits=\"2\"");
  expect_bad(with_epoch("time:41,node:10,seq:12") + ";bits=abc", "bits=\"abc\"");
  expect_bad(with_epoch("time:41,node:10,seq:12") + ";bits=", "bits=\"\"");
  expect_bad(with_epoch("time:41,node:10,seq:12") + ";bits=-63", "bits=");
  expect_bad(with_epoch("time:41,node:10,seq:12") + ";bits=0", "bits=");
}

TEST(LayoutParseErrorsTest, CustomLayoutsNeedAnEpoch) {
  expect_bad("time:41,node:10,seq:12", "no epoch");
  expect_bad("time:41,node:10,seq:12;bits=63", "no epoch");
}

TEST(LayoutParseErrorsTest, UnknownPresetName) {
  expect_bad("snowflake", "unknown preset \"snowflake\"");
  expect_bad("Flurry", "presets: flurry, twitter");
}

// Every fragment of the text a message shows is quoted: double quotes around it, `"` and `\`
// escaped, control and non-ASCII bytes as \xNN, at most 64 bytes of it.
TEST(LayoutParseErrorsTest, QuotesTheFragmentsItShows) {
  expect_bad(with_epoch("time:41@1xs,node:10,seq:12"), R"(unknown time unit "1xs")");
  expect_bad(with_epoch("time:41@0ms,node:10,seq:12"), R"(time unit "0ms" needs)");
  expect_bad("flurry;foo=1", R"(unknown option "foo")");
  expect_bad("flurry;epoch=2025-01-01Z;epoch=2025-01-01Z", R"(option "epoch" is given twice)");
  expect_bad("flurry;epoch", R"(option "epoch" must be key=value)");
  expect_bad(with_epoch("time:41,node:5,node:5,seq:12"), R"(field 3 "node:5": the name "node")");
  expect_bad(with_epoch("time:41,node10,seq:12"), R"(field 2 "node10" must be name:width)");
  expect_bad("time:41,node:10,seq:12;epoch=2025-01-01T00:00:00.0001Z",
             R"(epoch "2025-01-01T00:00:00.0001Z" must be a whole millisecond)");
}

// What a message shows of hostile input is one line of printable ASCII of bounded length.
void expect_bad_and_printable(std::string_view text, std::string_view needle) {
  expect_bad(text, needle);
  const Result<Layout> r = Layout::parse(text);
  ASSERT_FALSE(r.ok());
  const std::string& message = r.status().message();
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    EXPECT_TRUE(u >= 0x20 && u < 0x7f) << "byte " << static_cast<int>(u) << " in " << message;
  }
  EXPECT_LT(message.size(), 400u) << message;
}

TEST(LayoutParseErrorsTest, QuotesControlBytes) {
  expect_bad_and_printable("snow\x01\nflake", R"(unknown preset "snow\x01\x0aflake")");
  expect_bad_and_printable(with_epoch("time:41@1\x1bs,node:10,seq:12"),
                           R"(unknown time unit "1\x1bs")");
  expect_bad_and_printable(with_epoch("time:41,no\rde:10,seq:12"), R"(field 2 "no\x0dde:10")");
  expect_bad_and_printable(with_epoch("time:41,node:10,seq:12") + ";bits=\x7f", R"(bits="\x7f")");
  expect_bad_and_printable(std::string("flurry;b\0its=1", 15), R"(unknown option "b\x00its")");
  expect_bad_and_printable("caf\xc3\xa9", R"(unknown preset "caf\xc3\xa9")");
}

TEST(LayoutParseErrorsTest, QuotesQuotesAndBackslashes) {
  expect_bad_and_printable(R"(snow"flake)", R"(unknown preset "snow\"flake")");
  expect_bad_and_printable(R"(snow\flake)", R"(unknown preset "snow\\flake")");
  expect_bad_and_printable(R"(it's)", R"(unknown preset "it's")");
  expect_bad_and_printable(with_epoch(R"(time:41,n"o:10,seq:12)"), R"(field 2 "n\"o:10")");
  expect_bad_and_printable(R"(flurry;"epoch"=1)", R"(unknown option "\"epoch\"")");
  expect_bad_and_printable(R"(flurry;epoch=2025-01-01Z;bits=")", R"(bits="\"")");
}

TEST(LayoutParseErrorsTest, CutsLongFragmentsShort) {
  const std::string a64(64, 'a');
  // A 1000-byte preset name: the text and the name are each shown as 64 bytes and "...".
  expect_bad_and_printable(std::string(1000, 'a'), "unknown preset \"" + a64 + "...\"");
  // A long field name, a long option key, a long unit.
  expect_bad_and_printable(with_epoch("time:41," + std::string(500, 'n') + ":10,seq:12"),
                           "field 2 \"" + std::string(64, 'n') + "...\"");
  expect_bad_and_printable("flurry;" + std::string(500, 'k') + "=1",
                           "unknown option \"" + std::string(64, 'k') + "...\"");
  expect_bad_and_printable(with_epoch("time:41@" + std::string(500, '9') + "ms,node:10,seq:12"),
                           "time unit \"" + std::string(64, '9') + "...\"");
  // Exactly 64 bytes are shown whole.
  expect_bad_and_printable(a64, "unknown preset \"" + a64 + "\" (");
}

TEST(LayoutParseErrorsTest, TextTooLong) {
  std::string text = "time:41,node:10,seq:12;epoch=2025-01-01Z";
  text.append(1025 - text.size(), ' ');
  ASSERT_EQ(text.size(), 1025u);
  expect_bad(text, "limit");
}

// ---------------------------------------------------------------------------------------------
// check_alive

TEST(LayoutCheckAliveTest, EpochInTheFuture) {
  const Layout l = must_parse("flurry");
  for (const TimePoint now :
       {l.epoch() - nanoseconds(1), l.epoch() - seconds(86400 * 365), TimePoint(seconds(0))}) {
    const Status st = l.check_alive(now);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(st.reason(), Reason::kClockBeforeEpoch);
    EXPECT_NE(st.message().find("2025-01-01"), std::string::npos) << st.message();
  }
  const Layout future = must_parse("flurry;epoch=2200-01-01Z");
  const Status st = future.check_alive(SystemClock::coarse().now());
  EXPECT_EQ(st.reason(), Reason::kClockBeforeEpoch) << st.to_string();
}

TEST(LayoutCheckAliveTest, EndInThePast) {
  const Layout l = must_parse("time:20@1ms,node:21,seq:22;epoch=2025-01-01Z");
  // 2^20 ms is about 17.5 minutes.
  EXPECT_EQ(l.end(), l.epoch() + milliseconds(1 << 20));
  for (const TimePoint now : {l.end(), l.end() + nanoseconds(1), SystemClock::coarse().now()}) {
    const Status st = l.check_alive(now);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(st.reason(), Reason::kTimeExhausted);
    EXPECT_NE(st.message().find(format_time(l.end())), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("epoch="), std::string::npos) << st.message();
  }
}

TEST(LayoutCheckAliveTest, AliveBetweenEpochAndEnd) {
  const Layout l = must_parse("time:20@1ms,node:21,seq:22;epoch=2025-01-01Z");
  for (const TimePoint now : {l.epoch(), l.epoch() + milliseconds(1), l.end() - nanoseconds(1)}) {
    EXPECT_TRUE(l.check_alive(now).ok()) << format_time(now);
  }
  EXPECT_TRUE(must_parse("flurry").check_alive(SystemClock::coarse().now()).ok());
}

// ---------------------------------------------------------------------------------------------
// compose / decompose

IdParts random_parts(const Layout& l, std::mt19937_64& rng) {
  IdParts p;
  // Mix uniformly random values with the field edges, which are where off-by-one bugs live.
  auto pick = [&rng](std::uint64_t max) -> std::uint64_t {
    switch (rng() % 8) {
      case 0:
        return 0;
      case 1:
        return max;
      default:
        return rng() & max;
    }
  };
  p.ticks = pick(l.time_field().max_value());
  p.clock = l.clock_field() ? pick(l.clock_field()->max_value()) : 0;
  p.node = pick(l.node_count() - 1);
  p.seq = pick(l.seq_field().max_value());
  return p;
}

TEST(LayoutComposeTest, ComposeThenDecomposeIsTheIdentity) {
  for (std::string_view name : kPresetNames) {
    SCOPED_TRACE(std::string(name));
    const Layout l = must_parse(live_text(name));
    std::mt19937_64 rng(20250101);
    const std::uint64_t limit = std::uint64_t{1} << l.total_bits();
    for (int i = 0; i < 100'000; ++i) {
      const IdParts parts = random_parts(l, rng);
      const Result<std::uint64_t> id = l.compose(parts);
      ASSERT_TRUE(id.ok()) << id.status().to_string();
      ASSERT_LT(*id, limit);
      const Result<IdParts> back = l.decompose(*id);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      ASSERT_EQ(*back, parts) << "id " << *id;
      ASSERT_EQ(l.field_value(*id, l.time_field()), parts.ticks);
      ASSERT_EQ(l.field_value(*id, l.seq_field()), parts.seq);
      if (l.clock_field()) {
        ASSERT_EQ(l.field_value(*id, *l.clock_field()), parts.clock);
      }
    }
  }
}

TEST(LayoutComposeTest, DecomposeThenComposeIsTheIdentity) {
  for (std::string_view name : kPresetNames) {
    SCOPED_TRACE(std::string(name));
    const Layout l = must_parse(live_text(name));
    std::mt19937_64 rng(42);
    const std::uint64_t mask = (std::uint64_t{1} << l.total_bits()) - 1;
    for (int i = 0; i < 100'000; ++i) {
      std::uint64_t id = rng() & mask;
      if (i == 0) id = 0;
      if (i == 1) id = mask;
      const Result<IdParts> parts = l.decompose(id);
      ASSERT_TRUE(parts.ok()) << parts.status().to_string();
      ASSERT_LT(parts->node, l.node_count());
      const Result<std::uint64_t> back = l.compose(*parts);
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      ASSERT_EQ(*back, id);
    }
  }
}

TEST(LayoutComposeTest, ComposeIsMonotoneInTime) {
  // The time field is on top, so a later tick always gives a larger ID.
  for (std::string_view name : kPresetNames) {
    const Layout l = must_parse(live_text(name));
    const IdParts late_low{.ticks = 1, .clock = 0, .node = 0, .seq = 0};
    const IdParts early_high{.ticks = 0,
                             .clock = l.clock_field() ? l.clock_field()->max_value() : 0,
                             .node = l.node_count() - 1,
                             .seq = l.seq_field().max_value()};
    const Result<std::uint64_t> a = l.compose(late_low);
    const Result<std::uint64_t> b = l.compose(early_high);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    EXPECT_GT(*a, *b) << name;
    EXPECT_EQ(*a, *b + 1) << name << ": every bit below time is used";
  }
}

void expect_out_of_range(const Result<std::uint64_t>& r, std::string_view needle) {
  ASSERT_FALSE(r.ok()) << "composed " << *r;
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange) << r.status().to_string();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << "message \"" << r.status().message() << "\" lacks \"" << needle << "\"";
}

TEST(LayoutComposeTest, ComposeRejectsOutOfRangeParts) {
  const Layout flurry = must_parse("flurry");
  const std::uint64_t max_ticks = flurry.time_field().max_value();
  EXPECT_TRUE(flurry.compose({.ticks = max_ticks, .clock = 0, .node = 1023, .seq = 4095}).ok());
  expect_out_of_range(flurry.compose({.ticks = max_ticks + 1, .clock = 0, .node = 0, .seq = 0}),
                      "time");
  expect_out_of_range(flurry.compose({.ticks = ~std::uint64_t{0}, .clock = 0, .node = 0, .seq = 0}),
                      "time");
  expect_out_of_range(flurry.compose({.ticks = 0, .clock = 0, .node = 0, .seq = 4096}), "seq");
  expect_out_of_range(flurry.compose({.ticks = 0, .clock = 0, .node = 1024, .seq = 0}), "node");
  expect_out_of_range(flurry.compose({.ticks = 0, .clock = 0, .node = ~std::uint64_t{0}, .seq = 0}),
                      "node");
  // No clock field: any clock but 0 is out of range.
  expect_out_of_range(flurry.compose({.ticks = 0, .clock = 1, .node = 0, .seq = 0}), "clock");

  const Layout multi = must_parse("multiclock");
  EXPECT_TRUE(multi.compose({.ticks = 0, .clock = 15, .node = 255, .seq = 1023}).ok());
  expect_out_of_range(multi.compose({.ticks = 0, .clock = 16, .node = 0, .seq = 0}), "clock");
  expect_out_of_range(multi.compose({.ticks = 0, .clock = 0, .node = 256, .seq = 0}), "node");
  expect_out_of_range(multi.compose({.ticks = 0, .clock = 0, .node = 0, .seq = 1024}), "seq");

  const Layout twitter = must_parse("twitter");
  EXPECT_TRUE(twitter.compose({.ticks = 0, .clock = 0, .node = 1023, .seq = 0}).ok());
  expect_out_of_range(twitter.compose({.ticks = 0, .clock = 0, .node = 1024, .seq = 0}), "node");

  const Layout js = must_parse("js-safe");
  expect_out_of_range(
      js.compose({.ticks = std::uint64_t{1} << 41, .clock = 0, .node = 0, .seq = 0}), "time");
  expect_out_of_range(js.compose({.ticks = 0, .clock = 0, .node = 32, .seq = 0}), "node");
  expect_out_of_range(js.compose({.ticks = 0, .clock = 0, .node = 0, .seq = 128}), "seq");
}

void expect_decompose_rejected(const Layout& l, std::uint64_t id) {
  const Result<IdParts> r = l.decompose(id);
  ASSERT_FALSE(r.ok()) << l.to_string() << " decomposed " << id;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
}

TEST(LayoutComposeTest, DecomposeRejectsBitsAboveTheTotalWidth) {
  const std::uint64_t bit63 = std::uint64_t{1} << 63;
  for (std::string_view name : kPresetNames) {
    SCOPED_TRACE(std::string(name));
    const Layout l = must_parse(live_text(name));
    expect_decompose_rejected(l, bit63);
    expect_decompose_rejected(l, ~std::uint64_t{0});
    expect_decompose_rejected(l, bit63 | 1);
    EXPECT_TRUE(l.decompose((std::uint64_t{1} << l.total_bits()) - 1).ok());
  }
  const Layout js = must_parse("js-safe");
  expect_decompose_rejected(js, std::uint64_t{1} << 53);
  expect_decompose_rejected(js, (std::uint64_t{1} << 53) | 5);
  expect_decompose_rejected(js, std::uint64_t{1} << 62);
  EXPECT_TRUE(js.decompose((std::uint64_t{1} << 53) - 1).ok());
}

TEST(LayoutComposeTest, NodeSpreadsOverNodeFieldsFirstMostSignificant) {
  const Layout l = must_parse("twitter");
  const Field* dc = find_field(l, "datacenter");
  const Field* worker = find_field(l, "worker");
  ASSERT_NE(dc, nullptr);
  ASSERT_NE(worker, nullptr);
  const Result<std::uint64_t> id =
      l.compose({.ticks = 5, .clock = 0, .node = 3 << 5 | 7, .seq = 9});
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(l.field_value(*id, *dc), 3u);
  EXPECT_EQ(l.field_value(*id, *worker), 7u);
  EXPECT_EQ(l.field_value(*id, l.time_field()), 5u);
  EXPECT_EQ(l.field_value(*id, l.seq_field()), 9u);
  EXPECT_EQ(*id,
            (std::uint64_t{5} << 22) | (std::uint64_t{3} << 17) | (std::uint64_t{7} << 12) | 9);
  const Result<IdParts> parts = l.decompose(*id);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->node, 3u << 5 | 7);

  // Node fields separated by other fields still concatenate in layout order.
  const Layout split = must_parse("time:41,a:3,seq:10,clock:2,b:7;epoch=2025-01-01Z");
  const Field* a = find_field(split, "a");
  const Field* b = find_field(split, "b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shift, 0);
  const Result<std::uint64_t> sid =
      split.compose({.ticks = 1, .clock = 2, .node = 5 << 7 | 100, .seq = 1000});
  ASSERT_TRUE(sid.ok()) << sid.status().to_string();
  EXPECT_EQ(split.field_value(*sid, *a), 5u);
  EXPECT_EQ(split.field_value(*sid, *b), 100u);
  EXPECT_EQ(split.field_value(*sid, *split.clock_field()), 2u);
  EXPECT_EQ(split.decompose(*sid)->node, 5u << 7 | 100);
}

// ---------------------------------------------------------------------------------------------
// ticks_at / time_of

TEST(LayoutTimeTest, TicksAtFloorsBeforeAndAfterTheEpoch) {
  const Layout ms = must_parse("flurry");
  const TimePoint e = ms.epoch();
  EXPECT_EQ(ms.ticks_at(e), 0);
  EXPECT_EQ(ms.ticks_at(e + nanoseconds(1)), 0);
  EXPECT_EQ(ms.ticks_at(e + milliseconds(1) - nanoseconds(1)), 0);
  EXPECT_EQ(ms.ticks_at(e + milliseconds(1)), 1);
  EXPECT_EQ(ms.ticks_at(e - nanoseconds(1)), -1);
  EXPECT_EQ(ms.ticks_at(e - milliseconds(1)), -1);
  EXPECT_EQ(ms.ticks_at(e - milliseconds(1) - nanoseconds(1)), -2);
  EXPECT_EQ(ms.ticks_at(e - milliseconds(2)), -2);
  EXPECT_EQ(ms.ticks_at(ms.end()), std::int64_t{1} << 41);

  const Layout sony = must_parse("sonyflake");
  const TimePoint se = sony.epoch();
  EXPECT_EQ(sony.ticks_at(se - nanoseconds(1)), -1);
  EXPECT_EQ(sony.ticks_at(se + milliseconds(10) - nanoseconds(1)), 0);
  EXPECT_EQ(sony.ticks_at(se + milliseconds(10)), 1);
  EXPECT_EQ(sony.ticks_at(se + milliseconds(25)), 2);
  EXPECT_EQ(sony.ticks_at(se - milliseconds(10)), -1);
  EXPECT_EQ(sony.ticks_at(se - milliseconds(10) - nanoseconds(1)), -2);

  const Layout secs = must_parse("uid-generator");
  EXPECT_EQ(secs.ticks_at(secs.epoch() - nanoseconds(1)), -1);
  EXPECT_EQ(secs.ticks_at(secs.epoch() + seconds(86400)), 86400);
}

TEST(LayoutTimeTest, TimeOfIsExactAtUnitBoundaries) {
  for (std::string_view name : kPresetNames) {
    SCOPED_TRACE(std::string(name));
    const Layout l = must_parse(live_text(name));
    EXPECT_EQ(l.time_of(0), l.epoch());
    EXPECT_EQ(l.time_of(1), l.epoch() + l.unit());
    EXPECT_EQ(l.time_of(1000), l.epoch() + 1000 * l.unit());
    EXPECT_EQ(l.time_of(std::uint64_t{1} << l.time_field().bits), l.end());
    for (std::uint64_t k :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{12345}, l.time_field().max_value()}) {
      // A field that ends beyond what a TimePoint holds (tso: 1,115 years of milliseconds)
      // saturates there: its last tick has no exact time.
      if (l.end() == TimePoint::max() && k == l.time_field().max_value()) continue;
      EXPECT_EQ(l.ticks_at(l.time_of(k)), static_cast<std::int64_t>(k)) << k;
    }
  }
}

TEST(LayoutTimeTest, TimeOfTicksAtBracketsEveryInstant) {
  for (std::string_view name : kPresetNames) {
    SCOPED_TRACE(std::string(name));
    const Layout l = must_parse(live_text(name));
    std::mt19937_64 rng(7);
    const std::int64_t span = (l.end() - l.epoch()).count();
    for (int i = 0; i < 10'000; ++i) {
      const TimePoint t =
          l.epoch() + Nanos(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span)));
      const std::int64_t k = l.ticks_at(t);
      ASSERT_GE(k, 0);
      const auto uk = static_cast<std::uint64_t>(k);
      ASSERT_LE(l.time_of(uk), t) << format_time(t);
      ASSERT_LT(t, l.time_of(uk + 1)) << format_time(t);
    }
  }
}

// ticks_at() multiplies by a reciprocal of the unit instead of dividing (layout.h). Every kind
// of unit the parser accepts, over the whole range where the reciprocal applies (0 <= t - epoch
// < 2^63; the epoch is 1970 so that t can reach it): around the first and the last multiples of
// the unit, where a reciprocal one too small or too large first shows, and random values of
// every magnitude. The reference is plain 64-bit division.
TEST(LayoutTimeTest, TicksAtMatchesDivisionForEveryKindOfUnit) {
  constexpr std::uint64_t kLimit = std::uint64_t{1} << 63;  // t - epoch < 2^63
  for (std::string_view unit : {"1us", "3us", "7us", "1ms", "7ms", "10ms", "4096us", "1s", "13s",
                                "999999937us", "1000000000us", "1000000000s"}) {
    SCOPED_TRACE(std::string(unit));
    const Layout l = must_parse("time:41@" + std::string(unit) + ",node:10,seq:12;epoch=0");
    ASSERT_EQ(l.epoch().time_since_epoch().count(), 0);
    const auto d = static_cast<std::uint64_t>(l.unit().count());
    const auto check = [&](std::uint64_t n) {
      if (n >= kLimit) return;
      ASSERT_EQ(l.ticks_at(TimePoint(Nanos(static_cast<std::int64_t>(n)))),
                static_cast<std::int64_t>(n / d))
          << "t - epoch = " << n << " ns";
    };
    const std::uint64_t last_k = (kLimit - 1) / d;
    for (std::uint64_t k = 0; k < 2000; ++k) {
      for (const std::uint64_t base : {k, last_k - k}) {
        check(base * d - 1);  // wraps for base 0: skipped by check()
        check(base * d);
        check(base * d + 1);
        check(base * d + d - 1);
      }
    }
    check(kLimit - 1);
    std::mt19937_64 rng(19);
    for (int i = 0; i < 1'000'000; ++i) {
      const int bits = 1 + static_cast<int>(rng() % 63);  // every magnitude up to 2^63
      check(rng() >> (64 - bits));
    }
  }
}

// Before the epoch ticks_at() divides, rounding towards minus infinity, for the same units.
TEST(LayoutTimeTest, TicksAtBeforeTheEpochFloors) {
  for (std::string_view unit : {"1us", "7ms", "10ms", "1s", "999999937us"}) {
    SCOPED_TRACE(std::string(unit));
    const Layout l =
        must_parse("time:41@" + std::string(unit) + ",node:10,seq:12;epoch=2025-01-01Z");
    const std::int64_t d = l.unit().count();
    EXPECT_EQ(l.ticks_at(l.epoch()), 0);
    EXPECT_EQ(l.ticks_at(l.epoch() - Nanos(1)), -1);
    EXPECT_EQ(l.ticks_at(l.epoch() - Nanos(d)), -1);
    EXPECT_EQ(l.ticks_at(l.epoch() - Nanos(d + 1)), -2);
    std::mt19937_64 rng(5);
    for (int i = 0; i < 100'000; ++i) {
      const auto before = static_cast<std::int64_t>(rng() >> (1 + rng() % 63));
      const std::int64_t q = -((before + d - 1) / d);  // floor(-before / d)
      ASSERT_EQ(l.ticks_at(l.epoch() - Nanos(before)), q) << before;
    }
  }
}

TEST(LayoutTimeTest, TimeOfSaturates) {
  const Layout l = must_parse("flurry");
  EXPECT_EQ(l.time_of(~std::uint64_t{0}), TimePoint::max());
}

TEST(LayoutTimeTest, TicksAtFarFromTheEpoch) {
  // ticks_at() is defined for every TimePoint; the result always fits in 64 bits because a unit
  // is at least a microsecond.
  const Layout l = must_parse("flurry");
  const std::int64_t e_ns = l.epoch().time_since_epoch().count();
  const std::int64_t max_ns = TimePoint::max().time_since_epoch().count();
  EXPECT_EQ(l.ticks_at(TimePoint::max()), (max_ns - e_ns) / 1'000'000);
  // floor((min - epoch) / 1ms), computed in 128 bits.
  __extension__ using Int128 = __int128;
  const Int128 d = static_cast<Int128>(TimePoint::min().time_since_epoch().count()) - e_ns;
  Int128 q = d / 1'000'000;
  if (d % 1'000'000 != 0) --q;  // d < 0: floor
  const auto expected_min = static_cast<std::int64_t>(q);
  EXPECT_EQ(l.ticks_at(TimePoint::min()), expected_min);
}

// A layout's identity is its structure: field names are labels.
TEST(LayoutStructureTest, FieldNamesAreLabels) {
  const auto structure = [](std::string_view text) {
    Result<Layout> l = Layout::parse(text);
    EXPECT_TRUE(l.ok()) << text;
    return l.ok() ? l->structure() : std::string();
  };
  const std::string node = structure("time:41@1ms,node:10,seq:12;epoch=2025-01-01Z");
  EXPECT_EQ(node, structure("time:41@1ms,worker:10,seq:12;epoch=2025-01-01Z"));
  EXPECT_EQ(node, structure("time:41@1ms,datacenter:5,worker:5,seq:12;epoch=2025-01-01Z"));
  EXPECT_EQ(node, structure("flurry"));
  EXPECT_NE(node, structure("time:41@1ms,node:10,seq:12;epoch=2025-01-02Z"));
  EXPECT_NE(node, structure("time:41@1ms,node:11,seq:11;epoch=2025-01-01Z"));
  EXPECT_NE(node, structure("time:41@10ms,node:10,seq:12;epoch=2025-01-01Z"));
  // The field order below time matters (Sonyflake puts the machine last).
  EXPECT_NE(node, structure("time:41@1ms,seq:12,node:10;epoch=2025-01-01Z"));
  // Node bits split around seq stay apart, and the structure parses back to itself.
  const std::string split = structure("time:41@1ms,dc:3,seq:12,worker:7;epoch=2025-01-01Z");
  EXPECT_NE(split, structure("time:41@1ms,dc:4,seq:12,worker:6;epoch=2025-01-01Z"));
  EXPECT_EQ(split, structure(split));
  EXPECT_EQ(structure("multiclock"), structure(structure("multiclock")));
  EXPECT_TRUE(Layout::same_structure("time:41@1ms,node:10,seq:12;epoch=2025-01-01Z", "flurry"));
  EXPECT_FALSE(Layout::same_structure("not a layout", "flurry"));
  EXPECT_TRUE(Layout::same_structure("not a layout", "not a layout"));
}

}  // namespace
}  // namespace flurry
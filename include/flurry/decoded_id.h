// One ID taken apart with a layout: its fields, its time and its text in every encoding. The one
// decode model behind `flurry decode`, the HTTP decode routes (/v1/ids/{id},
// /decodeSnowflakeId) and the fuzzer. Pure functions, thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/codec.h"
#include "flurry/layout.h"
#include "flurry/status.h"

namespace flurry {

// One field of the layout and its value in the ID.
struct DecodedField {
  std::string name;
  FieldKind kind = FieldKind::kNode;
  int bits = 0;
  std::uint64_t value = 0;
};

// The ID in one encoding.
struct EncodedId {
  Encoding encoding = Encoding::kDecimal;
  std::string_view name;  // kEncodings' name, e.g. "hex"
  std::string text;
};

struct DecodedId {
  std::uint64_t id = 0;
  IdParts parts;                     // ticks, clock generation, node ID, seq
  bool has_clock = false;            // the layout has a clock field (parts.clock means something)
  TimePoint time{};                  // layout.time_of(parts.ticks)
  std::int64_t unix_ms = 0;          // `time` in whole Unix milliseconds (floor)
  std::vector<DecodedField> fields;  // every field of the layout, most significant first
  std::array<EncodedId, kEncodings.size()> encodings;  // in kEncodings' order
};

// Takes `id` apart with `layout` (whether or not the layout is still alive: old IDs decode too).
// INVALID_ARGUMENT / BAD_INPUT when the layout cannot have produced it (bits set above its
// width).
[[nodiscard]] Result<DecodedId> decode_id(const Layout& layout, std::uint64_t id);

// Parses `text` in `encoding` (decode_id in codec.h), then takes it apart as above.
// INVALID_ARGUMENT / BAD_INPUT for bad text, saying what is wrong with it.
[[nodiscard]] Result<DecodedId> decode_id(const Layout& layout, std::string_view text,
                                          Encoding encoding);

}  // namespace flurry

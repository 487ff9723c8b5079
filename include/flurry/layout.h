// Layouts: how the bits of a 64-bit ID are divided into fields.
//
// A layout names its fields from most to least significant. `time` is always the top field and
// the bits above the layout's width (the sign bit at least) are always 0. Below `time` come, in
// any order, an optional `clock` field (rollback generations), node fields (any other name: `node`,
// `datacenter`, `worker`, `shard`, ...) and `seq`. A layout without a node field has one node ID,
// 0: its IDs come from one process at a time (the timestamp oracle's `tso` preset).
//
// Text form:  FIELDS[;epoch=TIME][;bits=N]   or   PRESET[;epoch=TIME][;bits=N]
//   FIELDS  name:width[,name:width...], the time field written time:width@unit
//           (unit: N us | N ms | N s; default 1ms)
//   epoch   ISO-8601 UTC (2025-01-01Z, 2010-11-04T01:42:54.657Z) or Unix milliseconds
//   bits    the total width, 63 unless given (js-safe uses 53)
// e.g. "time:41@1ms,datacenter:5,worker:5,seq:12;epoch=2010-11-04T01:42:54.657Z".
//
// A Layout is immutable once parsed and safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flurry/clock.h"
#include "flurry/status.h"

namespace flurry {

enum class FieldKind { kTime, kClock, kNode, kSeq };

struct Field {
  std::string name;
  FieldKind kind;
  int bits;   // width, >= 1
  int shift;  // position of the least significant bit within the ID

  [[nodiscard]] std::uint64_t max_value() const noexcept { return (std::uint64_t{1} << bits) - 1; }
};

// The variable parts of one ID. `node` is the node ID: the node fields' values concatenated in
// layout order (first node field most significant), so a layout with datacenter:5,worker:5 has
// node IDs 0..1023 with node = datacenter << 5 | worker.
struct IdParts {
  std::uint64_t ticks = 0;  // time units since the epoch
  std::uint64_t clock = 0;  // clock generation; always 0 without a clock field
  std::uint64_t node = 0;
  std::uint64_t seq = 0;

  friend bool operator==(const IdParts&, const IdParts&) = default;
};

class Layout {
 public:
  // Parses and validates the text form or a preset name (see presets()). Checks the structure:
  // field names and widths, exactly one time and one seq field, at most one clock field,
  // time on top, widths summing to the total width, the unit and epoch.
  // Errors are INVALID_ARGUMENT (reason BAD_INPUT) with a message saying what is wrong and where.
  // Does not check that the time field is still alive: see check_alive().
  [[nodiscard]] static Result<Layout> parse(std::string_view text);

  // The built-in presets, in documentation order.
  struct Preset {
    std::string_view name;
    std::string_view text;
    std::string_view summary;
  };
  [[nodiscard]] static std::span<const Preset> presets() noexcept;

  // OK when the time field's end lies after `now`. Otherwise FAILED_PRECONDITION, reason
  // TIME_EXHAUSTED, with a message that says when the field ran out and how to fix it. Issuing
  // IDs requires a live layout; decoding old IDs does not.
  [[nodiscard]] Status check_alive(TimePoint now) const;

  // Canonical text form; parse(to_string()) yields an equal layout.
  [[nodiscard]] std::string to_string() const;
  // The layout's identity: what makes two layouts' IDs collide. The canonical text with every
  // field named after its kind (time, clock, node, seq) and adjacent node fields joined, so that
  // layouts giving every ID the same bits have one structure whatever their fields are called
  // (`node:10` and `worker:10`; `datacenter:5,worker:5` and `node:10`, whose node IDs are the same
  // numbers). Parses back to a layout of the same structure. Everything that decides whether two
  // layouts are one (the host guard, horizon records, registries, floors) compares this, never
  // to_string(): field names are labels.
  [[nodiscard]] std::string structure() const;
  [[nodiscard]] bool same_structure(const Layout& other) const {
    return structure() == other.structure();
  }
  // The same for layout texts recorded elsewhere (a registry's, a horizon file's): true when both
  // parse and have one structure, or when the texts are equal (a text that does not parse is only
  // ever the same as itself).
  [[nodiscard]] static bool same_structure(std::string_view a, std::string_view b);

  // The preset this layout was parsed from, or empty.
  [[nodiscard]] const std::string& preset_name() const noexcept { return preset_; }

  [[nodiscard]] const std::vector<Field>& fields() const noexcept { return fields_; }
  [[nodiscard]] const Field& time_field() const noexcept { return fields_[time_index_]; }
  [[nodiscard]] const Field& seq_field() const noexcept { return fields_[seq_index_]; }
  // nullptr when the layout has no clock field.
  [[nodiscard]] const Field* clock_field() const noexcept {
    return clock_index_ ? &fields_[*clock_index_] : nullptr;
  }
  [[nodiscard]] int total_bits() const noexcept { return total_bits_; }
  [[nodiscard]] int node_bits() const noexcept { return node_bits_; }

  [[nodiscard]] TimePoint epoch() const noexcept { return epoch_; }
  [[nodiscard]] Nanos unit() const noexcept { return unit_; }
  // epoch + 2^time_bits * unit: the first instant the time field cannot represent. Saturates at
  // TimePoint::max() for fields too wide to end within the representable range.
  [[nodiscard]] TimePoint end() const noexcept { return end_; }
  // Most IDs one node can issue per second: 2^seq_bits per unit (times the clock generations
  // is not counted: they are for rollbacks, not throughput).
  [[nodiscard]] double rate_limit_per_second() const noexcept;
  [[nodiscard]] std::uint64_t node_count() const noexcept { return std::uint64_t{1} << node_bits_; }
  // 2^clock_bits, or 1 without a clock field.
  [[nodiscard]] std::uint64_t clock_generations() const noexcept;

  // Exact inverses. compose() checks every part against its field's width (OUT_OF_RANGE,
  // naming the field); decompose() rejects IDs with bits set above total_bits().
  [[nodiscard]] Result<std::uint64_t> compose(const IdParts& parts) const;
  [[nodiscard]] Result<IdParts> decompose(std::uint64_t id) const;

  // The raw value of one field of an ID (no range check on the ID).
  [[nodiscard]] std::uint64_t field_value(std::uint64_t id, const Field& field) const noexcept {
    return (id >> field.shift) & field.max_value();
  }
  // The wall time a tick count stands for: epoch + ticks * unit (saturating like end()).
  [[nodiscard]] TimePoint time_of(std::uint64_t ticks) const noexcept;
  // Whole units since the epoch at `t` (floor; negative before the epoch). Defined for every
  // TimePoint. Inline because the generator calls it on every reservation: at or after the
  // epoch it is one multiplication by the unit's reciprocal, never a division.
  [[nodiscard]] std::int64_t ticks_at(TimePoint t) const noexcept {
    std::int64_t since_epoch = 0;
    if (!__builtin_sub_overflow(t.time_since_epoch().count(), epoch_.time_since_epoch().count(),
                                &since_epoch) &&
        since_epoch >= 0) {
      __extension__ using Uint128 = unsigned __int128;  // GCC/Clang; -Wpedantic needs the marker
      const Uint128 product =
          static_cast<Uint128>(static_cast<std::uint64_t>(since_epoch)) * unit_reciprocal_;
      return static_cast<std::int64_t>(static_cast<std::uint64_t>(product >> 64) >>
                                       unit_reciprocal_high_shift_);
    }
    return ticks_at_by_division(t);
  }

  friend bool operator==(const Layout& a, const Layout& b) {
    return a.to_string() == b.to_string();
  }

 private:
  Layout() = default;
  std::string preset_;
  std::vector<Field> fields_;
  std::size_t time_index_ = 0;
  std::size_t seq_index_ = 0;
  std::optional<std::size_t> clock_index_;
  int total_bits_ = 63;
  int node_bits_ = 0;
  TimePoint epoch_{};
  Nanos unit_{};
  TimePoint end_{};
  // floor(n / unit) == (n * unit_reciprocal_) >> (64 + unit_reciprocal_high_shift_) for
  // 0 <= n < 2^63, with a 128-bit product (Granlund and Montgomery, "Division by invariant
  // integers using multiplication", 1994, theorem 4.2): with l = ceil(log2(unit)), the
  // reciprocal is ceil(2^(63 + l) / unit), which fits 64 bits, and the shift is 63 + l, at least
  // 64 since a unit is at least 1 us (so only the product's high half is shifted).
  std::uint64_t unit_reciprocal_ = 0;
  int unit_reciprocal_high_shift_ = 0;

  // ticks_at() where the reciprocal does not apply: before the epoch, and differences that do
  // not fit 64 bits. Plain (128-bit) division, rounding towards minus infinity.
  [[nodiscard]] std::int64_t ticks_at_by_division(TimePoint t) const noexcept;
};

}  // namespace flurry

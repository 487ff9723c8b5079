// How many IDs a request asks for, checked once where it enters (a transport, the CLI, a test)
// and carried down to the source that fills it (the generator's service, SegmentService), which
// checks it no more.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "flurry/status.h"

namespace flurry {

// The most any IdCount holds, whatever the max it is made against: 2^38, so that a count never
// reaches the index bits of SegmentService's claims (ranges hold at most 2^38 IDs too).
inline constexpr std::uint64_t kMaxIdCount = std::uint64_t{1} << 38;

// How the messages below name the place a value came from: each transport words its own.
// {"parameter", "count"} reads `parameter "count"` (an HTTP query parameter), {"field", "count"}
// `field "count"` (a gRPC message field); without a kind, the bare name: `count`.
struct FieldName {
  std::string_view kind;  // "parameter", "field", or empty
  std::string_view name = "count";

  // `<kind> "<name>"`, or `<name>` without a kind.
  [[nodiscard]] std::string words() const;
};

// How many IDs (or order numbers, or a range's size) a request asks for: 1 <= value() <= the
// max it was made against (max_batch of the source that serves it) and <= kMaxIdCount (a larger
// max counts as kMaxIdCount). Immutable; a plain value.
class IdCount {
 public:
  // `n` checked against 1..max. INVALID_ARGUMENT / BAD_INPUT naming the field as `field`
  // words it (FieldName; here the bare `count`, HTTP's `parameter "count"`):
  //   count: 0 is too small (at least 1)
  //   count: 100001 is more than max_batch (100000)
  [[nodiscard]] static Result<IdCount> of(std::uint64_t n, std::uint64_t max, FieldName field = {});

  // The text of a value, as a query parameter gives it: the messages above, and for text that
  // is empty or not digits
  //   count is empty; expected a whole number from 1 to 100000
  //   count: "x" is not a whole number from 1 to 100000
  // A number too large for 64 bits is "more than max_batch" as any other above max.
  [[nodiscard]] static Result<IdCount> parse(std::string_view text, std::uint64_t max,
                                             FieldName field = {});

  // A single ID: always valid (every max is at least 1).
  [[nodiscard]] static constexpr IdCount one() noexcept { return IdCount(1); }

  [[nodiscard]] constexpr std::uint64_t value() const noexcept { return n_; }

 private:
  explicit constexpr IdCount(std::uint64_t n) noexcept : n_(n) {}
  std::uint64_t n_;
};

}  // namespace flurry

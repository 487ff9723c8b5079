// Values parsed once at the edge of a transport, carrying their proof: an IdCount is within
// 1..max, a SegmentTag is a valid tag name. Made only by their factories; nothing below the edge
// (the operations layer, the services) checks them again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "flurry/status.h"

namespace flurry::ops {

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
// max it was made against (max_batch of the source that serves it).
class IdCount {
 public:
  // `n` checked against 1..max. INVALID_ARGUMENT / BAD_INPUT naming the field as `field`
  // words it (FieldName; here the bare `count`, HTTP's `parameter "count"`):
  //   count: 0 is too small (at least 1)
  //   count: 100001 is more than max_batch (100000)
  // `field` names the parameter or message field the value came from ("count", "size").
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

// A segment tag's name, checked once (check_segment_tag in flurry/segment_store.h: 1 to 128
// bytes of [A-Za-z0-9._-], not "." nor ".."). Owns its text, so a deferred request keeps it.
class SegmentTag {
 public:
  // INVALID_ARGUMENT / BAD_INPUT: `<where> is not a valid tag name: <what is wrong>`, where
  // `where` says where the text came from ("the tag in the path", "parameter \"tag\"",
  // "field \"tag\"").
  [[nodiscard]] static Result<SegmentTag> of(std::string_view name, std::string_view where);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::string_view view() const noexcept { return name_; }

 private:
  explicit SegmentTag(std::string name) noexcept : name_(std::move(name)) {}
  std::string name_;
};

}  // namespace flurry::ops

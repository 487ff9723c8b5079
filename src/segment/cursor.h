// Internal: the layout of a segment tag's cursor and the check that keeps its short epoch from
// wrapping onto a live range (segment_tag.cc explains the protocol).
#pragma once

#include <cstdint>

namespace flurry::internal {

// The cursor: the low 24 bits of the range's epoch, then 40 bits of index.
inline constexpr int kSegmentIndexBits = 40;
inline constexpr std::uint64_t kSegmentIndexMask = (std::uint64_t{1} << kSegmentIndexBits) - 1;
inline constexpr std::uint64_t kSegmentEpochMask =
    (std::uint64_t{1} << (64 - kSegmentIndexBits)) - 1;

// The cursor value that starts `epoch` (a 64-bit count of ranges, which never wraps).
[[nodiscard]] constexpr std::uint64_t segment_cursor_start(std::uint64_t epoch) noexcept {
  return (epoch & kSegmentEpochMask) << kSegmentIndexBits;
}

// Whether a claim may turn its indexes into IDs. `published` is the 64-bit epoch the caller read
// before its fetch_add, `cursor` what the fetch_add returned, `before` and `after` the 64-bit
// epoch stamps of the range record read around its parameters. The cursor's 24 bits alone could
// name a range 2^24 switches later; the full stamps cannot.
[[nodiscard]] constexpr bool segment_claim_is_current(std::uint64_t published, std::uint64_t cursor,
                                                      std::uint64_t before,
                                                      std::uint64_t after) noexcept {
  return before == after && before == published &&
         (published & kSegmentEpochMask) == (cursor >> kSegmentIndexBits);
}

}  // namespace flurry::internal

// Typed segment values for tests, made as an edge makes them: SegmentTag::of and IdCount::of.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "flurry/id_count.h"
#include "flurry/segment_store.h"

namespace flurry::testing {

// A tag name the test knows to be valid; a bad one is a bug in the test and ends the binary.
inline SegmentTag seg_tag(std::string_view name) {
  Result<SegmentTag> tag = SegmentTag::of(name);
  if (!tag.ok()) {
    std::fprintf(stderr, "seg_tag: %s\n", tag.status().to_string().c_str());
    std::abort();
  }
  return *tag;
}

// A count the test knows to be 1..kMaxIdCount; anything else ends the binary.
inline IdCount count_of(std::uint64_t n) {
  Result<IdCount> count = IdCount::of(n, kMaxIdCount);
  if (!count.ok()) {
    std::fprintf(stderr, "count_of: %s\n", count.status().to_string().c_str());
    std::abort();
  }
  return *count;
}

}  // namespace flurry::testing

// Internal: the JSON body of POST /v1/segments (docs/operations.md, "Segment mode"), read into a
// SegmentTagSpec. Depends on the core, the segment library and nlohmann-json only.
#pragma once

#include <string_view>

#include "flurry/segment_store.h"
#include "flurry/status.h"

namespace flurry::http {

// Reads {"tag":"orders","start":1,"step":1000,"description":"...","delta":1,"remainder":0,
// "strict":false}. "tag" is required; the others are optional and default as SegmentTagSpec does
// (start 1, step 1000, no description, delta 1, remainder 0, not strict). Numbers must be JSON
// integers from 0 to 2^64 - 1, "strict" true or false.
// INVALID_ARGUMENT saying what is wrong: an empty body, text that is not JSON (with the byte
// offset), anything but an object, an unknown or repeated field, a missing tag, a value of the
// wrong type. The values themselves (the tag's name, the step's range, ...) are not checked
// here: that is check_segment_tag_spec's job.
[[nodiscard]] Result<SegmentTagSpec> parse_segment_tag_body(std::string_view body);

}  // namespace flurry::http

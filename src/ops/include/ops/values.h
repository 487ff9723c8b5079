// Values parsed once at the edge of a transport, carrying their proof: an IdCount is within
// 1..max, a SegmentTag is a valid tag name. Made only by their factories; nothing below the edge
// (the operations layer, the services) checks them again.
#pragma once

#include "flurry/id_count.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"

namespace flurry::ops {

// How the messages name where a value came from, and how many IDs a request asks for: the
// core's FieldName and IdCount (flurry/id_count.h), which the services take as they are.
using FieldName = flurry::FieldName;
using IdCount = flurry::IdCount;

// A segment tag's name, checked once: the segment library's own proof (flurry/segment_store.h),
// which SegmentService and the stores take as it is.
using SegmentTag = flurry::SegmentTag;

}  // namespace flurry::ops

// Internal: the JSON that the HTTP routes answer with (docs/operations.md), written by hand into
// an OutBuf: a layout, a decoded ID, a segment tag's stored row and its node state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "flurry/decoded_id.h"
#include "flurry/layout.h"
#include "flurry/ops/operations.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "text.h"

namespace flurry::server {

// GET /v1/layout: written once, the node ID and max_batch filled in per request (a lost lease
// can move the service to another node ID; max_batch is lowered when the service starts).
class LayoutJson {
 public:
  explicit LayoutJson(const Layout& layout);
  void write(std::uint64_t node, std::uint64_t max_batch, OutBuf& body) const;

 private:
  std::string before_node_;  // up to and including "node":
};

// A tag as the store keeps it (the list's entries, "stored", the 201 of a creation).
void write_segment_row(const SegmentTagInfo& t, OutBuf& body);

// GET /v1/segments/{tag}: the node's buffers and counters and the stored row (null when the
// stores could not be read).
void write_segment_report(const ops::SegmentTagReport& report, OutBuf& body);

}  // namespace flurry::server

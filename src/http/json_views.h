// Internal: the JSON that the HTTP routes answer with (docs/operations.md), written by hand into
// an OutBuf: a layout, a decoded ID, a segment tag's stored row and its node state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "flurry/decoded_id.h"
#include "flurry/layout.h"
#include "flurry/segment_service.h"
#include "flurry/segment_store.h"
#include "flurry/wide_id.h"
#include "json_writer.h"
#include "ops/operations.h"
#include "text.h"

namespace flurry::http {

// GET /v1/layout: written once, the node ID and max_batch filled in per request (a lost lease
// can move the service to another node ID; max_batch is lowered when the service starts).
class LayoutJson {
 public:
  explicit LayoutJson(const Layout& layout);
  // The layout object as one value of `w`.
  void write(std::uint64_t node, std::uint64_t max_batch, JsonWriter& w) const;
  // The route's whole body: the object and a newline.
  void write(std::uint64_t node, std::uint64_t max_batch, OutBuf& body) const;

 private:
  std::string before_node_;  // the object's opening and every member before "node"
};

// How GET /v1/ids writes its IDs: {"ids":["..."]} (json), {"ids":[...]} (number, decimal only)
// or one per line (text).
enum class IdListFormat { kJson, kNumber, kText };

// The body of a successful /v1/ids: `ids` (at least one) in `codec`'s encoding (kNumber: decimal
// numbers, whatever the codec). Returns the body's content type. Reserves the codec's
// max_length() and 3 punctuation bytes an ID once, then writes in place. In decimal, an ID one
// above the one before it (most of a batch: consecutive sequence numbers of one tick) is the
// previous element copied with its last digits carried up, not converted again.
std::string_view write_id_list(IdListFormat format, const IdTextCodec& codec,
                               std::span<const std::uint64_t> ids, OutBuf& body);

// A tag as the store keeps it (the list's entries, "stored", the 201 of a creation).
void write_segment_row(const SegmentTagInfo& t, JsonWriter& w);

// GET /v1/segments/{tag}: the node's buffers and counters and the stored row (null when the
// stores could not be read); the whole body, newline included.
void write_segment_report(const ops::SegmentTagReport& report, OutBuf& body);

}  // namespace flurry::http

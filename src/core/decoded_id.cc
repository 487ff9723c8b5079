#include "flurry/decoded_id.h"

#include <chrono>
#include <utility>

namespace flurry {

Result<DecodedId> decode_id(const Layout& layout, std::uint64_t id) {
  Result<IdParts> parts = layout.decompose(id);
  if (!parts.ok()) return parts.status();  // says why this layout cannot have produced it
  DecodedId d;
  d.id = id;
  d.parts = *parts;
  d.has_clock = layout.clock_field() != nullptr;
  d.time = layout.time_of(parts->ticks);
  d.unix_ms = std::chrono::floor<std::chrono::milliseconds>(d.time).time_since_epoch().count();
  d.fields.reserve(layout.fields().size());
  for (const Field& f : layout.fields()) {
    d.fields.push_back(DecodedField{f.name, f.kind, f.bits, layout.field_value(id, f)});
  }
  for (std::size_t i = 0; i < kEncodings.size(); ++i) {
    d.encodings[i] = EncodedId{kEncodings[i].encoding, kEncodings[i].name,
                               encode_id(id, kEncodings[i].encoding)};
  }
  return d;
}

Result<DecodedId> decode_id(const Layout& layout, std::string_view text, Encoding encoding) {
  Result<std::uint64_t> id = decode_id(text, encoding);
  if (!id.ok()) return id.status();
  return decode_id(layout, *id);
}

}  // namespace flurry

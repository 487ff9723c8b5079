// Messages to typed values and back (messages.h).
#include "messages.h"

#include <utility>

#include "flurry/timefmt.h"
#include "flurry/timestamp_oracle.h"

namespace flurry::grpc_api {

using ops::IdCount;

Result<const IdTextCodec*> codec_of(const ops::Operations& ops, int value) {
  constexpr std::string_view kWhere = "field \"encoding\": ";
  if (value == v1::ENCODING_UNSPECIFIED) return ops.id_codecs().get(Encoding::kDecimal);
  const std::string& name = v1::Encoding_Name(static_cast<v1::Encoding>(value));
  constexpr std::string_view kPrefix = "ENCODING_";
  if (name.size() <= kPrefix.size()) {
    return InvalidArgument(std::string(kWhere) + std::to_string(value) +
                           " is not a value of flurry.v1.Encoding");
  }
  std::string lower = name.substr(kPrefix.size());
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return ops.id_codecs().parse(lower, kWhere);
}

void add_texts(const IdTextCodec& codec, std::span<const std::uint64_t> ids,
               google::protobuf::RepeatedPtrField<std::string>& texts) {
  texts.Reserve(static_cast<int>(ids.size()));
  for (const std::uint64_t id : ids) {
    std::string* text = texts.Add();
    text->resize(codec.max_length());
    text->resize(static_cast<std::size_t>(codec.write(text->data(), id) - text->data()));
  }
}

Status check_response_size(std::uint64_t count, const IdTextCodec& codec, std::uint64_t max_bytes) {
  std::uint64_t per_id = 8;
  if (codec.encoding() != Encoding::kDecimal) {
    // The longest text of the encoding, with its field tag and length byte.
    per_id += codec.max_length() + 2;
  }
  const std::uint64_t bound = count * per_id + 16;
  if (bound <= max_bytes) return OkStatus();
  return InvalidArgument("field \"count\": " + std::to_string(count) + " IDs in encoding " +
                         std::string(codec.encoding().name()) + " may need " +
                         std::to_string(bound) + " bytes, more than grpc_max_message_bytes (" +
                         std::to_string(max_bytes) + "); ask for fewer, or use StreamRange");
}

Result<NextCall> next_call(const ops::Operations& ops, const v1::NextRequest& req,
                           std::uint64_t max_message_bytes) {
  Result<IdCount> count = IdCount::of(req.count(), ops.max_batch(), kCountField);
  if (!count.ok()) return count.status();
  Result<const IdTextCodec*> codec = codec_of(ops, req.encoding());
  if (!codec.ok()) return codec.status();
  if (Status st = check_response_size(count->value(), **codec, max_message_bytes); !st.ok()) {
    return st;
  }
  return NextCall{*count, *codec};
}

Status issue_next(ops::Operations& ops, const NextCall& call, v1::NextResponse& resp,
                  Blocking blocking, ops::Deferral& deferral) {
  resp.mutable_ids()->Resize(static_cast<int>(call.count.value()), 0);
  std::span<std::uint64_t> out(resp.mutable_ids()->mutable_data(), call.count.value());
  Status st = ops.next_ids(call.count, out, blocking, deferral);
  if (st.ok() && call.codec->encoding() != Encoding::kDecimal) {
    add_texts(*call.codec, out, *resp.mutable_texts());
  }
  return st;
}

Result<ops::SegmentTag> tag_of(std::string_view tag) {
  return ops::SegmentTag::of(tag, "field \"tag\"");
}

Result<std::optional<ops::SegmentTag>> optional_tag_of(std::string_view tag) {
  if (tag.empty()) return std::optional<ops::SegmentTag>();
  Result<ops::SegmentTag> t = tag_of(tag);
  if (!t.ok()) return t.status();
  return std::optional<ops::SegmentTag>(std::move(t).value());
}

Result<IdCount> segment_count(const ops::Operations& ops, std::uint64_t n, std::string_view field) {
  if (!ops.segments_served()) return IdCount::one();
  return IdCount::of(n, ops.segment_max_batch(), {"field", field});
}

Result<SegmentCall> segment_call(const ops::Operations& ops, std::string_view tag, std::uint64_t n,
                                 std::string_view field) {
  Result<ops::SegmentTag> t = tag_of(tag);
  if (!t.ok()) return t.status();
  Result<IdCount> count = segment_count(ops, n, field);
  if (!count.ok()) return count.status();
  return SegmentCall{std::move(t).value(), *count};
}

Result<IdCount> tso_count(const ops::Operations& ops, std::uint64_t n) {
  if (!ops.tso_served()) return IdCount::one();
  return IdCount::of(n, ops.tso_max_batch(), kCountField);
}

Status issue_tso(ops::Operations& ops, IdCount count, v1::TsoResponse& resp, Blocking blocking,
                 ops::Deferral& deferral) {
  Result<TsoGrant> grant = ops.tso(count, blocking, deferral);
  if (!grant.ok()) return grant.status();
  resp.set_first(grant->first);
  resp.set_count(grant->count);
  return OkStatus();
}

void fill_tag(const SegmentTagInfo& info, v1::SegmentTag& out) {
  out.set_tag(info.tag);
  out.set_max_id(info.max_id);
  out.set_step(info.step);
  out.set_delta(info.delta);
  out.set_remainder(info.remainder);
  out.set_strict(info.strict);
  out.set_description(info.description);
  out.set_update_time(format_unix_ms(info.update_time_unix_ms));
}

}  // namespace flurry::grpc_api

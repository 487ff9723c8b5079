// flurry.v1 messages to the typed values of the operations layer (IdCount, SegmentTag, an
// IdTextCodec) and results back to messages: the checks every RPC makes on its fields before it
// calls an operation, written once for the handlers and the streams.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "flurry/codec.h"
#include "flurry/segment_store.h"
#include "flurry/status.h"
#include "flurry/v1/flurry.pb.h"
#include "ops/authorizer.h"
#include "ops/deferral.h"
#include "ops/operations.h"
#include "ops/values.h"

namespace flurry::grpc_api {

namespace v1 = ::flurry::v1;

// How gRPC's refusals name a request's count and its token (the operations layer names neither
// HTTP's parameter nor its header).
inline constexpr ops::FieldName kCountField{"field", "count"};
inline constexpr ops::CredentialWords kGrpcCredential{"authorization metadata: Bearer <token>",
                                                      "the authorization metadata"};

// The codec of a flurry.v1.Encoding, through the names HTTP's `encoding` parameter takes
// (ENCODING_BASE32 is "base32", ENCODING_UUIDV7 "uuidv7") and the one edge parser HTTP uses, so
// that an encoding the library gains is served here without a change, and uuidv7 or ulid on a
// layout that cannot carry them is refused with the codec's reason.
[[nodiscard]] Result<const IdTextCodec*> codec_of(const ops::Operations& ops, int value);

// Appends the text of every ID in `ids` to `texts`, written in place by `codec`.
void add_texts(const IdTextCodec& codec, std::span<const std::uint64_t> ids,
               google::protobuf::RepeatedPtrField<std::string>& texts);

// A response of `count` IDs as Next writes it (packed fixed64, and the texts unless decimal)
// fits in `max_bytes`: checked before anything is issued. INVALID_ARGUMENT naming "count" if not.
[[nodiscard]] Status check_response_size(std::uint64_t count, const IdTextCodec& codec,
                                         std::uint64_t max_bytes);

// One Next request (Ids.Next, or a message of Ids.Stream) checked: its count against max_batch,
// its encoding, and the size of its response against `max_message_bytes`.
struct NextCall {
  ops::IdCount count;
  const IdTextCodec* codec;  // one of Operations::id_codecs()
};
[[nodiscard]] Result<NextCall> next_call(const ops::Operations& ops, const v1::NextRequest& req,
                                         std::uint64_t max_message_bytes);

// Issues `call.count` IDs into `resp` (the IDs, and their texts unless decimal): the operation
// Ids.Next and each Stream message run. Operations::next_ids' errors (WOULD_BLOCK with
// `deferral` set under Blocking::kNever).
[[nodiscard]] Status issue_next(ops::Operations& ops, const NextCall& call, v1::NextResponse& resp,
                                Blocking blocking, ops::Deferral& deferral);

// The field "tag" of a request: INVALID_ARGUMENT naming it when it is not a tag's name.
[[nodiscard]] Result<ops::SegmentTag> tag_of(std::string_view tag);
// The same for an optional tag (OrderNumbers): none when empty.
[[nodiscard]] Result<std::optional<ops::SegmentTag>> optional_tag_of(std::string_view tag);

// The count of a segment call: against the segment service's max_batch; one when segment mode
// is off, so that the operation answers why (NOT_FOUND, segment mode is not served here).
[[nodiscard]] Result<ops::IdCount> segment_count(const ops::Operations& ops, std::uint64_t n,
                                                 std::string_view field);

// The tag and the count of a Segments call (Next's count, Range's size, named `field`), checked
// in that order.
struct SegmentCall {
  ops::SegmentTag tag;
  ops::IdCount count;
};
[[nodiscard]] Result<SegmentCall> segment_call(const ops::Operations& ops, std::string_view tag,
                                               std::uint64_t n, std::string_view field);

// The count of a Tso request: against the oracle's max_batch; one when the oracle is not served
// here, so that the operation answers why (NOT_FOUND / TSO_OFF).
[[nodiscard]] Result<ops::IdCount> tso_count(const ops::Operations& ops, std::uint64_t n);

// Takes one grant of `count` timestamps (Tso.Get and each Tso.Stream message) into `resp`.
// Operations::tso's errors (WOULD_BLOCK with `deferral` set under Blocking::kNever).
[[nodiscard]] Status issue_tso(ops::Operations& ops, ops::IdCount count, v1::TsoResponse& resp,
                               Blocking blocking, ops::Deferral& deferral);

// A tag's stored row as a flurry.v1.SegmentTag.
void fill_tag(const SegmentTagInfo& info, v1::SegmentTag& out);

}  // namespace flurry::grpc_api
